"""The graph build on a Ray cluster of three nodes on this machine (``ray.cluster_utils.Cluster``:
a head with no CPU for actors, two worker nodes of one CPU each): the actors spread over both
nodes and the graph is the one-process graph; an actor process that dies is restarted by Ray and
its partition retried; a node lost mid-build leaves its partitions to the other node; a worker
that cannot see the cache directory, or a task that kills every worker, stops the build with one
line; ``garag index --engine ray
--ray-address`` joins the cluster and writes the one-process artifact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from garag.store import SentenceStore
from retrievers.graal.builder import GraphBuilder, PartitionWorker
from retrievers.graal.graph_store import GraphStore
from retrievers.graal.linker import SpacyParser, word_vectors

from .test_ray_engine import _config

ray = pytest.importorskip("ray", reason="the scale extra (ray) is not installed")
cluster_utils = pytest.importorskip("ray.cluster_utils")
REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():  # noqa: ANN201
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # CrashOnce, for the actors
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def local(store: SentenceStore, tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """The one-process graph."""
    return _build(tmp_path_factory.mktemp("local") / "graph.db", store)


class _Builder(GraphBuilder):
    """A builder that calls ``after_first_merge()`` once the first partition is merged."""

    after_first_merge = staticmethod(lambda: None)

    def _merge(self, out: Path, result) -> None:  # noqa: ANN001
        super()._merge(out, result)
        hook, self.after_first_merge = self.after_first_merge, staticmethod(lambda: None)
        hook()


def _build(path: Path, store: SentenceStore, engine=None, hook=None, size: int = 3) -> GraphStore:  # noqa: ANN001
    """The graph of ``store`` in partitions of ``size`` sentences (whole pages)."""
    names = store.page_names()
    by_page = store.pages(names)
    graph = GraphStore(path)
    builder = _Builder(
        graph, SpacyParser(), {"embed": word_vectors}, chunk_size=2, engine=engine, partition_sentences=size
    )
    if hook is not None:
        builder.after_first_merge = hook
    builder.add_pages([(p, by_page[p]) for p in names])
    return graph


def _same(a: GraphStore, b: GraphStore) -> None:
    assert a.edge_set() == b.edge_set() and a.mention_set() == b.mention_set()
    assert a.edge_set()


def _worker_nodes(c) -> set[str]:  # noqa: ANN001
    return {n.node_id for n in c.worker_nodes}


def test_actors_on_two_nodes_build_the_one_process_graph(cluster, local, store, tmp_path: Path):  # noqa: ANN001
    from retrievers.graal.ray_engine import RayEngine

    with RayEngine() as engine:  # joins the cluster this process is connected to
        graph = _build(tmp_path / "graph.db", store, engine)
        pool = engine.pools[0]
    assert len(pool.actors) == 2  # the cluster's CPUs (the head has none for actors)
    assert set(pool.nodes) == _worker_nodes(cluster)  # both nodes built partitions
    assert pool.submitted > 4 and not pool.lost and not pool.resent
    assert not list(tmp_path.glob("*.parts"))  # partitions merged, marker and folder removed
    _same(graph, local)
    assert ray.is_initialized()  # a Ray the engine joined is left running


class CrashOnce(PartitionWorker):
    """The real partition worker, whose process dies (``os._exit``) on its third partition the
    first time: fault injection."""

    flag = ""

    def build(self, out: str, sentences: list, chunk_size: int) -> dict:
        if Path(out).name == "part-000002.db" and not Path(self.flag).exists():
            Path(self.flag).touch()
            os._exit(1)
        return super().build(out, sentences, chunk_size)


def test_a_dead_actor_is_restarted_by_ray_and_its_partition_retried(cluster, local, store, tmp_path: Path):  # noqa: ANN001
    from retrievers.graal.ray_engine import RayEngine

    CrashOnce.flag = str(tmp_path / "crashed")
    with RayEngine() as engine:
        engine.partition_worker = CrashOnce
        graph = _build(tmp_path / "graph.db", store, engine)
        pool = engine.pools[0]
    assert (tmp_path / "crashed").exists()  # an actor process died mid-partition
    assert not pool.lost and not pool.resent  # Ray restarted it and ran the task again
    _same(graph, local)


class Slow(PartitionWorker):
    """The real partition worker, 0.3 s slower a partition: both actors still have partitions
    when the first is merged."""

    def build(self, out: str, sentences: list, chunk_size: int) -> dict:
        time.sleep(0.3)
        return super().build(out, sentences, chunk_size)


def test_a_node_lost_mid_build_leaves_its_partitions_to_the_other(cluster, local, store, tmp_path: Path):  # noqa: ANN001
    from retrievers.graal.ray_engine import RayEngine

    victim = next(iter(cluster.worker_nodes))
    try:
        with RayEngine() as engine:
            engine.partition_worker = Slow
            # a partition a page (10): whatever the lost actor was doing when its node went, it is
            # sent some of the 6 partitions not yet sent then
            remove = lambda: cluster.remove_node(victim)  # noqa: E731
            graph = _build(tmp_path / "graph.db", store, engine, remove, size=1)
            pool = engine.pools[0]
        # the lost actor had no room to come back (1 CPU left for 2 actors): the pool dropped it
        # and sent its partitions to the actor on the other node
        assert pool.submitted == 10
        assert len(pool.lost) == 1 and pool.resent >= 1
        assert ray.cluster_resources()["CPU"] == 1
        _same(graph, local)
    finally:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
    with RayEngine() as engine:  # the rerun on the repaired cluster: the same graph
        again = _build(tmp_path / "again.db", store, engine)
        assert set(engine.pools[0].nodes) == _worker_nodes(cluster)
    _same(again, local)


def test_a_worker_that_cannot_see_the_cache_directory_stops_with_one_line(cluster, tmp_path: Path):  # noqa: ANN001
    """The driver's marker removed before the actors start: what a node without the shared
    cache directory sees."""
    from retrievers.graal.ray_pool import RayPool

    marker = tmp_path / "graph.db.parts" / ".shared-x"
    with RayPool(
        "graph partition", PartitionWorker, ("unused", (), {}), 2, shared=(str(marker), "x")
    ) as pool:
        with pytest.raises(ValueError) as e:
            pool.build(str(tmp_path / "part.db"), [], 2).get()
    message = str(e.value)
    assert len(message.splitlines()) == 1
    assert f"cannot see {marker}" in message and "must be shared storage" in message, message


class DiesEveryTime:
    """A worker whose process dies on every task: fault injection."""

    def build(self, out: str, sentences: list, chunk_size: int) -> dict:
        os._exit(1)


def test_a_task_that_kills_every_worker_stops_with_one_line(cluster):  # noqa: ANN001
    """Ray restarts the actor and retries the task (once each here); then the pool has no actor
    left for it."""
    from retrievers.graal.ray_pool import RayPool

    with RayPool("graph partition", DiesEveryTime, (), 1, retries=1) as pool:
        with pytest.raises(ValueError) as e:
            pool.build("unused", [], 2).get()
    assert str(e.value) == "ray: every graph partition worker was lost (1 of 1), 1 tasks unfinished"


def _index(config: Path, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "app.cli", "index", "--config", str(config), "--no-progress", *extra]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_index_joins_the_cluster_and_writes_the_one_process_artifact(cluster, tmp_path: Path):  # noqa: ANN001
    one = _index(_config(tmp_path, tmp_path / "cache-local"))
    joined = _index(
        _config(tmp_path, tmp_path / "cache-ray"), "--engine", "ray", "--ray-address", cluster.address
    )
    assert Path(one["graal"]).name == Path(joined["graal"]).name
    _same(GraphStore(Path(one["graal"]) / "graph.db"), GraphStore(Path(joined["graal"]) / "graph.db"))
