"""The runner of ``garag serve``'s jobs: one thread that runs the queued and interrupted jobs of a
:class:`~app.serve.jobs.JobStore`, oldest first, each with the function registered for its kind.

A lock file lets one process at a time run the jobs of a state directory; a second server on the
same directory takes over when the first one dies (the OS drops a dead process's lock).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .jobs import Job, JobStore

try:
    import fcntl
except ImportError:  # not POSIX: no cross-process lock (one server per state directory then)
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)


class JobStopped(Exception):
    """The server is stopping: the job stays running and resumes at the next start."""


class JobCancelled(Exception):
    """The job was cancelled: it ends (its results so far are kept)."""


# a job kind: runs one job to its end (``ctx`` has the store, the service and the stop checks) and
# returns its metrics (or None); raises JobStopped / JobCancelled, or anything else to fail the job
JobFn = Callable[["JobContext"], "dict | None"]


@dataclass
class JobContext:
    """What a job function gets: its job, the store, the service and the checks between batches."""

    job: Job
    store: JobStore
    service: Any  # app.serve.service.Service
    runner: JobRunner

    def check(self) -> None:
        """Raise JobStopped when the server stops, JobCancelled when the job was cancelled."""
        if self.runner.stopping:
            raise JobStopped
        if self.store.state(self.job.id) == "cancelled":
            raise JobCancelled

    def cancelled(self) -> bool:
        return self.store.state(self.job.id) == "cancelled"


class JobRunner:
    """One thread that runs the queued and interrupted jobs of a store, oldest first.

    Args:
        store: the jobs.
        service: the loaded configs (a job waits until the service is ready).
        lock_path: the lock file that one process at a time holds to run the store's jobs.
        poll: seconds between looks for new jobs (a submit wakes the runner at once).
    """

    def __init__(self, store: JobStore, service: Any, lock_path: Path, poll: float = 1.0) -> None:
        self.store, self.service, self.lock_path, self.poll = store, service, Path(lock_path), poll
        self.kinds: dict[str, JobFn] = {}
        self.stopping = False
        self.current: str | None = None
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_file = None
        self._start_lock = threading.Lock()

    def register(self, kind: str, fn: JobFn) -> None:
        """Run jobs of ``kind`` with ``fn``."""
        self.kinds[kind] = fn

    def ensure_started(self) -> None:
        """Start the thread (once); wake it when it runs."""
        with self._start_lock:
            if self._thread is None and not self.stopping:
                self._thread = threading.Thread(target=self._loop, name="garag-jobs", daemon=True)
                self._thread.start()
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the batch in flight is written (the job resumes at the next start)."""
        self.stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _take_lock(self) -> bool:
        if self._lock_file is not None:
            return True
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.lock_path, "a+b")  # noqa: SIM115 - held while the runner lives
        if fcntl is not None:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                return False
        self._lock_file = f
        return True

    def _loop(self) -> None:
        while not self.stopping:
            job = None
            try:
                if self._take_lock() and self.service.ready:
                    job = self.store.next_runnable(self.kinds, self.service.served)
                if job is not None:
                    self._run(job)
                    continue
            except Exception:  # noqa: BLE001 - a database error (disk full, locked too long): try again
                logger.exception("jobs: the runner failed; it tries again in %.0f s", self.poll)
            self._wake.wait(self.poll)
            self._wake.clear()

    def _run(self, job: Job) -> None:
        service = self.service
        if not self.store.start(job.id, ""):  # its batches add the index versions they answered from
            return
        job = self.store.get(job.id) or job
        self.current = job.id
        logger.info(
            "job %s (%s, %s): %d of %d done, starting", job.id, job.kind, job.config, job.done, job.total
        )
        try:
            metrics = self.kinds[job.kind](JobContext(job, self.store, service, self))
        except JobStopped:
            logger.info("job %s: stopped with the server; it resumes at the next start", job.id)
        except JobCancelled:
            logger.info("job %s: cancelled", job.id)
        except Exception as e:  # noqa: BLE001 - the job fails with one line; the runner goes on
            logger.exception("job %s failed", job.id)
            self.store.finish(job.id, "failed", error=f"{type(e).__name__}: {' '.join(str(e).split())}")
        else:
            self.store.finish(job.id, "done", metrics=metrics)
        finally:
            self.current = None
