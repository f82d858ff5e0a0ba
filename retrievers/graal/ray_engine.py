"""``garag index --engine ray``: the graph build's workers, the BM25 build's shard tokenisers and
the dense build's sentence encoders as Ray actors (the ``scale`` extra).

The actors do what ``graal.workers`` processes do (``retrievers.graal.builder``): with hashed-word
disambiguation each actor parses, links and writes whole page partitions into files the driver
merges in page order; with MiniLM disambiguation actors parse and the driver links and writes.
Either way the graph is the one a single-process build makes.  ``address=None`` starts a local Ray
on this machine; ``address="ray://host:10001"`` or ``"auto"`` joins a cluster, whose nodes need
garag installed and, for partitions, the cache directory at the same path (a shared filesystem):
the actors read the page table from it and write their partitions into it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)


class _Result:
    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def get(self) -> Any:
        import ray

        return ray.get(self.ref)


class _ActorPool:
    """Actors behind the pool interface of ``GraphBuilder`` (round robin, at most two tasks queued
    per actor); the actors are killed on exit."""

    def __init__(self, actors: list) -> None:
        self.actors = actors
        self.in_flight = 2 * len(actors)
        self.submitted = 0

    def _next(self) -> Any:
        actor = self.actors[self.submitted % len(self.actors)]
        self.submitted += 1
        return actor

    def parse(self, payload: Sequence[tuple[str, Sequence[str]]]) -> _Result:
        return _Result(self._next().parse.remote(list(payload)))

    def build(self, out: str, sentences: list, chunk_size: int) -> _Result:
        return _Result(self._next().build.remote(out, sentences, chunk_size))

    def encode(self, texts: list[str]) -> _Result:
        return _Result(self._next().encode.remote(texts))

    def tokenise(self, texts: list[str]) -> _Result:
        return _Result(self._next().tokenise.remote(texts))

    def __enter__(self) -> _ActorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)


class RayEngine:
    """``workers`` Ray actors (one CPU each) per pool.

    Args:
        workers: actors.
        address: a Ray cluster to join; None starts a local one with ``workers`` CPUs.
    """

    def __init__(self, workers: int = 2, address: str | None = None) -> None:
        if workers < 1:
            raise ValueError(f"--ray-workers must be >= 1, got {workers}")
        try:
            import ray
        except ImportError as e:
            raise ValueError(
                f"--engine ray needs the scale extra (pip install 'garag[scale]'): {e}"
            ) from None
        self.workers = workers
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=workers, **kwargs)
        self.pools: list[_ActorPool] = []
        logger.info("ray: %d actors (%s)", workers, address or "local")

    def _pool(self, cls: type, *args: Any) -> _ActorPool:
        import ray

        actor = ray.remote(num_cpus=1)(cls)
        pool = _ActorPool([actor.remote(*args) for _ in range(self.workers)])
        self.pools.append(pool)
        return pool

    def parsers(self, model: str, extractor: str, mode: str) -> _ActorPool:
        from retrievers.graal.builder import ChunkParser

        return self._pool(ChunkParser, model, extractor, mode)

    def partitions(self, pages_db: str, parser: tuple, linker_options: dict) -> _ActorPool:
        from retrievers.graal.builder import PartitionWorker

        return self._pool(PartitionWorker, pages_db, parser, linker_options)

    def tokenisers(self, stopwords: str | list[str], stemmer: str) -> _ActorPool:
        """Actors tokenising BM25 shards (``retrievers.bm25_shards``); their postings come back
        by value, so a cluster needs no shared filesystem for them."""
        from retrievers.bm25_shards import ShardTokeniser

        pool = self._pool(ShardTokeniser, stopwords, stemmer)
        pool.in_flight = self.workers + 1  # a shard is large: one queued in all
        return pool

    def encoders(self, model: str, device: str, batch_size: int, identity: str) -> _ActorPool:
        """Actors encoding sentences for the dense index (``retrievers.embeddings.EncoderWorker``);
        vectors come back by value and the driver stores them in its embedding cache."""
        from retrievers.embeddings import EncoderWorker

        return self._pool(EncoderWorker, model, device, batch_size, identity)

    def close(self) -> None:
        import ray

        if self._started and ray.is_initialized():
            ray.shutdown()

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
