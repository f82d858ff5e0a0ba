"""Read the training examples that dump_examples.py wrote (gzipped JSON lines), on any machine.

Kept apart from dump_examples.py, whose imports (retrieval, the FEVER indexes) a GPU machine lacks.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from garag.types import Evidence, Label, SentenceId
from verifier.base import TrainExample


def load_examples(path: str | Path, limit: int | None = None) -> list[TrainExample]:
    """The examples of one dumped file, in order (the first ``limit`` of them if given)."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            ev = tuple(Evidence(SentenceId(p, int(n)), t, float(s)) for p, n, t, s in r["ev"])
            out.append(TrainExample(r["claim"], ev, Label(r["label"]), r["id"]))
            if limit and len(out) >= limit:
                break
    return out
