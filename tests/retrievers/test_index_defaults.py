"""Defaults that fit full FEVER: the dense index ``auto`` picks by memory, its build from the vectors
file, the config hashes these defaults keep, and the fast graph build as the code default."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from garag.config import DenseConfig, GraalConfig, load_config
from garag.datasets import fever, hover
from garag.store import SentenceStore
from garag.wiki import iter_pages
from retrievers.base import IndexContext
from retrievers.dense import FaissDenseRetriever
from retrievers.dense_index import (
    IVF_TRAIN_MAX,
    VectorFile,
    VectorWriter,
    build_index,
    choose_index,
    index_memory,
    index_settings,
    ivf_nlist,
    ivf_train_size,
    pq_bytes,
)
from retrievers.embeddings import SentenceEncoder

REPO = Path(__file__).resolve().parents[2]
GB = 1 << 30
FULL_FEVER = 25_000_000


def _old_choose(n: int) -> str:
    """``dense.index: auto`` before the memory budget: flat up to 2M sentences, else HNSW."""
    return "flat" if n <= 2_000_000 else "hnsw"


@pytest.fixture(scope="module")
def embedded_sizes() -> dict[str, int]:
    """Sentences of the embedded corpora (the rows their stores and dense indexes have)."""
    return {
        d.name: sum(1 for p in iter_pages(d.corpus_path) for _ in p.sentences()) for d in (fever(), hover())
    }


def test_embedded_corpora_keep_their_index_kind(embedded_sizes: dict[str, int]):
    assert embedded_sizes["fever"] > 40_000 and embedded_sizes["hover"] > 15_000
    for n in embedded_sizes.values():
        assert choose_index(DenseConfig(), n, 384) == _old_choose(n) == "flat"


def test_auto_stays_within_the_memory_budget_up_to_full_fever():
    config = DenseConfig()
    kinds = {}
    for n in np.unique(np.geomspace(1_000, FULL_FEVER, 60).astype(int)):
        kind = choose_index(config, int(n), 384)
        kinds[int(n)] = kind
        assert index_memory(kind, int(n), 384, config) <= config.index_memory_gb * GB, (n, kind)
    assert kinds[1_000] == "flat" and kinds[FULL_FEVER] == "ivf_pq"
    assert "hnsw" not in kinds.values()  # 41.7 GB at 25M: available by name only
    # one switch for MiniLM's 384-d vectors, flat -> ivf_pq, above flat_max (2M, as before)
    assert all(k == ("flat" if n <= config.flat_max else "ivf_pq") for n, k in kinds.items())
    assert choose_index(config, 2_000_000, 384) == "flat" and choose_index(config, 2_000_001, 384) == "ivf_pq"
    # larger vectors: the budget, not flat_max, ends the flat index (mpnet's 768-d at 1M: 3.05 GB)
    assert choose_index(config, 900_000, 768) == "flat" and choose_index(config, 1_000_000, 768) == "ivf_pq"
    # a larger budget brings back the large index as it was
    roomy = DenseConfig(index_memory_gb=64.0)
    assert choose_index(roomy, 3_000_000, 384) == "hnsw" and choose_index(roomy, 1_900_000, 384) == "flat"
    assert choose_index(DenseConfig(index="hnsw"), FULL_FEVER, 384) == "hnsw"  # by name, any size


def test_ivf_training_sample_and_cells_are_capped():
    config = DenseConfig()
    assert ivf_nlist(config, 10_000) == 400 and ivf_nlist(config, 1_000_000) == 4_000
    assert ivf_nlist(config, FULL_FEVER) == IVF_TRAIN_MAX // 64 == 4_096
    assert ivf_train_size(FULL_FEVER, ivf_nlist(config, FULL_FEVER)) == IVF_TRAIN_MAX
    assert ivf_train_size(320, 4) == 320 and ivf_train_size(50_000, 100) == 25_600
    settings = index_settings(config, "ivf_pq", FULL_FEVER, 384)
    assert settings == {"index": "ivf_pq", "ivf_nlist": 4_096, "ivf_train": 262_144, "pq_m": 48}


def test_pq_bytes_follow_the_dimension_unless_set():
    # 0 = a byte per 8 dimensions: MiniLM's 48 as before, and 256-d (wordllama) and 768-d get
    # sub-vectors that divide them (48 does not divide 256: the build failed after encoding)
    assert [pq_bytes(DenseConfig(), d) for d in (384, 256, 768, 100)] == [48, 32, 96, 10]
    assert index_settings(DenseConfig(), "ivf_pq", FULL_FEVER, 256)["pq_m"] == 32
    assert pq_bytes(DenseConfig(pq_m=16), 256) == 16
    with pytest.raises(ValueError, match="dense.pq_m: 256-d vectors do not split into 48"):
        index_settings(DenseConfig(pq_m=48), "ivf_pq", FULL_FEVER, 256)
    assert "pq_m" not in DenseConfig().hash_dump() and DenseConfig(pq_m=32).hash_dump()["pq_m"] == 32


def test_default_hashes_are_the_ones_built_before():
    # the verifier's artifact and every run hash the dense section: a new key at its default is not
    dump = DenseConfig().hash_dump()
    assert "index_memory_gb" not in dump
    assert dump["flat_max"] == 2_000_000 and dump["large_index"] == "hnsw"
    assert DenseConfig(index_memory_gb=8.0).hash_dump()["index_memory_gb"] == 8.0


def test_flat_artifact_settings_are_unchanged(tiny_store: SentenceStore, tmp_path: Path):
    encoder = SentenceEncoder("minilm", device="cpu", batch_size=32)
    ctx = IndexContext(tiny_store, tmp_path, "fp", progress=False)
    settings = FaissDenseRetriever(DenseConfig(), ctx, encoder=encoder).settings()
    assert set(settings) == {"model_identity", "title_prefix", "cache_dtype", "index"}
    assert settings["index"] == "flat"


def _vectors(path: Path, n: int, dim: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with VectorWriter(path, n, dim) as out:
        for start in range(0, n, 700):
            out.write(x[start : start + 700])
    return x


def test_vector_file_round_trip(tmp_path: Path):
    x = _vectors(tmp_path / "v.npy", 2_000, 16)
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), x)  # a plain .npy file
    f = VectorFile(tmp_path / "v.npy")
    assert f.shape == (2_000, 16)
    np.testing.assert_array_equal(f.read(5, 1_500), x[5:1_500])
    rows = np.array([1_999, 0, 17, 17])
    np.testing.assert_array_equal(f.take(rows), x[rows])
    with pytest.raises(ValueError, match="past the end"):
        f.read(1_990, 2_001)
    with (
        pytest.raises(RuntimeError, match="wrote 3 rows, expected 4"),
        VectorWriter(tmp_path / "w.npy", 4, 16) as w,
    ):
        w.write(x[:3])
    with pytest.raises(ValueError, match="do not fit"), VectorWriter(tmp_path / "w.npy", 4, 16) as w:
        w.write(x[:5])
    np.save(tmp_path / "ints.npy", np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="not a 2-d C-order float32/float16 matrix"):
        VectorFile(tmp_path / "ints.npy")


def test_flat_index_filled_in_place_equals_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("retrievers.dense_index.ADD_CHUNK", 300)  # several blocks
    x = _vectors(tmp_path / "v.npy", 1_000, 32)
    index = build_index(VectorFile(tmp_path / "v.npy"), {"index": "flat"})
    added = faiss.IndexFlatIP(32)
    added.add(x)
    assert bytes(faiss.serialize_index(index)) == bytes(faiss.serialize_index(added))


def test_ivf_pq_built_from_the_file_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The blocks and the row-by-row training sample give the index of the whole matrix at once."""
    monkeypatch.setattr("retrievers.dense_index.ADD_CHUNK", 256)
    x = _vectors(tmp_path / "v.npy", 2_000, 32)
    settings = index_settings(DenseConfig(pq_m=8), "ivf_pq", 2_000, 32)
    index = build_index(VectorFile(tmp_path / "v.npy"), settings)
    rows = np.sort(np.random.default_rng(1234).choice(2_000, size=settings["ivf_train"], replace=False))
    whole = faiss.IndexIVFPQ(
        faiss.IndexFlatIP(32), 32, settings["ivf_nlist"], 8, 8, faiss.METRIC_INNER_PRODUCT
    )
    whole.cp.spherical = True
    whole.train(x[rows])
    whole.add(x)
    assert index.ntotal == 2_000
    assert bytes(faiss.serialize_index(index)) == bytes(faiss.serialize_index(whole))


def test_graph_build_defaults_are_the_fast_ones_the_configs_use():
    config = GraalConfig()
    assert (config.parse, config.disambiguation) == ("tagger", "words")
    graph = load_config(REPO / "configs" / "graph.yaml").graal
    assert (graph.parse, graph.disambiguation) == (config.parse, config.disambiguation)
    # configs that name the fast build keep their hash; the default now hashes as they do
    assert graph.hash_dump() == config.hash_dump()
    assert config.hash_dump()["parse"] == "tagger" and config.hash_dump()["disambiguation"] == "words"
    # what was built with the old defaults keeps its hash, and is never taken for the new defaults
    old = GraalConfig(parse="full", disambiguation="minilm").hash_dump()
    assert "parse" not in old and "disambiguation" not in old and old != config.hash_dump()


def test_take_reads_runs_of_rows_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    x = _vectors(tmp_path / "v.npy", 500, 8)
    f = VectorFile(tmp_path / "v.npy")
    rows = np.array([7, 3, 4, 5, 499, 4, 0, 250, 251])  # runs 3-5, 250-251; a repeat; both ends
    np.testing.assert_array_equal(f.take(rows), x[rows])
    monkeypatch.setattr("retrievers.dense_index.ADD_CHUNK", 64)  # long runs read in pieces
    every = np.arange(500)[::-1]
    np.testing.assert_array_equal(f.take(every), x[every])
    np.testing.assert_array_equal(f.take(np.r_[every, 10, 300]), x[np.r_[every, 10, 300]])
    assert f.take(np.array([], dtype=np.int64)).shape == (0, 8)
    with pytest.raises(ValueError, match="out of range"):
        f.take(np.array([0, 500]))
