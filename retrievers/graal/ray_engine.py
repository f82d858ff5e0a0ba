"""``garag index --engine ray``: the graph build's workers, the BM25 build's shard tokenisers and
the dense build's sentence encoders as Ray actors (the ``scale`` extra), in ``RayPool``s
(``retrievers.graal.ray_pool``: ``ray.util.ActorPool``, actors restarted and tasks retried by Ray,
tasks of actors that cannot come back sent to the others).

The actors do what ``graal.workers`` processes do (``retrievers.graal.builder``): with hashed-word
disambiguation each actor parses, links and writes whole page partitions into files in the cache
directory and returns only their counts; the driver merges the files in page order.  With MiniLM
disambiguation actors parse and the driver links and writes.  Either way the graph is the one a
single-process build makes.

``address=None`` starts a local Ray on this machine; ``address="ray://host:10001"`` or ``"auto"``
joins a cluster, whose nodes need garag and its models installed and, for the graph, the cache
directory at the same path on shared storage: partition actors check a marker file the driver
wrote there before they start, and a node that cannot see it stops the build with one line.

Sizes: without ``workers``, a pool has as many actors as the cluster has CPUs, less those the
driver needs for its part of the work (``DRIVER_CPUS``); encoders ask for one GPU each, as many as
the cluster has GPUs, when it has any and ``dense.device`` allows.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievers.graal.ray_pool import RayPool, Resources

if TYPE_CHECKING:
    from retrievers.bm25_shards import Prepare

logger = logging.getLogger(__name__)

# CPUs the driver keeps busy while a pool of each kind works: it merges partition files (3% of the
# workers' CPU time at 1M sentences: 52.6 s against 1,592 s, benchmarks/results/scale.md), writes
# BM25 postings and stores vectors; with MiniLM disambiguation it links and writes every sentence
# (more CPU than the tagger's parse: 9.3 s against 5.1 s, docs/scale.md), so it keeps a core.
DRIVER_CPUS = {"partitions": 0, "parsers": 1, "tokenisers": 0, "encoders": 0}


def local_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cpu_pool_size(cluster: dict, workers: int | None, driver_cpus: float) -> tuple[int, Resources]:
    """Actors and what each asks for: ``workers`` (else the cluster's CPUs less the driver's, at
    least one) of one CPU each, or a share of the CPUs when more actors are asked for than fit."""
    cpus = float(cluster.get("CPU", 0.0))
    if cpus <= 0:
        raise ValueError("ray: the cluster has no CPU for workers (ray.cluster_resources() has none)")
    n = workers or max(1, int(cpus - driver_cpus))
    each = 1.0 if n <= cpus else int(cpus / n * 1000) / 1000  # Ray takes 4 decimals
    return n, Resources(cpus=each)


def encoder_pool_size(cluster: dict, workers: int | None, device: str) -> tuple[int, Resources, str]:
    """Encoder actors, what each asks for and the device they load the model on: one GPU each
    (``workers``, else as many as the cluster has GPUs) when the cluster has GPUs and ``device``
    is ``auto`` or ``cuda``; else CPU actors as in ``cpu_pool_size``."""
    gpus = float(cluster.get("GPU", 0.0))
    if gpus >= 1 and device in ("auto", "cuda"):
        n = workers or int(gpus)
        each = 1.0 if n <= gpus else int(gpus / n * 1000) / 1000
        cpus = float(cluster.get("CPU", 0.0))
        return n, Resources(cpus=min(1.0, cpus / n) if cpus else 0.0, gpus=each), "cuda"
    if device == "cuda":
        raise ValueError("dense.device is cuda but the Ray cluster has no GPU (ray.cluster_resources())")
    n, res = cpu_pool_size(cluster, workers, DRIVER_CPUS["encoders"])
    return n, res, device


class RayEngine:
    """Ray actor pools for the index builds.

    ``partition_worker`` is the graph's partition worker class (or its name); a test swaps in one
    that fails on purpose.

    Args:
        workers: actors per pool (``--ray-workers``); None sizes each pool from the cluster.
        address: a Ray cluster to join; None starts a local one with this machine's CPUs (or
            ``workers`` of them, when given).
        retries: restarts per actor and retries per task (``RayPool``).
    """

    partition_worker: str | type = "retrievers.graal.builder:PartitionWorker"

    def __init__(self, workers: int | None = None, address: str | None = None, retries: int = 3) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"--ray-workers must be >= 1, got {workers}")
        try:
            import ray
        except ImportError as e:
            raise ValueError(
                f"--engine ray needs the scale extra (pip install 'garag[scale]'): {e}"
            ) from None
        self.workers = workers
        self.retries = retries
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=workers or local_cpus(), **kwargs)
        self.pools: list[RayPool] = []
        logger.info("ray: %s (%s)", ray.cluster_resources(), address or "local")

    def _pool(self, kind: str, name: str, target: str | type, args: tuple, **kw: Any) -> RayPool:
        import ray

        n, resources = cpu_pool_size(ray.cluster_resources(), self.workers, DRIVER_CPUS[kind])
        return self._start(name, target, args, n, resources, **kw)

    def _start(
        self, name: str, target: str | type, args: tuple, n: int, resources: Resources, **kw: Any
    ) -> RayPool:
        logger.info("ray: %d %s actors, each %s", n, name, resources)
        pool = RayPool(name, target, args, n, resources, retries=self.retries, **kw)
        self.pools.append(pool)
        return pool

    def parsers(self, model: str, extractor: str, mode: str) -> RayPool:
        return self._pool(
            "parsers", "graph parse", "retrievers.graal.builder:ChunkParser", (model, extractor, mode)
        )

    def partitions(self, pages_db: str, parser: tuple, linker_options: dict) -> RayPool:
        """Partition actors; they first check that they see a marker written beside ``pages_db``
        (the cache directory must be shared by every node)."""
        token = uuid.uuid4().hex
        marker = Path(pages_db).with_name(f".shared-{token}")
        marker.write_text(token, encoding="utf-8")
        return self._pool(
            "partitions",
            "graph partition",
            self.partition_worker,
            (pages_db, parser, linker_options),
            shared=(str(marker), token),
        )

    def tokenisers(self, stopwords: str | list[str], stemmer: str, prepare: Prepare | None = None) -> RayPool:
        """Actors preparing and tokenising BM25 shards (``retrievers.bm25_shards``); their
        postings come back by value, so a cluster needs no shared filesystem for them."""
        args = (stopwords, stemmer, prepare)
        pool = self._pool("tokenisers", "BM25 shard", "retrievers.bm25_shards:ShardTokeniser", args)
        pool.in_flight = len(pool.actors) + 1  # a shard is large: one queued in all
        return pool

    def encoders(self, model: str, device: str, batch_size: int, identity: str) -> RayPool:
        """Actors encoding sentences for the dense index (``retrievers.embeddings.EncoderWorker``),
        on GPUs when the cluster has them; vectors come back by value and the driver stores them
        in its embedding cache."""
        import ray

        n, resources, on = encoder_pool_size(ray.cluster_resources(), self.workers, device)
        args = (model, on, batch_size, identity)
        return self._start("dense encode", "retrievers.embeddings:EncoderWorker", args, n, resources)

    def close(self) -> None:
        import ray

        if self._started and ray.is_initialized():
            ray.shutdown()

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
