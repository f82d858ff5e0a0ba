"""``GET /metrics`` of ``garag serve``: Prometheus counters of requests, their latency and the queues.

Each app gets its own registry (two apps in one process, as in the tests, never share counters).
Paths are labelled by their route template (``/v1/runs/{run_id}``), so the label set stays small.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)


class Telemetry:
    """The service's Prometheus metrics.

    Args:
        waiting: ``config name -> () -> claims waiting in its queue``, read at each scrape.
    """

    def __init__(self, waiting: dict[str, Callable[[], int]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "garag_requests", "HTTP requests answered", ["method", "path", "status"], registry=self.registry
        )
        self.seconds = Histogram(
            "garag_request_seconds",
            "Seconds to answer a request",
            ["path"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.claims = Counter(
            "garag_claims_verified", "Claims verified, by config", ["config"], registry=self.registry
        )
        queue = Gauge(
            "garag_queue_claims", "Claims waiting in a config's queue", ["config"], registry=self.registry
        )
        for name, read in waiting.items():
            queue.labels(name).set_function(read)

    def track_jobs(self, counts: Callable[[], dict[str, int]]) -> None:
        """``garag_jobs{state}``: jobs per state, ``counts()`` read at each scrape."""
        gauge = Gauge("garag_jobs", "Jobs by state", ["state"], registry=self.registry)
        for state in ("queued", "running", "done", "failed", "cancelled"):
            gauge.labels(state).set_function(lambda s=state: counts().get(s, 0))

    def observe(self, method: str, path: str, status: int, seconds: float) -> None:
        self.requests.labels(method, path, str(status)).inc()
        self.seconds.labels(path).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
