"""Every ad-hoc verification of ``garag serve``, kept in SQLite: when, how (verify, batch, passage),
which config and corpus version, the claim, its label and scores, and the whole response.

The file is ``<state dir>/history.sqlite`` in WAL mode, so that reading the list never waits for a
write.  Each call opens its own connection: the store is used from FastAPI's thread pool.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .csv_out import csv_lines

SOURCES = ("verify", "batch", "passage")
LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
CSV_COLUMNS = ("id", "created", "source", "request", "config", "index_version", "k", "claim", "label",
               *(f"score_{x}" for x in LABELS), "cited")  # fmt: skip

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    source TEXT NOT NULL,
    request TEXT NOT NULL,
    config TEXT NOT NULL,
    index_version TEXT NOT NULL,
    k INTEGER,
    claim TEXT NOT NULL,
    label TEXT NOT NULL,
    scores TEXT NOT NULL,
    response TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS verifications_created ON verifications (created);
CREATE INDEX IF NOT EXISTS verifications_config ON verifications (config, label);
"""


@dataclass(frozen=True)
class HistoryFilter:
    """Which entries: ``q`` a case-insensitive substring of the claim; the others exact values."""

    q: str | None = None
    config: str | None = None
    label: str | None = None
    source: str | None = None

    def where(self) -> tuple[str, list]:
        parts, args = [], []
        if self.q:
            escaped = self.q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            parts.append("claim LIKE ? ESCAPE '\\'")  # LIKE ignores case for ASCII letters
            args.append(f"%{escaped}%")
        for column in ("config", "label", "source"):
            value = getattr(self, column)
            if value:
                parts.append(f"{column} = ?")
                args.append(value)
        return (" WHERE " + " AND ".join(parts)) if parts else "", args


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class History:
    """The verification history in one SQLite file, created (with its directory) on first use: an
    app that verifies nothing writes nothing.

    Args:
        path: the SQLite file, or a function giving it (called on first use).
    """

    def __init__(self, path: Path | Callable[[], Path]) -> None:
        self._path_of = path if callable(path) else (lambda: Path(path))
        self.path: Path | None = None
        self._open = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        with self._open:
            if self.path is None:
                path = Path(self._path_of())
                path.parent.mkdir(parents=True, exist_ok=True)
                with closing(sqlite3.connect(path, timeout=30)) as db:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.executescript(_SCHEMA)
                self.path = path
        # an export is streamed: its rows are read by whichever pool thread asks for the next part
        db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        db.row_factory = sqlite3.Row
        return db

    def add(
        self, source: str, request: str, config: str, k: int | None, responses: Sequence[dict]
    ) -> list[int]:
        """Store the responses of one request (one row each, with the index version it answered
        from: a request's claims may straddle a corpus switch); their ids, in order."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        now = time.time()
        ids = []
        with closing(self._connect()) as db, db:
            for r in responses:
                cur = db.execute(
                    "INSERT INTO verifications (created, source, request, config, index_version, k, claim,"
                    " label, scores, response) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (now, source, request, config, r["index_version"], k, r["claim"], r["label"],
                     json.dumps(r["scores"]), json.dumps(r, ensure_ascii=False)),
                )  # fmt: skip
                ids.append(int(cur.lastrowid))
        return ids

    @staticmethod
    def _summary(row: sqlite3.Row) -> dict:
        return {
            "id": row["id"],
            "created": iso(row["created"]),
            "source": row["source"],
            "request": row["request"],
            "config": row["config"],
            "index_version": row["index_version"],
            "k": row["k"],
            "claim": row["claim"],
            "label": row["label"],
            "scores": json.loads(row["scores"]),
        }

    def page(self, where: HistoryFilter, page: int, page_size: int) -> dict:
        """One page of entries, newest first, with the total and page count."""
        clause, args = where.where()
        with closing(self._connect()) as db:
            total = db.execute(f"SELECT COUNT(*) FROM verifications{clause}", args).fetchone()[0]
            rows = db.execute(
                f"SELECT * FROM verifications{clause} ORDER BY id DESC LIMIT ? OFFSET ?",
                [*args, page_size, (page - 1) * page_size],
            ).fetchall()
            configs = [r[0] for r in db.execute("SELECT DISTINCT config FROM verifications ORDER BY config")]
        return {
            "total": total,
            "page": page,
            "page_size": page_size,
            "pages": max(1, math.ceil(total / page_size)),
            "configs": configs,
            "items": [self._summary(r) for r in rows],
        }

    def get(self, entry: int) -> dict | None:
        """One entry with its whole response, or None."""
        with closing(self._connect()) as db:
            row = db.execute("SELECT * FROM verifications WHERE id = ?", (entry,)).fetchone()
        if row is None:
            return None
        return self._summary(row) | {"response": json.loads(row["response"])}

    def delete(self, entry: int | None = None) -> int:
        """Delete one entry (``entry``) or every entry (None); how many went."""
        with closing(self._connect()) as db, db:
            if entry is None:
                return db.execute("DELETE FROM verifications").rowcount
            return db.execute("DELETE FROM verifications WHERE id = ?", (entry,)).rowcount

    def _rows(self, where: HistoryFilter) -> Iterator[sqlite3.Row]:
        clause, args = where.where()
        with closing(self._connect()) as db:
            yield from db.execute(f"SELECT * FROM verifications{clause} ORDER BY id", args)

    def export_jsonl(self, where: HistoryFilter) -> Iterator[str]:
        """One JSON line per entry, oldest first: the summary and the whole response."""
        for row in self._rows(where):
            yield json.dumps(self._summary(row) | {"response": json.loads(row["response"])},
                             ensure_ascii=False) + "\n"  # fmt: skip

    def export_csv(self, where: HistoryFilter) -> Iterator[str]:
        """A header line, then one row per entry (the scores in columns, the cited sentences as
        ``page (line)`` joined by "; "), oldest first."""

        def rows() -> Iterator[Sequence]:
            yield CSV_COLUMNS
            for row in self._rows(where):
                s = self._summary(row)
                response = json.loads(row["response"])
                cited = "; ".join(
                    f"{e['page']} ({e['line']})" for e in response.get("evidence", []) if e.get("cited")
                )
                yield [s["id"], s["created"], s["source"], s["request"], s["config"], s["index_version"],
                       "" if s["k"] is None else s["k"], s["claim"], s["label"],
                       *(s["scores"].get(x, "") for x in LABELS), cited]  # fmt: skip

        return csv_lines(rows())
