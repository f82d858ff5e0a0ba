"""``garag index --engine ray``: the graph build by Ray actors on a local Ray (2 workers), whether
they build whole partitions or only parse, gives exactly the graph of a single-process build; an
interrupted Ray build restarts cleanly; pools are sized from the cluster's resources.  The same
build on a cluster of several nodes, with failures: ``test_ray_cluster.py``."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from garag.store import SentenceStore
from retrievers.graal.builder import GraphBuilder
from retrievers.graal.graph_store import GraphStore
from retrievers.graal.linker import SpacyParser, word_vectors

from .conftest import CORPUS

ray = pytest.importorskip("ray", reason="the scale extra (ray) is not installed")
REPO = Path(__file__).resolve().parents[3]


def _build(path: Path, store: SentenceStore, engine=None, embed=word_vectors) -> GraphStore:  # noqa: ANN001
    names = store.page_names()
    by_page = store.pages(names)
    graph = GraphStore(path)
    builder = GraphBuilder(
        graph, SpacyParser(), {"embed": embed}, chunk_size=2, engine=engine, partition_sentences=3
    )
    builder.add_pages([(p, by_page[p]) for p in names])
    return graph


def _words(texts: list[str]):  # noqa: ANN202
    """The hashed-words encoder under another name: the builder links in the driver, as with MiniLM."""
    return word_vectors(texts)


def test_ray_actors_build_the_same_graph_as_one_process(store: SentenceStore, tmp_path: Path):
    from retrievers.graal.ray_engine import RayEngine

    local = _build(tmp_path / "local.db", store)
    with RayEngine(workers=2) as engine:
        partitioned = _build(tmp_path / "ray.db", store, engine)  # actors parse, link and write partitions
        parsed_only = _build(tmp_path / "ray-parse.db", store, engine, _words)  # actors parse
        partitions, chunks = engine.pools[0], engine.pools[1]
        assert len(partitions.actors) == 2
    assert partitions.submitted > 2 and chunks.submitted > 2  # work went to both actors
    assert not list(tmp_path.glob("*.parts"))  # the partition files were merged and removed
    for graph in (partitioned, parsed_only):
        assert graph.edge_set() == local.edge_set() and graph.mention_set() == local.mention_set()
    assert local.edge_set()
    assert not ray.is_initialized()  # the local Ray it started is shut down


def test_ray_actors_tokenise_bm25_shards_into_the_same_index(store: SentenceStore, tmp_path: Path):
    from garag.config import BM25Config
    from retrievers.bm25 import BM25Index, row_text, sentence_rows, sentence_texts
    from retrievers.graal.ray_engine import RayEngine

    texts = list(sentence_texts(store, True))
    config = BM25Config(shard_docs=5)
    assert len(texts) > 3 * config.shard_docs
    one = BM25Index.build_saved(tmp_path / "one", texts, config.model_copy(update={"shard_docs": len(texts)}))
    prepare = functools.partial(row_text, title_prefix=True)  # the store's rows made texts by the actors
    with RayEngine(workers=2) as engine:
        rows = sentence_rows(store)
        sharded = BM25Index.build_saved(tmp_path / "ray", rows, config, engine=engine, prepare=prepare)
        assert engine.pools[0].submitted == -(-len(texts) // 5)  # every shard, the first too
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "ray").iterdir())
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
    assert sharded.search("Snowpiercer", 1)[0].tolist() == one.search("Snowpiercer", 1)[0].tolist()


def test_ray_actors_encode_the_dense_index(store: SentenceStore, tmp_path: Path):
    """The dense build's sentences encoded by 2 Ray actors with the driver's model: the vectors
    (stored as float16) and the retrieval results are a local build's."""
    import numpy as np

    from garag.config import DenseConfig
    from retrievers.base import IndexContext
    from retrievers.dense import VECTORS_FILE, FaissDenseRetriever
    from retrievers.graal.ray_engine import RayEngine

    config = DenseConfig(device="cpu")
    local = FaissDenseRetriever(config, IndexContext(store, tmp_path / "local", "fp", False))
    local_path = local.build()
    with RayEngine(workers=2) as engine:
        remote = FaissDenseRetriever(config, IndexContext(store, tmp_path / "ray", "fp", False, engine))
        remote_path = remote.build()
        assert engine.pools[0].submitted == 2  # one batch per actor
    assert local_path.name == remote_path.name  # the same artifact
    assert remote.meta["texts_encoded"] == local.meta["texts_encoded"] == len(store)
    a, b = (np.load(p / VECTORS_FILE) for p in (local_path, remote_path))
    np.testing.assert_allclose(a, b, atol=2e-3)
    for query in ["Who directed Snowpiercer?", "a band formed in Liverpool", "Sandra Bullock"]:
        assert [h.sentence for h in local.retrieve(query, 5)] == [
            h.sentence for h in remote.retrieve(query, 5)
        ]


def _config(root: Path, cache: Path) -> Path:
    cfg = {
        "data": {"dataset": "custom", "claims": str(REPO / "tests" / "fixtures" / "claims.jsonl"),
                 "corpus": str(CORPUS)},
        "paths": {"cache_dir": str(cache)},
        "retrieval": {"retrievers": ["graal"]},
        "graal": {"disambiguation": "words"},
    }  # fmt: skip
    path = root / f"{cache.name}.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _index(config: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "app.cli", "index", "--config", str(config), "--no-progress", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def _graph_of(out: str) -> GraphStore:
    return GraphStore(Path(json.loads(out)["graal"]) / "graph.db")


def test_index_engine_ray_builds_the_same_artifact_and_an_interrupted_build_restarts(tmp_path: Path):
    local = _index(_config(tmp_path, tmp_path / "cache-local"))
    assert local.returncode == 0, local.stderr
    # a Ray build killed while its graph is being built leaves no artifact; the rerun builds it
    config = _config(tmp_path, tmp_path / "cache-ray")
    cmd = [sys.executable, "-m", "app.cli", "index", "--config", str(config), "--no-progress",
           "--engine", "ray", "--ray-workers", "2"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while not list((tmp_path / "cache-ray").glob(".graal-*.tmp-*")):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the graph build never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert not list((tmp_path / "cache-ray").glob("graal-*/graph.db"))
    again = _index(config, "--engine", "ray", "--ray-workers", "2")
    assert again.returncode == 0, again.stderr
    a, b = _graph_of(local.stdout), _graph_of(again.stdout)
    assert Path(json.loads(local.stdout)["graal"]).name == Path(json.loads(again.stdout)["graal"]).name
    assert a.edge_set() == b.edge_set() and a.mention_set() == b.mention_set() and a.edge_set()


def test_ray_address_without_the_ray_engine_is_one_line(tmp_path: Path):
    out = _index(_config(tmp_path, tmp_path / "cache-x"), "--ray-address", "auto")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == "garag: error: --ray-address needs --engine ray"


def test_pools_are_sized_from_the_cluster():
    from retrievers.graal.ray_engine import DRIVER_CPUS, cpu_pool_size, encoder_pool_size
    from retrievers.graal.ray_pool import Resources

    cluster = {"CPU": 16.0, "memory": 1e11}
    assert cpu_pool_size(cluster, None, DRIVER_CPUS["partitions"]) == (16, Resources(cpus=1.0))
    # the driver links and writes every sentence while actors only parse: it keeps a CPU
    assert cpu_pool_size(cluster, None, DRIVER_CPUS["parsers"]) == (15, Resources(cpus=1.0))
    assert cpu_pool_size(cluster, 4, 1) == (4, Resources(cpus=1.0))  # --ray-workers
    assert cpu_pool_size({"CPU": 2.0}, 3, 0) == (3, Resources(cpus=0.666))  # more actors than CPUs
    with pytest.raises(ValueError, match="no CPU"):
        cpu_pool_size({"GPU": 1.0}, None, 0)
    # encoders: a GPU each when the cluster has GPUs and dense.device allows, else CPU actors
    gpus = {"CPU": 32.0, "GPU": 2.0}
    assert encoder_pool_size(gpus, None, "auto") == (2, Resources(cpus=1.0, gpus=1.0), "cuda")
    assert encoder_pool_size(gpus, 4, "cuda") == (4, Resources(cpus=1.0, gpus=0.5), "cuda")
    assert encoder_pool_size(gpus, None, "cpu") == (32, Resources(cpus=1.0), "cpu")
    assert encoder_pool_size(cluster, None, "auto") == (16, Resources(cpus=1.0), "auto")
    with pytest.raises(ValueError, match="no GPU"):
        encoder_pool_size(cluster, None, "cuda")


def test_ray_workers_without_the_ray_engine_is_one_line(tmp_path: Path):
    out = _index(_config(tmp_path, tmp_path / "cache-x"), "--ray-workers", "2")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == "garag: error: --ray-workers needs --engine ray"
