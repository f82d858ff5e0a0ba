"""The probabilities of (premise, claim) pairs an NLI model has scored, kept for reuse.

A pipeline's verdict and its decision model read the same pairs; two systems of one comparison
(baseline and graph) read many of the same sentences for the same claims; the claim aggregator and
the decision model that training fits beside a verifier read the same validation claims.  Each NLI
verifier takes its memory (a :class:`garag.lru.LRU` of pairs) from a :class:`PairMemories` pool, by
its *reader*: the checkpoint's files, the precision, the token limit, the device and the label
order, everything a pair's probabilities depend on besides the pair.  Verifiers that share a pool
and read alike answer each other's pairs; verifiers that read differently never do.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import numpy as np

from garag.lru import LRU

CAPACITY = 100_000  # pairs per reader, the least recently used forgotten first: about 50 MB
READERS = 8  # readers a pool keeps a memory for, likewise

PairMemory = LRU[tuple[str, str], np.ndarray]  # (premise, claim) -> probabilities in LABEL_ORDER


class PairMemories:
    """One memory of scored pairs per reader, for the NLI verifiers given this pool."""

    def __init__(self, capacity: int = CAPACITY, readers: int = READERS) -> None:
        self.capacity = capacity
        self._memories: LRU[Hashable, PairMemory] = LRU(readers)

    def __len__(self) -> int:
        return len(self._memories)

    def for_reader(self, reader: Hashable) -> PairMemory:
        """The memory of ``reader`` (made on first use)."""
        return self._memories.values([reader], lambda todo: [LRU(self.capacity) for _ in todo])[0]


def checkpoint_identity(model_path: str) -> tuple:
    """What names a checkpoint's weights: a local directory's resolved path with the name, size and
    modification time of each file in it (garag's ``garag_*.json``, the aggregator, calibration and
    decision fitted beside the model, change no pair's probabilities and are left out, so refitting
    them keeps the memory), or a hub id as given."""
    local = Path(model_path).expanduser()
    if not local.is_dir():
        return ("hub", model_path)
    files = []
    for f in sorted(local.iterdir()):
        if f.is_file() and not f.name.startswith("garag_"):
            st = f.stat()
            files.append((f.name, st.st_size, st.st_mtime_ns))
    return ("local", str(local.resolve()), tuple(files))
