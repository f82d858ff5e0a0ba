"""The retriever protocol and the context an index is built in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from garag.artifacts import artifact_dir, read_meta
from garag.corpus import CorpusDelta
from garag.store import SentenceStore
from garag.types import Hit


@dataclass(frozen=True)
class IndexContext:
    """What every index builder needs.

    Attributes:
        store: the sentence store (the only source of sentence text).
        cache_dir: root of all artifacts.
        fingerprint: corpus fingerprint (part of every artifact's hash).
        progress: show progress bars on long steps.
        engine: where the index builds' workers run (``garag index --engine ray``: a
            ``retrievers.graal.ray_engine.RayEngine``: graph ``parsers`` and ``partitions``, BM25
            shard ``tokenisers``, dense ``encoders``); None = in this process or its
            ``graal.workers`` / ``bm25.workers`` processes.  It never changes an artifact.
        parent: the context of an already indexed corpus this one is an edit of (garag/corpus.py):
            an index missing here is derived from the parent's where that one exists.
        delta: where the parent's rows and pages are here (set with ``parent``).
    """

    store: SentenceStore
    cache_dir: Path
    fingerprint: str
    progress: bool = True
    engine: Any = None
    parent: IndexContext | None = None
    delta: CorpusDelta | None = None

    def parent_artifact(self, kind: str, settings: dict) -> Path | None:
        """The parent corpus's complete artifact of ``kind`` built with ``settings`` (to derive this
        corpus's from), or None: no parent, or not built."""
        if self.parent is None or self.delta is None:
            return None
        path = artifact_dir(self.cache_dir, kind, settings, self.parent.fingerprint)
        return path if read_meta(path) is not None else None


@runtime_checkable
class Retriever(Protocol):
    """Returns ranked FEVER sentence ids for a query.

    Constructors are cheap; ``build()`` builds or reuses the on-disk index and
    loads it.  ``retrieve`` must only be called after ``build()``.
    """

    name: str

    def build(self, force: bool = False) -> Path:
        """Build (or reuse) the index and load it; return its artifact directory."""
        ...

    def retrieve(self, query: str, k: int) -> list[Hit]:
        """Top-``k`` hits for ``query``, best first (scores: higher is better)."""
        ...

    def retrieve_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """``retrieve`` for many queries at once (may be faster)."""
        ...
