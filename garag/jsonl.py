"""JSONL records keyed by ``id``: a read-only reader, and an append-only writer that resumes.

Reading never writes.  The writer keeps every complete record already in the
file; the only bytes it ever removes are an incomplete last line (a record cut
off by a crash mid-write), and only when it is opened to append.  A corrupt
line in the middle of the file is an error naming the file and the line: cutting
there would lose every record after it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from garag.errors import ErrorPolicy, InputError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Scan:
    records: list[dict]
    good_bytes: int  # bytes up to the end of the last complete, valid line
    torn_tail: bool  # the file ends in an incomplete line after good_bytes


def iter_text_lines(
    path: str | Path,
    policy: ErrorPolicy | None = None,
    lines: Iterable[bytes] | None = None,
    source: str | None = None,
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 text file (or of the given byte lines, named ``source``).

    A line that is not UTF-8 goes to ``policy`` (default: raise), naming file and line.

    Raises:
        FileNotFoundError: no such file.
        InputError: ``path`` is a directory, or a line is not UTF-8 and ``policy`` does not skip.
    """
    name = source or str(path)
    policy = policy or ErrorPolicy()
    if lines is None:
        p = Path(path)
        if p.is_dir():
            raise InputError(name, None, "is a directory, not a file", kind="not_a_file")
        if not p.exists():
            raise FileNotFoundError(f"{name}: no such file")
        with open(p, "rb") as fh:
            yield from iter_text_lines(p, policy, fh, name)
        return
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            policy.handle(
                InputError(name, number, f"not UTF-8 text (byte {e.start} of the line)", "bad_encoding")
            )
            continue
        yield number, text


def _parse_line(raw: bytes, path: Path, line: int, key: str) -> dict:
    try:
        rec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(str(path), line, f"not UTF-8 text (byte {e.start})", kind="bad_json") from None
    except json.JSONDecodeError as e:
        raise InputError(str(path), line, f"not valid JSON ({e.msg})", kind="bad_json") from None
    if not isinstance(rec, dict):
        raise InputError(
            str(path), line, f"expected a JSON object, got {type(rec).__name__}", kind="bad_json"
        )
    if key not in rec:
        raise InputError(str(path), line, f"the record has no {key!r}", kind="bad_record")
    return rec


def _scan(path: Path, key: str, policy: ErrorPolicy | None) -> _Scan:
    """Every valid record; bad complete lines go to ``policy`` (None: raise)."""
    records: list[dict] = []
    good = 0
    if path.is_dir():
        raise InputError(str(path), None, "is a directory, not a JSONL file", kind="not_a_file")
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                return _Scan(records, good, torn_tail=True)
            if raw.strip():
                try:
                    records.append(_parse_line(raw, path, number, key))
                except InputError as error:
                    if policy is None:
                        raise
                    policy.handle(error)
            good += len(raw)
    return _Scan(records, good, torn_tail=False)


def read_records(path: str | Path, key: str = "id", policy: ErrorPolicy | None = None) -> list[dict]:
    """The records of a JSONL file, read only.

    Args:
        path: the file.
        key: the field every record must have.
        policy: what to do with a bad line (default: raise :class:`InputError` naming file and line).

    Raises:
        FileNotFoundError: no such file.
        InputError: a bad line (invalid JSON, not UTF-8, not an object, no ``key``, an incomplete
            last line) when ``policy`` does not skip.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    policy = policy or ErrorPolicy()
    scan = _scan(path, key, policy)
    if scan.torn_tail:
        line = len(path.read_bytes()[: scan.good_bytes].splitlines()) + 1
        policy.handle(InputError(str(path), line, "incomplete last line (no newline)", kind="torn_line"))
    return scan.records


class ResumableJsonl:
    """A JSONL file of records keyed by ``id``, appended one flushed line at a time.

    On open, complete lines already in the file are kept and their ids are
    reported as done.  Opening it to write (``with``) cuts an incomplete last
    line, the record in flight when a run was killed, and says so.  A killed
    run loses at most that record.

    Raises:
        InputError: a complete line in the file is not a valid record (naming file and line).
    """

    def __init__(self, path: str | Path, key: str = "id") -> None:
        self.path = Path(path)
        self.key = key
        self.done: set = set()
        self.records: list[dict] = []
        self._fh = None
        self._good_bytes = 0
        self._torn_tail = False
        if self.path.exists():
            scan = _scan(self.path, key, None)
            self.records = scan.records
            self._good_bytes, self._torn_tail = scan.good_bytes, scan.torn_tail
            self.done = {_hashable(r[key]) for r in self.records}

    def __enter__(self) -> ResumableJsonl:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._torn_tail:
            cut = self.path.stat().st_size - self._good_bytes
            logger.warning(
                "%s: cutting an incomplete last line (%d bytes, a record cut off mid-write); "
                "resuming after %d records",
                self.path,
                cut,
                len(self.records),
            )
            with open(self.path, "r+b") as fh:
                fh.truncate(self._good_bytes)
            self._torn_tail = False
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
