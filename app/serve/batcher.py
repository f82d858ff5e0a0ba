"""Micro-batching: concurrent single requests join one verifier batch.

A worker thread takes the first waiting item, waits up to ``max_wait`` seconds
for more (up to ``max_batch`` items), runs the batch function once on all of
them and gives every caller its own result (or its own exception).  One thread
per batcher also means the pipeline behind it is never used by two threads at
once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

logger = logging.getLogger(__name__)

BatchFn = Callable[[Sequence[Any]], Sequence[Any]]


class QueueFull(RuntimeError):
    """The batcher holds ``max_queue`` waiting items already; ``retry_after`` estimates, in whole
    seconds, when they will have run."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(f"{waiting} claims are waiting already")
        self.waiting, self.retry_after = waiting, retry_after


class MicroBatcher:
    """Collects items from many threads into batches for ``fn`` (items in, results in the same order).

    Args:
        fn: the batch function; it must return one result per item.  If it raises, every
            item of that batch gets the exception.
        max_batch: at most this many items per call.
        max_wait: at most this many seconds to wait for more items after the first one arrived.
        name: the worker thread's name.
        gap: stop waiting once no new item came for this long (a lone request is not held for
            ``max_wait``; a burst of requests still forms one batch).
        max_queue: at most this many items waiting; :meth:`submit_many` refuses more
            (:class:`QueueFull`) rather than queue without bound.  None: no bound.
    """

    def __init__(
        self,
        fn: BatchFn,
        max_batch: int = 16,
        max_wait: float = 0.01,
        name: str = "batcher",
        gap: float = 0.003,
        max_queue: int | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait < 0 or gap < 0:
            raise ValueError(f"max_wait and gap must be >= 0, got {max_wait}, {gap}")
        if max_queue is not None and max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.fn, self.max_batch, self.max_wait, self.gap = fn, max_batch, max_wait, gap
        self.max_queue = max_queue
        self._queue: queue.Queue[tuple[Any, Future] | None] = queue.Queue()
        self._admit = threading.Lock()  # the size check and the puts of one submit_many together
        self.seconds_per_batch = 0.0  # moving average of a batch's run time
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._closed = False
        self.batches: list[int] = []  # sizes of the batches run (the most recent 1,000)
        self._thread.start()

    def submit(self, item: Any) -> Future:
        """Queue one item; the future holds its result (cancelled futures are skipped unrun)."""
        if self._closed:
            raise RuntimeError("the batcher is closed")
        fut: Future = Future()
        self._queue.put((item, fut))
        return fut

    def waiting(self) -> int:
        """Items queued and not yet taken into a batch."""
        return self._queue.qsize()

    def submit_many(self, items: Sequence[Any]) -> list[Future]:
        """Queue every item or none.

        Raises:
            QueueFull: with ``max_queue`` set, the items do not fit beside the waiting ones.
        """
        with self._admit:
            waiting = self._queue.qsize()
            if self.max_queue is not None and waiting + len(items) > self.max_queue:
                batches = -(-waiting // self.max_batch)
                raise QueueFull(waiting, max(1, round(batches * self.seconds_per_batch + 0.5)))
            return [self.submit(x) for x in items]

    def close(self, timeout: float = 5.0) -> None:
        """Stop after the queued items are done."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout)

    def _collect(self, first: tuple[Any, Future]) -> tuple[list[tuple[Any, Future]], bool]:
        batch, stop = [first], False
        deadline = time.monotonic() + self.max_wait
        while len(batch) < self.max_batch:
            left = min(deadline - time.monotonic(), self.gap)
            try:
                nxt = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                stop = True
                break
            batch.append(nxt)
        return batch, stop

    def _work(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            batch, stop = self._collect(first)
            live = [(x, f) for x, f in batch if f.set_running_or_notify_cancel()]
            if not live:
                continue
            self.batches = [*self.batches[-999:], len(live)]
            started = time.monotonic()
            try:
                results = list(self.fn([x for x, _ in live]))
                if len(results) != len(live):
                    raise RuntimeError(
                        f"batch function returned {len(results)} results for {len(live)} items"
                    )
            except BaseException as e:  # noqa: BLE001 - every caller of the batch gets the error
                for _, f in live:
                    f.set_exception(e)
                continue
            finally:
                took = time.monotonic() - started
                self.seconds_per_batch = (
                    took if not self.seconds_per_batch else 0.8 * self.seconds_per_batch + 0.2 * took
                )
            for (_, f), r in zip(live, results, strict=True):
                f.set_result(r)
