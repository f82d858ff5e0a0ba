"""Append-only JSONL output that survives interruption and resumes where it stopped."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class ResumableJsonl:
    """A JSONL file of records keyed by ``id``, written one line at a time.

    On open, complete lines already in the file are kept and their ids are
    reported as done; a torn last line (a crash mid-write) is cut off.  Each
    record is flushed as it is written, so a killed run loses at most the
    record in flight.
    """

    def __init__(self, path: str | Path, key: str = "id") -> None:
        self.path = Path(path)
        self.key = key
        self.done: set = set()
        self.records: list[dict] = []
        self._fh = None
        self._load()

    def _load(self) -> None:
        if not self.path.is_file():
            return
        good_bytes = 0
        with open(self.path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    break
                if not isinstance(rec, dict) or self.key not in rec:
                    raise ValueError(f"{self.path}: line {len(self.records) + 1} has no {self.key!r}")
                self.records.append(rec)
                self.done.add(_hashable(rec[self.key]))
                good_bytes += len(raw)
        if good_bytes != self.path.stat().st_size:
            logger.warning(
                "%s: cutting a torn last line (resuming after %d records)", self.path, len(self.records)
            )
            with open(self.path, "r+b") as fh:
                fh.truncate(good_bytes)

    def __enter__(self) -> ResumableJsonl:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def is_done(self, key: Any) -> bool:
        return _hashable(key) in self.done

    def write(self, record: dict) -> None:
        """Append one record (must carry the key) and flush it."""
        if self._fh is None:
            raise RuntimeError("use ResumableJsonl as a context manager to write")
        self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fh.flush()
        self.records.append(record)
        self.done.add(_hashable(record[self.key]))


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value
