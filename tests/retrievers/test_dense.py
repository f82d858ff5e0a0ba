"""FaissDenseRetriever on the tiny fixture corpus with the real offline MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest

from garag.artifacts import read_meta
from garag.config import DenseConfig
from garag.store import SentenceStore, build_store
from garag.types import SentenceId
from garag.wiki import corpus_fingerprint
from retrievers.base import IndexContext, Retriever
from retrievers.dense import FaissDenseRetriever, choose_index, sentence_text
from retrievers.embeddings import SentenceEncoder

QUERIES = [
    "Which city did the Beatles come from?",
    "Sandra Bullock produced a TV sitcom.",
    "When was John Lennon born?",
    "Snowpiercer is a romantic comedy.",
]
SMALL_IVF = {"index": "ivf", "ivf_nlist": 4, "ivf_nprobe": 4}


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder("minilm", device="cpu", batch_size=32).load()


@pytest.fixture(scope="module")
def shared_ctx(
    tiny_store: SentenceStore, tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> IndexContext:
    """One cache for the read-only tests, so the 19 fixture sentences are encoded once per module."""
    cache = tmp_path_factory.mktemp("dense-cache")
    return IndexContext(tiny_store, cache, corpus_fingerprint(tiny_corpus), progress=False)


def _retriever(ctx: IndexContext, encoder: SentenceEncoder, **overrides) -> FaissDenseRetriever:
    config = DenseConfig(use_gpu="no", **overrides)
    return FaissDenseRetriever(config, ctx, encoder=encoder)


def test_paraphrased_query_finds_the_evidence(shared_ctx: IndexContext, encoder: SentenceEncoder):
    r = _retriever(shared_ctx, encoder)
    assert isinstance(r, Retriever)
    r.build()
    hits = r.retrieve(QUERIES[0], k=3)
    assert hits[0].sentence in {SentenceId("The_Beatles", 0), SentenceId("Liverpool", 0)}
    assert all(h.retriever == "dense" and h.query == QUERIES[0] for h in hits)
    assert (
        r.retrieve("Which film is a science fiction movie set on a train?", 1)[0].sentence.page
        == "Snowpiercer"
    )


def test_scores_are_sorted_cosines(shared_ctx: IndexContext, encoder: SentenceEncoder):
    r = _retriever(shared_ctx, encoder)
    r.build()
    n = len(shared_ctx.store)
    hits = r.retrieve(QUERIES[1], k=n)
    scores = [h.score for h in hits]
    assert len(hits) == n and scores == sorted(scores, reverse=True)
    assert all(abs(s) <= 1.0 + 1e-5 for s in scores)
    assert len({h.sentence for h in hits}) == n
    # Each score is the cosine of the query vector and the stored sentence vector.
    rows = [shared_ctx.store.row_of(h.sentence) for h in hits]
    expected = r.vectors(rows) @ r.encode_queries([QUERIES[1]])[0]
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def test_faiss_ids_are_store_rows(shared_ctx: IndexContext, encoder: SentenceEncoder):
    r = _retriever(shared_ctx, encoder)
    r.build()
    n = len(shared_ctx.store)
    vecs = r.vectors(np.arange(n))
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    scores, rows = r.search(vecs, 1)
    assert rows[:, 0].tolist() == list(range(n))
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-5)


@pytest.mark.parametrize("other", [SMALL_IVF, {"index": "hnsw", "hnsw_m": 8}])
def test_ivf_and_hnsw_agree_with_flat(shared_ctx: IndexContext, encoder: SentenceEncoder, other: dict):
    flat = _retriever(shared_ctx, encoder, index="flat")
    approx = _retriever(shared_ctx, encoder, **other)
    assert flat.build() != approx.build()
    assert approx.meta is not None and approx.meta["index_type"] == other["index"]
    for q_flat, q_approx in zip(
        flat.retrieve_batch(QUERIES, 5), approx.retrieve_batch(QUERIES, 5), strict=True
    ):
        assert q_approx[0].sentence == q_flat[0].sentence
        assert q_approx[0].score == pytest.approx(q_flat[0].score, abs=1e-5)
    if other["index"] == "ivf":  # nprobe == nlist: IVF is exhaustive, so whole rankings match
        assert [h.sentence for h in approx.retrieve(QUERIES[2], 19)] == [
            h.sentence for h in flat.retrieve(QUERIES[2], 19)
        ]


def test_auto_index_switches_above_flat_max(shared_ctx: IndexContext, encoder: SentenceEncoder):
    n = len(shared_ctx.store)
    assert choose_index(DenseConfig(), n, 384) == "flat"
    assert choose_index(DenseConfig(flat_max=n - 1), n, 384) == "hnsw"
    assert choose_index(DenseConfig(flat_max=n - 1, large_index="ivf"), n, 384) == "ivf"
    r = _retriever(shared_ctx, encoder, flat_max=n - 1, large_index="ivf", ivf_nprobe=1000)
    r.build()
    meta = r.meta or {}
    assert meta["index_type"] == "ivf" and meta["settings"]["ivf_nlist"] == round(4 * np.sqrt(n))
    assert r._index.nprobe == meta["settings"]["ivf_nlist"]  # nprobe is capped at nlist
    assert meta["n"] == n and meta["dim"] == 384 and meta["model"] == "minilm"


def test_second_build_is_a_noop(tiny_ctx: IndexContext, encoder: SentenceEncoder):
    first = _retriever(tiny_ctx, encoder)
    path = first.build()
    meta, mtime = read_meta(path), (path / "index.faiss").stat().st_mtime_ns
    start = encoder.texts_encoded
    second = _retriever(tiny_ctx, encoder)
    assert second.build() == path
    assert read_meta(path) == meta and (path / "index.faiss").stat().st_mtime_ns == mtime
    assert encoder.texts_encoded == start
    assert second.retrieve(QUERIES[0], 1)[0].sentence == first.retrieve(QUERIES[0], 1)[0].sentence
    # force rebuilds the index but every vector comes from the embedding cache.
    second.build(force=True)
    assert (read_meta(path) or {})["texts_encoded"] == 0


def test_one_new_sentence_encodes_one_text(
    tiny_corpus: Path, tiny_ctx: IndexContext, encoder: SentenceEncoder, tmp_path: Path
):
    _retriever(tiny_ctx, encoder).build()
    corpus = tmp_path / "wiki-pages"
    corpus.mkdir()
    lines = (tiny_corpus / "wiki-001.jsonl").read_text(encoding="utf-8")
    extra = {"id": "Ringo_Starr", "text": "", "lines": "0\tRingo Starr is an English drummer ."}
    (corpus / "wiki-001.jsonl").write_text(
        lines.rstrip("\n") + "\n" + json.dumps(extra) + "\n", encoding="utf-8"
    )
    build_store(corpus, tmp_path / "bigger.db", progress=False)
    bigger = IndexContext(
        SentenceStore(tmp_path / "bigger.db"), tiny_ctx.cache_dir, corpus_fingerprint(corpus), False
    )

    start = encoder.texts_encoded
    r = _retriever(bigger, encoder)
    r.build()
    assert encoder.texts_encoded - start == 1
    assert (r.meta or {})["texts_encoded"] == 1 and (r.meta or {})["n"] == len(tiny_ctx.store) + 1
    assert r.retrieve("Who is the drummer Ringo Starr?", 1)[0].sentence == SentenceId("Ringo_Starr", 0)


def test_title_prefix_and_detokenisation_change_the_text(shared_ctx: IndexContext, encoder: SentenceEncoder):
    raw = "Liverpool was an American garage rock band formed in 1965 -LRB- US -RRB- ."
    assert sentence_text("Liverpool_-LRB-band-RRB-", raw, True) == (
        "Liverpool (band): Liverpool was an American garage rock band formed in 1965 (US)."
    )
    assert sentence_text("Liverpool_-LRB-band-RRB-", raw, False).startswith("Liverpool was")
    with_title = _retriever(shared_ctx, encoder)
    without = _retriever(shared_ctx, encoder, title_prefix=False)
    assert with_title.build() != without.build()
    # Without the title, "It is on the eastern side of the Mersey Estuary." says nothing about Liverpool.
    row = shared_ctx.store.row_of(SentenceId("Liverpool", 1))
    q = with_title.encode_queries(["Liverpool"])[0]
    assert float(with_title.vectors([row])[0] @ q) > float(without.vectors([row])[0] @ q) + 0.1


def test_bad_input_is_rejected(shared_ctx: IndexContext, encoder: SentenceEncoder):
    r = _retriever(shared_ctx, encoder)
    with pytest.raises(RuntimeError, match="build"):
        r.retrieve(QUERIES[0], 5)
    r.build()
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="empty"):
            r.retrieve(bad, 5)
    with pytest.raises(ValueError, match="empty"):
        r.retrieve_batch([QUERIES[0], ""], 5)
    with pytest.raises(ValueError, match="k must be > 0"):
        r.retrieve(QUERIES[0], 0)
    with pytest.raises(ValueError, match="out of range"):
        r.vectors([0, len(shared_ctx.store)])
    assert r.retrieve_batch([], 5) == []
    assert len(r.retrieve(QUERIES[0], 1000)) == len(shared_ctx.store)
    with pytest.raises(ValueError, match="ivf_nlist"):
        _retriever(shared_ctx, encoder, index="ivf", ivf_nlist=1000).build()
    with pytest.raises(ValueError, match="ivf_pq needs at least 256 sentences"):
        _retriever(shared_ctx, encoder, index="ivf_pq", ivf_nlist=2).build()


@pytest.mark.skipif(faiss.get_num_gpus() > 0, reason="needs a machine without a FAISS GPU")
def test_use_gpu_yes_without_gpu_is_a_clear_error(shared_ctx: IndexContext, encoder: SentenceEncoder):
    config = DenseConfig().replace(use_gpu="yes")
    with pytest.raises(ValueError, match="use_gpu=yes"):
        FaissDenseRetriever(config, shared_ctx, encoder=encoder).build()
    auto = FaissDenseRetriever(config.replace(use_gpu="auto"), shared_ctx, encoder=encoder)
    auto.build()
    assert auto.retrieve(QUERIES[0], 1)


def test_ivf_pq_rescores_its_candidates_exactly(encoder: SentenceEncoder, tmp_path: Path):
    """IVF-PQ (8-bit product quantisation, the index that fits full FEVER in memory) on >= 256 real
    HoVer sentences: its candidates are re-scored with the stored vectors, so scores are exact
    cosines and rankings agree with the flat index (more so with more candidates re-scored)."""
    source = sorted((Path(__file__).resolve().parents[2] / "data" / "hover" / "wiki-pages").glob("*.jsonl"))[
        0
    ]
    lines, n = [], 0
    with source.open(encoding="utf-8") as f:
        while n < 320:
            line = f.readline()
            lines.append(line)
            n += sum(1 for row in json.loads(line)["lines"].split("\n") if row.split("\t")[1:2] != [""])
    corpus = tmp_path / "wiki-pages"
    corpus.mkdir()
    (corpus / "wiki-001.jsonl").write_text("".join(lines), encoding="utf-8")
    build_store(corpus, tmp_path / "store.db", progress=False)
    store = SentenceStore(tmp_path / "store.db")
    ctx = IndexContext(store, tmp_path / "cache", corpus_fingerprint(corpus), progress=False)
    flat = _retriever(ctx, encoder, index="flat")
    pq = dict(index="ivf_pq", ivf_nlist=4, ivf_nprobe=4, pq_m=8)
    refined, raw = _retriever(ctx, encoder, **pq), _retriever(ctx, encoder, **pq, pq_refine=1)
    flat.build()
    assert refined.build() == raw.build()  # pq_refine is a search-time knob: one artifact
    assert refined.meta is not None and refined.meta["index_type"] == "ivf_pq"
    queries = [s.text for s in store.sentences_by_rows(range(0, len(store), len(store) // 12))][:12]
    agree, agree_raw = 0, 0
    for exact, ref, approx in zip(
        flat.retrieve_batch(queries, 5),
        refined.retrieve_batch(queries, 5),
        raw.retrieve_batch(queries, 5),
        strict=True,
    ):
        truth = {h.sentence: h.score for h in flat.retrieve(ref[0].query, len(store))}
        for hits in (ref, approx):
            assert all(h.score == pytest.approx(truth[h.sentence], abs=1e-5) for h in hits)  # exact cosines
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert ref[0].sentence == exact[0].sentence
        agree += len({h.sentence for h in ref} & {h.sentence for h in exact})
        agree_raw += len({h.sentence for h in approx} & {h.sentence for h in exact})
    assert agree >= max(agree_raw, 0.9 * 5 * len(queries))
