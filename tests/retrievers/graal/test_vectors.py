"""GRAAL re-ranks with the sentence vectors the dense index computed at index time.

Real MiniLM, FAISS and spaCy on the hand-made GRAAL corpus (tests/fixtures/graal): the dense
index's stored vector of each sentence is bit for bit what GRAAL's encoder path gives that
sentence, so the ranking is the same with or without them; with them, a cold query encodes the
claim alone.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from garag.config import DenseConfig, GraalConfig, load_config
from garag.store import SentenceStore
from garag.types import SentenceId
from garag.wiki import corpus_fingerprint
from pipeline.retrieval import RetrievalPipeline
from retrievers.base import IndexContext
from retrievers.dense import VECTORS_FILE, FaissDenseRetriever, sentence_text
from retrievers.embeddings import EmbeddingCache, SentenceEncoder, _decode
from retrievers.graal.linker import SpacyParser
from retrievers.graal.retriever import GraalRetriever
from retrievers.graal.vectors import IndexVectors

from .conftest import CORPUS

CLAIMS = [
    "The Beatles were formed in England.",
    "Paul McCartney was a member of the Beatles.",
    "Liverpool is a city in England.",
    "John Lennon played in The Beatles in Liverpool.",
]
GRAAL = GraalConfig(parse="tagger", disambiguation="words")  # as configs/graph.yaml


@pytest.fixture(scope="module")
def parser() -> SpacyParser:
    return SpacyParser(GRAAL.spacy_model, GRAAL.frame_extractor, GRAAL.parse)


@pytest.fixture(scope="module")
def dense_dir(store: SentenceStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache root holding the corpus's dense index (MiniLM, title prefix, flat)."""
    root = tmp_path_factory.mktemp("graal-vectors")
    dense = FaissDenseRetriever(DenseConfig(device="cpu"), _ctx(store, root))
    dense.build()
    dense.cache.close()
    return root


def _ctx(store: SentenceStore, root: Path) -> IndexContext:
    return IndexContext(store, root, corpus_fingerprint(CORPUS), progress=False)


def _graal(store: SentenceStore, root: Path, parser: SpacyParser, **dense: object) -> GraalRetriever:
    r = GraalRetriever(GRAAL, DenseConfig(device="cpu", **dense), _ctx(store, root))
    r.parser = parser
    r.build()
    return r


def _results(r: GraalRetriever) -> list[list[tuple]]:
    return [[(h.hit.sentence, h.hit.score, h.provenance) for h in r.search(c).hits] for c in CLAIMS]


def _texts(store: SentenceStore, title_prefix: bool = True) -> list[str]:
    return [sentence_text(page, text, title_prefix) for _, page, text in store.iter_rows()]


def test_the_stored_vector_of_a_sentence_is_the_encoders(
    store: SentenceStore, dense_dir: Path, parser: SpacyParser, tmp_path: Path
) -> None:
    vectors = _graal(store, dense_dir, parser).index_vectors()
    assert vectors is not None and len(vectors) == len(store) and vectors.dim == 384
    assert Path(vectors.source).name == VECTORS_FILE and Path(vectors.source).parent.name.startswith("dense-")
    encoder = SentenceEncoder("minilm", device="cpu")
    # encoded afresh (a cache of its own): the text form GRAAL's encoder path embeds, title prefix
    # and detokenisation included, stored as float16 and read back re-normalised
    fresh = EmbeddingCache(encoder, tmp_path / "fresh").encode_cached(_texts(store))
    stored = vectors.rows(np.arange(len(store)))
    assert stored.dtype == np.float32 and np.array_equal(stored, fresh)
    assert np.abs(encoder.encode(_texts(store)) - fresh).max() < 2e-3  # the float16 rounding only
    assert np.abs(encoder.encode(_texts(store, title_prefix=False)) - fresh).max() > 0.1  # the form matters
    order = np.random.default_rng(0).permutation(len(store))
    assert np.array_equal(vectors.rows(order), fresh[order])
    with pytest.raises(ValueError, match=r"vectors\.npy: row ids out of range 0\.\.\d+: \[-1\]"):
        vectors.rows([0, -1])


def test_ranking_is_the_same_and_a_cold_query_encodes_only_the_claim(
    store: SentenceStore, dense_dir: Path, parser: SpacyParser, tmp_path: Path
) -> None:
    with_vectors = _graal(store, dense_dir, parser)
    encoded = with_vectors.encoder.texts_encoded
    expected = _results(with_vectors)
    assert with_vectors.index_vectors() is not None
    assert with_vectors.encoder.texts_encoded - encoded == len(CLAIMS)  # the claims, each alone
    assert all(len(hits) > 3 for hits in expected)
    # the encoder path over the same embedding cache (which the dense build filled): the same
    # hits, scores and provenance, exactly
    encoding = _graal(store, dense_dir, parser)
    encoding.use_vectors(None)
    assert _results(encoding) == expected
    # a cold embedding cache beside the dense index (copied without the cache): the claims are
    # the only texts encoded, and the results are the same again
    cold = tmp_path / "cold"
    cold.mkdir()
    for d in dense_dir.glob("dense-*"):
        shutil.copytree(d, cold / d.name)
    r = _graal(store, cold, parser)
    assert not list(cold.glob("embeddings-*/embeddings.db")) or len(r.cache) == 0
    before = r.encoder.texts_encoded
    assert _results(r) == expected
    assert r.encoder.texts_encoded - before == len(CLAIMS)
    # without vectors, the same cold start encodes every candidate
    r.use_vectors(None)
    r.cache.close()
    shutil.rmtree(next(cold.glob("embeddings-*")))
    before = r.encoder.texts_encoded
    ranked = _results(r)
    assert r.encoder.texts_encoded - before > 4 * len(CLAIMS)
    assert [[h[0] for h in hits] for hits in ranked] == [[h[0] for h in hits] for hits in expected]


def test_without_a_matching_dense_index_graal_encodes_its_candidates(
    store: SentenceStore, dense_dir: Path, parser: SpacyParser, tmp_path: Path, caplog
) -> None:  # noqa: ANN001
    untitled = _graal(store, dense_dir, parser, title_prefix=False)  # the index embeds "Title: text"
    assert untitled.index_vectors() is None
    assert untitled.search(CLAIMS[0]).hits
    assert _graal(store, tmp_path / "none", parser).index_vectors() is None  # no dense index built
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for d in dense_dir.glob("dense-*"):
        shutil.copytree(d, damaged / d.name)
        (damaged / d.name / VECTORS_FILE).write_bytes(b"not a numpy file")
    with caplog.at_level(logging.WARNING):
        assert _graal(store, damaged, parser).index_vectors() is None
    assert "vectors.npy: unreadable" in caplog.text
    r = _graal(store, dense_dir, parser)
    np.save(tmp_path / "short.npy", np.zeros((3, 384), np.float32))
    with pytest.raises(ValueError, match=r"short\.npy: 3 vectors for a store of \d+ sentences$"):
        r.use_vectors(IndexVectors.open(tmp_path / "short.npy"))


def test_a_pipeline_hands_graal_the_dense_vectors_whatever_the_order(tmp_path: Path) -> None:
    raw = {
        "data": {
            "dataset": "custom",
            "claims": str(Path(__file__).resolve().parents[2] / "fixtures" / "claims.jsonl"),
            "corpus": str(CORPUS),
        },
        "paths": {"cache_dir": str(tmp_path / "cache")},
        "retrieval": {"retrievers": ["graal", "dense"], "k": 5},  # GRAAL is built first
        "graal": {"parse": "tagger", "disambiguation": "words"},
        "dense": {"device": "cpu"},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    pipe = RetrievalPipeline(load_config(tmp_path / "c.yaml"), progress=False)
    pipe.build()
    assert pipe.retrieve(CLAIMS[0]).per_retriever["graal"]
    vectors = pipe.retrievers["graal"].index_vectors()  # type: ignore[attr-defined]
    assert vectors is not None and Path(vectors.source).parent == pipe.artifacts["dense"]


def test_rows_of_ids_are_the_stores_rows(store: SentenceStore) -> None:
    sids = store.ids_of_rows(range(len(store)))
    rows = store.rows_of_ids(sids[::-1] + [SentenceId("No_such_page", 0), SentenceId(sids[0].page, 999)])
    assert rows == {sid: row for row, sid in enumerate(sids)}


def test_a_vector_file_gives_the_rows_numpy_reads(tmp_path: Path) -> None:
    """Rows of 4 KiB (each across two memory pages), of 20 bytes (many to a page), float16 ones
    (read re-normalised, as the embedding cache reads them), in any order with repeats; bad files."""
    rng = np.random.default_rng(1)
    rows = [299, 0, 5, 6, 7, 150, 5, 298, 6]
    for dim, dtype in ((1024, np.float32), (5, np.float32), (384, np.float16)):
        matrix = rng.standard_normal((300, dim)).astype(dtype)
        np.save(tmp_path / "v.npy", matrix)
        vectors = IndexVectors.open(tmp_path / "v.npy")
        assert (len(vectors), vectors.dim) == (300, dim)
        expected = matrix[rows] if dtype == np.float32 else _decode(matrix[rows])
        got = vectors.rows(rows)
        assert got.dtype == np.float32 and np.array_equal(got, expected)
        assert vectors.rows([7]).tolist() == expected[4:5].tolist() and vectors.rows([]).shape == (0, dim)
        with pytest.raises(ValueError, match=r"v\.npy: row ids out of range 0\.\.299: \[300\]"):
            vectors.rows([1, 300])
    np.save(tmp_path / "f.npy", np.asfortranarray(rng.standard_normal((4, 3)).astype(np.float32)))
    np.save(tmp_path / "1d.npy", np.zeros(3, np.float32))
    np.save(tmp_path / "int.npy", np.zeros((3, 2), np.int64))
    for name in ("f.npy", "1d.npy", "int.npy"):
        with pytest.raises(ValueError, match=rf"{name}: not a 2-d C-order float32/float16 matrix"):
            IndexVectors.open(tmp_path / name)
    cut = tmp_path / "v.npy"
    cut.write_bytes(cut.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"v\.npy: shorter than its \(300, 384\) matrix \(truncated\)"):
        IndexVectors.open(cut)
