"""Reciprocal rank fusion of ranked hit lists (pure; no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from garag.types import Hit, SentenceId


def rrf_fuse(
    ranked: Mapping[str, Sequence[Hit]],
    k: int,
    rrf_k: float = 60.0,
    weights: Mapping[str, float] | None = None,
    name: str = "fused",
) -> list[Hit]:
    """Fuse ranked lists by weighted reciprocal rank fusion (Cormack et al. 2009).

    ``score(d) = sum_r w_r / (rrf_k + rank_r(d))`` with ranks from 1; a sentence
    listed twice by one list counts once, at its best rank.

    Args:
        ranked: list name -> hits, best first.  The name's part before ``@``
            selects the weight, so ``"bm25@subquestion-1"`` weighs as ``"bm25"``.
        k: number of fused hits to return.
        rrf_k: the RRF constant.
        weights: per-retriever weights (missing names weigh 1.0).
        name: the ``retriever`` field of the fused hits.

    Returns:
        Fused hits, best first; ties broken by sentence id for a stable order.
        Each hit's ``sources`` lists the retrievers that found it.
    """
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    weights = weights or {}
    scores: dict[SentenceId, float] = {}
    sources: dict[SentenceId, list[str]] = {}
    for list_name, hits in ranked.items():
        retriever = list_name.split("@", 1)[0]
        w = weights.get(retriever, 1.0)
        seen: set[SentenceId] = set()
        for rank, hit in enumerate(hits, start=1):
            sid = hit.sentence
            if sid in seen:
                continue
            seen.add(sid)
            scores[sid] = scores.get(sid, 0.0) + w / (rrf_k + rank)
            found_by = sources.setdefault(sid, [])
            for src in hit.sources or (hit.retriever,):
                if src not in found_by:
                    found_by.append(src)
    order = sorted(scores, key=lambda s: (-scores[s], s.page, s.line))
    return [Hit(sentence=s, score=scores[s], retriever=name, sources=tuple(sources[s])) for s in order[:k]]
