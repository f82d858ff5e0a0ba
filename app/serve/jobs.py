"""Background jobs of ``garag serve``: their SQLite store under the state directory.

A job is a list of items (claims, for kind "claims") and, per item, at most one result.  A result is
written in the same transaction as the job's progress count, and the results table's key is (job,
item index), so a job killed at any point resumes from its first item without a result: nothing is
lost and nothing is done twice.  The database is in WAL mode, so the page's reads never wait for the
runner's writes.

The runner (``job_runner.py``) runs one job at a time, oldest first; what a job does is the
function registered for its kind.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

STATES = ("queued", "running", "done", "failed", "cancelled")
ACTIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    config TEXT NOT NULL,
    state TEXT NOT NULL,
    total INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    params TEXT NOT NULL DEFAULT '{}',
    index_versions TEXT NOT NULL DEFAULT '[]',
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    busy_seconds REAL NOT NULL DEFAULT 0,
    starts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    metrics TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, created);
CREATE TABLE IF NOT EXISTS job_items (
    job TEXT NOT NULL,
    idx INTEGER NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (job, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_results (
    job TEXT NOT NULL,
    idx INTEGER NOT NULL,
    label TEXT,
    gold TEXT,
    correct INTEGER,
    record TEXT NOT NULL,
    PRIMARY KEY (job, idx)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Job:
    """One row of the jobs table (times are Unix seconds)."""

    id: str
    kind: str
    config: str
    state: str
    total: int
    done: int
    params: dict[str, Any]
    index_versions: list[str]
    created: float
    started: float | None
    finished: float | None
    busy_seconds: float
    starts: int
    error: str | None
    metrics: dict[str, Any] | None

    @property
    def claims_per_second(self) -> float | None:
        """Items done per second of work (waiting for the models and writing), over every start."""
        return self.done / self.busy_seconds if self.done and self.busy_seconds > 0 else None

    @property
    def eta_seconds(self) -> float | None:
        rate = self.claims_per_second
        if self.state not in ACTIVE or not rate:
            return None
        return (self.total - self.done) / rate


@dataclass(frozen=True)
class Result:
    """One item's result: ``label`` and ``gold`` (None where the item has none) and ``correct`` serve
    the filters; ``record`` is the whole result."""

    idx: int
    label: str | None
    gold: str | None
    correct: bool | None
    record: dict[str, Any]


def _job(row: sqlite3.Row) -> Job:
    """A jobs row as a Job (the columns are its fields; the JSON ones decoded)."""
    fields = dict(zip(row.keys(), row, strict=True))
    return Job(**fields | {
        "params": json.loads(fields["params"]),
        "index_versions": json.loads(fields["index_versions"]),
        "metrics": json.loads(fields["metrics"]) if fields["metrics"] else None,
    })  # fmt: skip


class JobStore:
    """The jobs, their items and their results in one SQLite file (WAL mode).

    Every call opens its own connection, so any thread may call (the runner writes, the API reads).
    The file is made by the first write: a server that runs no job writes nothing (reads before
    then see an empty store).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._made = False
        self._make_lock = threading.Lock()
        if self.path.is_file():
            self._make()

    def _make(self) -> None:
        with self._make_lock:
            if self._made:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
            finally:
                db.close()
            self._made = True

    @contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if write or self.path.is_file():
            self._make()
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        else:  # nothing written yet: an empty store, in memory
            db = sqlite3.connect(":memory:", isolation_level=None)
            db.executescript(SCHEMA)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA synchronous=NORMAL")  # WAL: a commit survives the process being killed
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, taking the write lock at its start."""
        with self._connect(write=True) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- jobs ------------------------------------------------------------------------------------

    def create(self, kind: str, config: str, items: Sequence[dict], params: dict[str, Any]) -> Job:
        """A queued job of ``items`` (JSON objects), all written in one transaction."""
        job_id = uuid.uuid4().hex[:12]
        with self._write() as db:
            db.execute(
                "INSERT INTO jobs (id, kind, config, state, total, params, created) VALUES (?,?,?,?,?,?,?)",
                (job_id, kind, config, "queued", len(items), json.dumps(params), time.time()),
            )
            db.executemany(
                "INSERT INTO job_items (job, idx, item) VALUES (?,?,?)",
                ((job_id, i, json.dumps(x, ensure_ascii=False)) for i, x in enumerate(items)),
            )
        return self.get(job_id)  # type: ignore[return-value]

    def get(self, job_id: str) -> Job | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row is not None else None

    def list(self, state: str | None = None, limit: int = 100) -> list[Job]:
        """Newest first."""
        where, args = ("WHERE state = ?", [state]) if state else ("", [])
        with self._connect() as db:
            rows = db.execute(f"SELECT * FROM jobs {where} ORDER BY created DESC LIMIT ?", [*args, limit])
            return [_job(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Jobs per state (every state named, 0 where none)."""
        with self._connect() as db:
            rows = db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {s: 0 for s in STATES} | {s: n for s, n in rows}

    def next_runnable(self, kinds: Iterable[str], configs: Iterable[str]) -> Job | None:
        """The oldest queued or running job of one of ``kinds`` for one of ``configs``."""
        kinds, configs = list(kinds), list(configs)
        if not kinds or not configs:
            return None
        sql = (
            "SELECT * FROM jobs WHERE state IN ('queued', 'running') "
            f"AND kind IN ({','.join('?' * len(kinds))}) AND config IN ({','.join('?' * len(configs))}) "
            "ORDER BY created LIMIT 1"
        )
        with self._connect() as db:
            row = db.execute(sql, [*kinds, *configs]).fetchone()
        return _job(row) if row is not None else None

    def start(self, job_id: str, index_version: str) -> bool:
        """Mark a queued (or interrupted) job running; False when it is no longer queued or running."""
        with self._write() as db:
            row = db.execute("SELECT state, index_versions FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["state"] not in ACTIVE:
                return False
            versions = json.loads(row["index_versions"])
            if index_version and index_version not in versions:
                versions.append(index_version)  # a resumed job may answer from a newer corpus
            db.execute(
                "UPDATE jobs SET state = 'running', started = COALESCE(started, ?), starts = starts + 1, "
                "index_versions = ? WHERE id = ?",
                (time.time(), json.dumps(versions), job_id),
            )
        return True

    def finish(self, job_id: str, state: str, error: str | None = None, metrics: dict | None = None) -> None:
        """End a running job (done or failed); a cancelled one stays cancelled."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET state = ?, finished = ?, error = ?, metrics = ? "
                "WHERE id = ? AND state = 'running'",
                (state, time.time(), error, json.dumps(metrics) if metrics is not None else None, job_id),
            )

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job; False when it had finished already."""
        with self._write() as db:
            cur = db.execute(
                "UPDATE jobs SET state = 'cancelled', finished = ? "
                "WHERE id = ? AND state IN ('queued', 'running')",
                (time.time(), job_id),
            )
            return cur.rowcount == 1

    def requeue(self, job_id: str) -> bool:
        """Queue a cancelled or failed job again (it resumes from its first claim without a result)."""
        with self._write() as db:
            cur = db.execute(
                "UPDATE jobs SET state = 'queued', finished = NULL, error = NULL, metrics = NULL "
                "WHERE id = ? AND state IN ('cancelled', 'failed')",
                (job_id,),
            )
            return cur.rowcount == 1

    def state(self, job_id: str) -> str | None:
        with self._connect() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row[0] if row is not None else None

    def delete(self, job_id: str) -> bool:
        """Delete a finished job with its items and results; False when it is queued or running."""
        with self._write() as db:
            cur = db.execute(
                "DELETE FROM jobs WHERE id = ? AND state IN ('done', 'failed', 'cancelled')", (job_id,)
            )
            if cur.rowcount != 1:
                return False
            db.execute("DELETE FROM job_items WHERE job = ?", (job_id,))
            db.execute("DELETE FROM job_results WHERE job = ?", (job_id,))
        return True

    # -- items and results -----------------------------------------------------------------------

    def items(self, job_id: str) -> list[dict]:
        with self._connect() as db:
            rows = db.execute("SELECT item FROM job_items WHERE job = ? ORDER BY idx", (job_id,))
            return [json.loads(r[0]) for r in rows]

    def pending(self, job_id: str) -> list[tuple[int, dict]]:
        """``(index, item)`` of the items without a result, in order."""
        sql = (
            "SELECT i.idx, i.item FROM job_items i "
            "LEFT JOIN job_results r ON r.job = i.job AND r.idx = i.idx "
            "WHERE i.job = ? AND r.idx IS NULL ORDER BY i.idx"
        )
        with self._connect() as db:
            return [(r[0], json.loads(r[1])) for r in db.execute(sql, (job_id,))]

    def add_results(
        self, job_id: str, results: Sequence[Result], seconds: float, index_versions: Sequence[str] = ()
    ) -> bool:
        """Write results and count them done, in one transaction, adding the index versions they
        answered from to the job's; False when the job is gone.

        Raises:
            sqlite3.IntegrityError: an item has a result already (nothing of the call is written).
        """
        with self._write() as db:
            row = db.execute("SELECT index_versions FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return False
            versions = json.loads(row["index_versions"])
            versions += [v for v in dict.fromkeys(index_versions) if v and v not in versions]
            db.executemany(
                "INSERT INTO job_results (job, idx, label, gold, correct, record) VALUES (?,?,?,?,?,?)",
                (
                    (job_id, r.idx, r.label, r.gold, None if r.correct is None else int(r.correct),
                     json.dumps(r.record, ensure_ascii=False))
                    for r in results
                ),
            )  # fmt: skip
            db.execute(
                "UPDATE jobs SET done = done + ?, busy_seconds = busy_seconds + ?, index_versions = ? "
                "WHERE id = ?",
                (len(results), seconds, json.dumps(versions), job_id),
            )
        return True

    def _filters(self, label: str | None, gold: str | None, correct: bool | None, q: str | None):  # noqa: ANN202
        where, args = ["job = ?"], []
        for column, value in (("label", label), ("gold", gold)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if correct is not None:
            where.append("correct = ?")
            args.append(int(correct))
        if q:
            where.append("instr(lower(json_extract(record, '$.claim')), lower(?)) > 0")
            args.append(q)
        return " AND ".join(where), args

    def results(
        self,
        job_id: str,
        label: str | None = None,
        gold: str | None = None,
        correct: bool | None = None,
        q: str | None = None,
        offset: int = 0,
        limit: int = -1,
    ) -> tuple[int, list[Result]]:
        """``(matching count, results from offset)`` in item order."""
        where, args = self._filters(label, gold, correct, q)
        with self._connect() as db:
            total = db.execute(f"SELECT COUNT(*) FROM job_results WHERE {where}", [job_id, *args]).fetchone()[
                0
            ]
            rows = db.execute(
                f"SELECT * FROM job_results WHERE {where} ORDER BY idx LIMIT ? OFFSET ?",
                [job_id, *args, limit, offset],
            ).fetchall()
        return total, [
            Result(r["idx"], r["label"], r["gold"], None if r["correct"] is None else bool(r["correct"]),
                   json.loads(r["record"]))
            for r in rows
        ]  # fmt: skip

    def iter_records(self, job_id: str, page: int = 500) -> Iterator[dict]:
        """Every result record in item order, read ``page`` rows at a time (downloads stream this)."""
        last = -1
        while True:
            with self._connect() as db:
                rows = db.execute(
                    "SELECT idx, record FROM job_results WHERE job = ? AND idx > ? ORDER BY idx LIMIT ?",
                    (job_id, last, page),
                ).fetchall()
            if not rows:
                return
            for _, record in rows:
                yield json.loads(record)
            last = rows[-1][0]
