"""Retrieval stage: builds the sentence store and the configured retrievers, then fuses them."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from garag.artifacts import artifact_dir, build_artifact, read_meta
from garag.config import Config
from garag.corpus import (
    CorpusDelta,
    CorpusEdits,
    EditPlan,
    edit_plan,
    edited_fingerprint,
    iter_edited_pages,
    remove_file,
)
from garag.datasets import Dataset, dataset_from_config
from garag.errors import ErrorPolicy
from garag.fingerprint import cached_fingerprint
from garag.store import SentenceStore, build_store, derive_store
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


def corpus_fingerprint(dataset: Dataset, cache_dir: str | Path, edits: CorpusEdits | None = None) -> str:
    """Fingerprint of a dataset's corpus with ``edits`` (default: the dataset's own edits)."""
    edits = dataset.edits if edits is None else edits
    base = cached_fingerprint(dataset.corpus_path, cache_dir)
    add = [cached_fingerprint(f, cache_dir) for f in edits.add]
    remove = [cached_fingerprint(remove_file(f), cache_dir) for f in edits.remove]
    return edited_fingerprint(base, add, remove)


def _store_settings(skip_bad_lines: bool) -> dict:
    return {"schema": STORE_SCHEMA, "skip_bad_lines": skip_bad_lines}


@dataclass(frozen=True)
class _Parent:
    """An already indexed corpus that the edited one derives from."""

    store: SentenceStore
    fingerprint: str
    plan: EditPlan


def _find_parent(dataset: Dataset, cache_dir: Path, skip_bad_lines: bool) -> _Parent | None:
    """The closest sub-list of the dataset's edits whose corpus has a sentence store, if any."""
    policy = ErrorPolicy(skip=skip_bad_lines)
    for edits in dataset.edits.parents():
        fingerprint = corpus_fingerprint(dataset, cache_dir, edits)
        path = artifact_dir(cache_dir, "store", _store_settings(skip_bad_lines), fingerprint)
        if read_meta(path) is None:
            continue
        store = SentenceStore(path / "sentences.db")
        plan = edit_plan(set(store.page_names()), edits, dataset.edits, policy)
        logger.info("corpus edits: deriving the indexes from those of %s", path)
        return _Parent(store, fingerprint, plan)
    return None


def build_sentence_store(
    dataset: Dataset,
    cache_dir: Path,
    skip_bad_lines: bool,
    progress: bool = True,
    force: bool = False,
    parent: _Parent | None = None,
) -> tuple[SentenceStore, str, Path]:
    """Build or reuse the sentence store of a dataset's corpus (its edits applied).

    With ``parent`` (and no ``force``), the store is derived from the parent's store.

    Returns:
        The open store, the corpus fingerprint and the artifact directory.
    """
    fingerprint = corpus_fingerprint(dataset, cache_dir)
    policy = ErrorPolicy(skip=skip_bad_lines)

    def build(tmp: Path) -> dict:
        db = tmp / "sentences.db"
        if parent is not None and not force:
            added = parent.plan.added_pages(policy)
            info = derive_store(parent.store.db_path, db, parent.plan.drop, added, policy, progress)
            return {**info, "derived_from": parent.store.db_path.parent.name}
        # an edited corpus's pages: a repeated id can only come from the base (add files drop theirs)
        pages = iter_edited_pages(dataset.corpus_path, dataset.edits, policy) if dataset.edits else None
        return build_store(
            pages or dataset.corpus_path, db, policy, progress=progress, source=str(dataset.corpus_path)
        )

    path = build_artifact(
        cache_dir, "store", _store_settings(skip_bad_lines), fingerprint, build, force=force
    )
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
        self.fingerprint = ""  # the corpus's (edits applied), once built

    def build(self, force: bool = False) -> dict[str, Path]:
        """Build or reuse the store and every configured retriever; return artifact dirs by name."""
        cache_dir = Path(self.config.paths.cache_dir)
        skip = self.config.data.skip_bad_lines
        parent = _find_parent(self.dataset, cache_dir, skip) if self.dataset.edits and not force else None
        self.store, fingerprint, store_dir = build_sentence_store(
            self.dataset, cache_dir, skip, self.progress, force, parent
        )
        self.fingerprint = fingerprint
        self.artifacts = {"store": store_dir}
        ctx = IndexContext(self.store, cache_dir, fingerprint, self.progress, self.engine)
        if parent is not None:
            delta = CorpusDelta.from_pages(parent.store.page_sizes(), parent.plan.drop)
            parent_ctx = IndexContext(parent.store, cache_dir, parent.fingerprint, self.progress, self.engine)
            ctx = dataclasses.replace(ctx, parent=parent_ctx, delta=delta)
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
