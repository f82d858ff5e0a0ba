"""``garag index --engine ray``: the graph build's parsing on a Ray cluster (the ``scale`` extra).

Parsing (spaCy) is most of a graph build.  Page chunks go to Ray actors that each hold a loaded
parser; the driver links and writes the parsed chunks in their original order, so the graph is
the one a single-process build makes.  ``address=None`` starts a local Ray on this machine;
``address="ray://host:10001"`` or ``"auto"`` joins a cluster (its nodes need garag installed).
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


class RayParseExecutor:
    """Parse chunks on ``workers`` Ray actors (round robin), at most ``2 * workers`` chunks ahead.

    Args:
        model, extractor, mode: the ``SpacyParser`` every actor builds.
        workers: actors (one CPU each).
        address: a Ray cluster to join; None starts a local one with ``workers`` CPUs.
    """

    def __init__(
        self, model: str, extractor: str, mode: str, workers: int = 2, address: str | None = None
    ) -> None:
        if workers < 1:
            raise ValueError(f"--ray-workers must be >= 1, got {workers}")
        try:
            import ray
        except ImportError as e:
            raise ValueError(
                f"--engine ray needs the scale extra (pip install 'garag[scale]'): {e}"
            ) from None
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=workers, **kwargs)
        actor = ray.remote(num_cpus=1)(_ParseActor)
        self.actors = [actor.remote(model, extractor, mode) for _ in range(workers)]
        self.in_flight = 2 * workers
        self._next = 0
        logger.info("ray: %d parse actors (%s)", workers, address or "local")

    def submit(self, payload: Sequence[tuple[str, Sequence[str]]]) -> _Result:
        actor = self.actors[self._next % len(self.actors)]
        self._next += 1
        return _Result(actor.parse.remote(list(payload)))

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()

    def __enter__(self) -> RayParseExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _ParseActor:
    def __init__(self, model: str, extractor: str, mode: str) -> None:
        from retrievers.graal.linker import SpacyParser

        self.parser = SpacyParser(model, extractor, mode)

    def parse(self, payload: list[tuple[str, Sequence[str]]]) -> list:
        return self.parser.parse([t for t, _ in payload], [lk for _, lk in payload])
