"""Retrieval stage: builds the sentence store and the configured retrievers, then fuses them."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from garag.artifacts import build_artifact
from garag.config import Config
from garag.datasets import Dataset, dataset_from_config
from garag.errors import ErrorPolicy
from garag.fingerprint import cached_fingerprint
from garag.store import SentenceStore, build_store
from garag.types import Hit
from retrievers.base import IndexContext, Retriever
from retrievers.fusion import rrf_fuse
from retrievers.registry import create_retriever

logger = logging.getLogger(__name__)

STORE_SCHEMA = 1


@dataclass(frozen=True)
class RetrievalResult:
    """Fused hits for one query, with each retriever's own list and timing.

    Attributes:
        query: the query text.
        fused: fused hits, best first.
        per_retriever: retriever name -> its hits, best first.
        seconds: retriever name -> wall seconds spent on this query ("fusion" included).
    """

    query: str
    fused: tuple[Hit, ...]
    per_retriever: dict[str, tuple[Hit, ...]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def build_sentence_store(
    dataset: Dataset, cache_dir: Path, skip_bad_lines: bool, progress: bool = True, force: bool = False
) -> tuple[SentenceStore, str, Path]:
    """Build or reuse the sentence store of a dataset's corpus.

    Returns:
        The open store, the corpus fingerprint and the artifact directory.
    """
    fingerprint = cached_fingerprint(dataset.corpus_path, cache_dir)

    def build(tmp: Path) -> dict:
        return build_store(
            dataset.corpus_path, tmp / "sentences.db", ErrorPolicy(skip=skip_bad_lines), progress=progress
        )

    settings = {"schema": STORE_SCHEMA, "skip_bad_lines": skip_bad_lines}
    path = build_artifact(cache_dir, "store", settings, fingerprint, build, force=force)
    return SentenceStore(path / "sentences.db"), fingerprint, path


class RetrievalPipeline:
    """Sentence store + retrievers named in ``config.retrieval.retrievers``, fused by RRF.

    Construction is cheap; ``build()`` builds or reuses every index.
    """

    def __init__(
        self, config: Config, dataset: Dataset | None = None, progress: bool = True, engine: object = None
    ) -> None:
        self.config = config
        self.dataset = dataset or dataset_from_config(config.data)
        self.progress = progress
        self.engine = engine  # see IndexContext.engine
        self.store: SentenceStore | None = None
        self.retrievers: dict[str, Retriever] = {}
        self.artifacts: dict[str, Path] = {}

    def build(self, force: bool = False) -> dict[str, Path]:
        """Build or reuse the store and every configured retriever; return artifact dirs by name."""
        cache_dir = Path(self.config.paths.cache_dir)
        self.store, fingerprint, store_dir = build_sentence_store(
            self.dataset, cache_dir, self.config.data.skip_bad_lines, self.progress, force
        )
        self.artifacts = {"store": store_dir}
        ctx = IndexContext(self.store, cache_dir, fingerprint, self.progress, self.engine)
        for name in self.config.retrieval.retrievers:
            retriever = create_retriever(name, self.config, ctx)
            self.artifacts[name] = retriever.build(force=force)
            self.retrievers[name] = retriever
        return dict(self.artifacts)

    def _require_built(self) -> None:
        if not self.retrievers:
            raise RuntimeError("RetrievalPipeline.build() must run before retrieval")

    def retrieve(
        self, query: str, k: int | None = None, extra_queries: tuple[str, ...] = ()
    ) -> RetrievalResult:
        """Retrieve with every retriever for ``query`` (and extra queries) and fuse.

        Args:
            query: the claim.
            k: fused hits to return (default ``retrieval.k``).
            extra_queries: further queries (e.g. subquestions) fused with the claim's lists.
        """
        return self.retrieve_batch([query], k, [extra_queries])[0]

    def retrieve_batch(
        self, queries: list[str], k: int | None = None, extra_queries: list[tuple[str, ...]] | None = None
    ) -> list[RetrievalResult]:
        """``retrieve`` for many claims, calling each retriever's batch method once."""
        self._require_built()
        k = k or self.config.retrieval.k
        depth = max(self.config.fusion.depth, k)
        extra_queries = extra_queries or [() for _ in queries]
        if len(extra_queries) != len(queries):
            raise ValueError("extra_queries must have one tuple per query")
        flat: list[tuple[int, str]] = [(i, q) for i, q in enumerate(queries)]
        flat += [(i, q) for i, extras in enumerate(extra_queries) for q in extras]
        texts = [q for _, q in flat]
        lists: list[dict[str, tuple[Hit, ...]]] = [{} for _ in queries]
        seconds: list[dict[str, float]] = [{} for _ in queries]
        for name, retriever in self.retrievers.items():
            started = time.perf_counter()
            results = retriever.retrieve_batch(texts, depth)
            per_query = (time.perf_counter() - started) / max(len(queries), 1)
            for (i, q), hits in zip(flat, results, strict=True):
                key = name if q == queries[i] else f"{name}@{q}"
                lists[i][key] = tuple(hits)
                seconds[i][name] = per_query
        out = []
        for i, query in enumerate(queries):
            started = time.perf_counter()
            fused = rrf_fuse(lists[i], k, self.config.fusion.rrf_k, self.config.fusion.weights)
            seconds[i]["fusion"] = time.perf_counter() - started
            per_retriever = {n: h for n, h in lists[i].items()}
            out.append(RetrievalResult(query, tuple(fused), per_retriever, seconds[i]))
        return out
