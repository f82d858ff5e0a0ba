"""Encoder, model resolution and the embedding cache, against the real offline MiniLM."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from retrievers.embeddings import (
    EmbeddingCache,
    ModelUnavailableError,
    SentenceEncoder,
    model_identity,
    resolve_model,
    text_key,
)

TEXTS = [
    "The Beatles were an English rock band formed in Liverpool in 1960.",
    "Liverpool is a city in Merseyside, England.",
    "Snowpiercer is a 2013 science fiction action film.",
    "Sandra Bullock is an American actress and producer.",
]


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder("minilm", device="cpu", batch_size=16).load()


def test_resolve_model_offline_package_path_and_hub_id(tmp_path: Path):
    minilm = Path(resolve_model("minilm"))
    assert (minilm / "modules.json").is_file()
    assert resolve_model(str(minilm)) == str(minilm.resolve())
    assert (
        resolve_model("sentence-transformers/all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"
    )
    with pytest.raises(ValueError, match="does not exist"):
        resolve_model(str(tmp_path / "no-such-model"))
    with pytest.raises(ValueError, match="empty model name"):
        resolve_model("  ")
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="is a file"):
        resolve_model(str(tmp_path / "weights.bin"))


def test_model_identity_follows_files_not_location(tmp_path: Path):
    src = Path(resolve_model("minilm"))
    copy = tmp_path / "minilm-copy"
    shutil.copytree(src, copy, symlinks=True)
    assert model_identity(str(copy)) == model_identity(str(src))
    config = copy / "config.json"
    config.write_text(config.read_text().replace("}", ', "garag_test": 1}', 1))
    assert model_identity(str(copy)) != model_identity(str(src))


def test_unknown_hub_model_fails_fast_with_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = SentenceEncoder("garag-test-org/no-such-model-xyz", device="cpu")  # cheap: nothing loaded yet
    started = time.time()
    with pytest.raises(ModelUnavailableError, match="not available offline") as err:
        enc.load()
    assert "dense.model" in str(err.value) and "path" in str(err.value)
    with pytest.raises(ModelUnavailableError, match="not available offline"):
        _ = enc.identity
    assert time.time() - started < 10


def test_encode_is_unit_float32_and_semantic(encoder: SentenceEncoder):
    vecs = encoder.encode(TEXTS)
    assert vecs.dtype == np.float32 and vecs.shape == (4, encoder.dim) == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    query = encoder.encode(["Where was the Beatles band founded?"])[0]
    assert int(np.argmax(vecs @ query)) == 0
    assert encoder.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        encoder.encode("a single string")


def test_cache_encodes_only_new_texts(encoder: SentenceEncoder, tmp_path: Path):
    cache = EmbeddingCache(encoder, tmp_path, dtype="float32")
    start = encoder.texts_encoded
    first = cache.encode_cached(TEXTS[:3])
    assert encoder.texts_encoded - start == 3
    # Rebuild with one extra sentence: exactly one text goes through the model.
    second = cache.encode_cached(TEXTS)
    assert encoder.texts_encoded - start == 4
    np.testing.assert_array_equal(second[:3], first)
    np.testing.assert_allclose(second, encoder.encode(TEXTS), atol=1e-6)  # batch padding: last-bit noise
    assert len(cache) == 4
    assert cache.path == tmp_path / f"embeddings-{encoder.identity}" / "embeddings.db"
    cache.close()

    # A new cache object (e.g. a new process) reads the same database and encodes nothing.
    start = encoder.texts_encoded
    reopened = EmbeddingCache(encoder, tmp_path, dtype="float32")
    again = reopened.encode_cached([TEXTS[3], TEXTS[0], TEXTS[3]])
    assert encoder.texts_encoded == start
    np.testing.assert_array_equal(again, second[[3, 0, 3]])


def test_cache_is_usable_from_another_thread_than_the_one_that_opened_it(encoder, tmp_path: Path):
    """garag serve loads a pipeline in one thread and verifies in another (SQLite ties a connection
    to its thread: each thread gets its own)."""
    import threading

    cache = EmbeddingCache(encoder, tmp_path, dtype="float32")
    first = cache.encode_cached(TEXTS[:2])
    got: dict[str, object] = {}

    def other() -> None:
        try:
            got["vecs"] = cache.encode_cached(TEXTS[:3])
        except Exception as e:  # noqa: BLE001 - reported below
            got["error"] = e

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert "error" not in got, got.get("error")
    np.testing.assert_array_equal(got["vecs"][:2], first)
    assert len(cache) == 3  # the other thread's insert is visible here
    cache.close()
    assert len(EmbeddingCache(encoder, tmp_path, dtype="float32")) == 3


def test_cache_deduplicates_and_keeps_order(encoder: SentenceEncoder, tmp_path: Path):
    cache = EmbeddingCache(encoder, tmp_path)
    start = encoder.texts_encoded
    vecs = cache.encode_cached([TEXTS[1], TEXTS[0], TEXTS[1]])
    assert encoder.texts_encoded - start == 2
    np.testing.assert_array_equal(vecs[0], vecs[2])
    assert float(vecs[0] @ vecs[1]) < 0.99
    assert cache.encode_cached([]).shape == (0, 384)


def test_float16_cache_is_close_unit_and_stable(encoder: SentenceEncoder, tmp_path: Path):
    cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
    fresh = cache.encode_cached(TEXTS)
    np.testing.assert_allclose(fresh, encoder.encode(TEXTS), atol=2e-3)
    np.testing.assert_allclose(np.linalg.norm(fresh, axis=1), 1.0, atol=1e-5)
    # What a later run reads back is bit-identical to what the first run returned.
    np.testing.assert_array_equal(
        EmbeddingCache(encoder, tmp_path, dtype="float16").encode_cached(TEXTS), fresh
    )
    # float32 and float16 entries for one text coexist; each dtype reads only its own.
    start = encoder.texts_encoded
    EmbeddingCache(encoder, tmp_path, dtype="float32").encode_cached(TEXTS[:1])
    assert encoder.texts_encoded - start == 1
    with pytest.raises(ValueError, match="dtype"):
        EmbeddingCache(encoder, tmp_path, dtype="int8")


def test_interrupted_encoding_keeps_committed_chunks(
    encoder: SentenceEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    real_encode = encoder.encode
    calls = {"n": 0}

    def interrupt_on_second_chunk(texts):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real_encode(texts)

    cache = EmbeddingCache(encoder, tmp_path, chunk_size=2)
    monkeypatch.setattr(encoder, "encode", interrupt_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        cache.encode_cached(TEXTS)
    monkeypatch.undo()
    assert len(cache) == 2
    start = encoder.texts_encoded
    cache.encode_cached(TEXTS)
    assert encoder.texts_encoded - start == 2


def test_text_key_is_sha256_of_exact_text():
    assert text_key("a") != text_key("a ")
    assert len(text_key("Liverpool")) == 32


def test_a_damaged_vector_is_encoded_again(encoder: SentenceEncoder, tmp_path: Path, caplog):
    import sqlite3

    cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
    good = cache.encode_cached(TEXTS)
    cache.close()
    con = sqlite3.connect(cache.path)
    key = text_key(TEXTS[2])
    (vec,) = con.execute("SELECT vec FROM vectors WHERE key=?", (key,)).fetchone()
    flipped = bytes([vec[0] ^ 0x04]) + vec[1:]  # one bit of the first component
    con.execute("UPDATE vectors SET vec=? WHERE key=?", (flipped, key))
    con.commit()
    con.close()

    start = encoder.texts_encoded
    cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
    with caplog.at_level("WARNING", logger="retrievers.embeddings"):
        again = cache.encode_cached(TEXTS)
    assert encoder.texts_encoded - start == 1  # only the damaged row
    np.testing.assert_allclose(again, good, atol=1e-3)  # re-encoded alone: batch padding noise
    assert "1 cached vectors fail their checksum" in caplog.text and str(cache.path) in caplog.text
    start = encoder.texts_encoded
    cache.encode_cached(TEXTS)  # the row was written again, whole
    assert encoder.texts_encoded == start
    cache.close()


def test_rows_of_an_older_cache_without_checksums_are_read(encoder: SentenceEncoder, tmp_path: Path):
    import sqlite3

    path = tmp_path / f"embeddings-{encoder.identity}" / "embeddings.db"
    path.parent.mkdir()
    vecs = encoder.encode(TEXTS[:2]).astype(np.float16)
    con = sqlite3.connect(path)  # the schema garag wrote before the crc column
    con.execute(
        "CREATE TABLE vectors (key BLOB NOT NULL, dtype TEXT NOT NULL, vec BLOB NOT NULL, "
        "PRIMARY KEY (key, dtype)) WITHOUT ROWID"
    )
    con.executemany(
        "INSERT INTO vectors VALUES (?,?,?)",
        [(text_key(t), "float16", v.tobytes()) for t, v in zip(TEXTS[:2], vecs, strict=True)],
    )
    con.commit()
    con.close()
    start = encoder.texts_encoded
    cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
    got = cache.encode_cached(TEXTS)
    assert encoder.texts_encoded - start == 2  # the two old rows were used as they are
    np.testing.assert_allclose(got[:2], vecs.astype(np.float32), atol=1e-3)
    assert cache.con.execute("SELECT COUNT(*) FROM vector_crc").fetchone()[0] == 2  # the new rows
    # that garag can still write to the file after this one opened it (its insert, verbatim)
    with cache.con:
        cache.con.execute(
            "INSERT OR REPLACE INTO vectors VALUES (?,?,?)", (b"k" * 32, "float16", vecs[0].tobytes())
        )
    cache.close()


def test_a_cache_with_the_crc_column_of_commits_ce95244_to_b73d332_is_read_and_written(
    encoder: SentenceEncoder, tmp_path: Path
):
    import sqlite3

    path = tmp_path / f"embeddings-{encoder.identity}" / "embeddings.db"
    path.parent.mkdir()
    vecs = encoder.encode(TEXTS[:1]).astype(np.float16)
    con = sqlite3.connect(path)  # that garag kept each vector's checksum in a 4th column
    con.execute(
        "CREATE TABLE vectors (key BLOB NOT NULL, dtype TEXT NOT NULL, vec BLOB NOT NULL, crc INTEGER, "
        "PRIMARY KEY (key, dtype)) WITHOUT ROWID"
    )
    con.execute("INSERT INTO vectors VALUES (?,?,?,?)", (text_key(TEXTS[0]), "float16", vecs[0].tobytes(), 1))
    con.commit()
    con.close()
    start = encoder.texts_encoded
    cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
    got = cache.encode_cached(TEXTS)  # was: "table vectors has 4 columns but 3 values were supplied"
    assert encoder.texts_encoded - start == len(TEXTS) - 1
    np.testing.assert_allclose(got[:1], vecs.astype(np.float32), atol=1e-3)
    assert cache.con.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == len(TEXTS)
    cache.close()


def test_an_unchecked_row_of_another_length_is_encoded_again(encoder: SentenceEncoder, tmp_path: Path):
    import sqlite3

    cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
    good = cache.encode_cached(TEXTS)
    cache.close()

    def damage(forget_length: bool) -> None:  # an older garag's row, cut short, without a checksum
        con = sqlite3.connect(cache.path)
        con.execute("UPDATE vectors SET vec = substr(vec, 1, 100) WHERE key = ?", (text_key(TEXTS[1]),))
        con.execute("DELETE FROM vector_crc WHERE key = ?", (text_key(TEXTS[1]),))
        if forget_length:  # a cache from before the length was recorded
            con.execute("DELETE FROM info WHERE name LIKE 'vector_bytes:%'")
        con.commit()
        con.close()

    # beside sound rows; alone; alone in a cache that does not record the length (the model says it)
    for texts, forget_length in ((TEXTS, False), (TEXTS[1:2], False), (TEXTS[1:2], True)):
        damage(forget_length)
        start = encoder.texts_encoded
        cache = EmbeddingCache(encoder, tmp_path, dtype="float16")
        got = cache.encode_cached(texts)
        assert encoder.texts_encoded - start == 1
        np.testing.assert_allclose(got, good[[TEXTS.index(t) for t in texts]], atol=1e-3)
        start = encoder.texts_encoded
        cache.encode_cached(texts)  # rewritten whole
        assert encoder.texts_encoded == start
        cache.close()


def test_a_file_sqlite_cannot_read_is_named(encoder: SentenceEncoder, tmp_path: Path):
    from garag.artifacts import ArtifactError

    cache = EmbeddingCache(encoder, tmp_path)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_bytes(b"not a database, but 100 bytes of text " * 3)
    with pytest.raises(ArtifactError, match="damaged embedding cache .*; delete it") as err:
        cache.encode_cached(TEXTS[:1])
    assert str(cache.path) in str(err.value)
    assert cache.path.read_bytes().startswith(b"not a database")  # left as it was: the user decides
