"""``garag index --engine ray``: the graph build by Ray actors on a local Ray (2 workers), whether
they build whole partitions or only parse, gives exactly the graph of a single-process build; an
interrupted Ray build restarts cleanly."""

from __future__ import annotations

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
    cmd = [sys.executable, "-m", "garag.app.cli", "index", "--config", str(config), "--no-progress", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def _graph_of(out: str) -> GraphStore:
    return GraphStore(Path(json.loads(out)["graal"]) / "graph.db")


def test_index_engine_ray_builds_the_same_artifact_and_an_interrupted_build_restarts(tmp_path: Path):
    local = _index(_config(tmp_path, tmp_path / "cache-local"))
    assert local.returncode == 0, local.stderr
    # a Ray build killed while its graph is being built leaves no artifact; the rerun builds it
    config = _config(tmp_path, tmp_path / "cache-ray")
    cmd = [sys.executable, "-m", "garag.app.cli", "index", "--config", str(config), "--no-progress",
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
