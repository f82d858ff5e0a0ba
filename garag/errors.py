"""Input errors that name the file and line, and a counter for skip mode."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


class InputError(ValueError):
    """Bad input, with the file and line number where it was found."""

    def __init__(self, path: str, line: int | None, message: str, kind: str = "bad_record") -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line
        self.reason = message
        self.kind = kind


@dataclass
class ErrorPolicy:
    """What a reader does with a bad record: raise (default) or skip and count.

    Attributes:
        skip: when True, bad records are logged, counted and skipped.
        counts: reason -> number of skipped records.
        examples: the first few skipped records' messages, for reports.
    """

    skip: bool = False
    counts: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def handle(self, error: InputError, kind: str | None = None) -> None:
        """Raise ``error``, or count it under ``kind`` (default: the error's own) when skipping."""
        kind = kind or error.kind
        if not self.skip:
            raise error
        self.counts[kind] += 1
        if len(self.examples) < 20:
            self.examples.append(str(error))
        logger.warning("skipped: %s", error)

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())
