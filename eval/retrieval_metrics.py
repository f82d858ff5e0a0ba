"""Retrieval metrics over gold evidence sets: recall@k, hit rate, page recall.

A claim is *fully supported* by a set of retrieved sentences when at least one
of its gold evidence sets lies wholly inside it (Anserini's "fully
supported@k"; FEVER's strict criterion without the label).  Half of a
two-sentence set counts 0.  All averages of this kind are taken over
verifiable claims only: claims without gold evidence sets (NEI) are left out
of the denominator.  They still count for the averages of retrieved sentences
and pages, which describe the retriever's output, not its quality.

All functions are pure: claims and per-claim lists of ``SentenceId`` in,
numbers out, paired by position.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from garag.types import Claim, SentenceId


def _check_pairing(claims: Sequence[Claim], retrieved: Sequence[Iterable[SentenceId]]) -> None:
    if len(claims) != len(retrieved):
        raise ValueError(f"{len(claims)} claims but {len(retrieved)} retrieved lists")


def _as_ids(items: Iterable[SentenceId], index: int) -> list[SentenceId]:
    if isinstance(items, (str, bytes)):
        raise ValueError(f"retrieved list {index} is a string, expected SentenceId objects")
    ids = list(items)
    for item in ids:
        if not isinstance(item, SentenceId):
            raise ValueError(f"retrieved list {index} holds {item!r}, expected SentenceId objects")
    return ids


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")


def fully_supported(claim: Claim, retrieved: Iterable[SentenceId]) -> bool:
    """True when one of the claim's gold evidence sets lies wholly in ``retrieved``.

    A claim without evidence sets is never fully supported.
    """
    found = set(retrieved)
    return any(len(group) > 0 and set(group) <= found for group in claim.evidence)


def _verifiable_mean(claims: Sequence[Claim], values: Iterable[float]) -> float | None:
    chosen = [v for c, v in zip(claims, values, strict=True) if c.verifiable]
    return sum(chosen) / len(chosen) if chosen else None


def _require(value: float | None, what: str) -> float:
    if value is None:
        raise ValueError(f"{what} is undefined: no claim has gold evidence")
    return value


def _recall_at_k(claims: Sequence[Claim], ranked: Sequence[Sequence[SentenceId]], k: int) -> float | None:
    _check_k(k)
    _check_pairing(claims, ranked)
    lists = [_as_ids(r, i) for i, r in enumerate(ranked)]
    return _verifiable_mean(
        claims, (float(fully_supported(c, r[:k])) for c, r in zip(claims, lists, strict=True))
    )


def recall_at_k(claims: Sequence[Claim], ranked: Sequence[Sequence[SentenceId]], k: int) -> float:
    """Share of verifiable claims fully supported by their top ``k`` retrieved sentences.

    Args:
        claims: gold claims; those without evidence sets are excluded.
        ranked: per claim, retrieved sentence ids best first.
        k: cut-off (>= 1).

    Raises:
        ValueError: bad ``k``, lengths differ, non-``SentenceId`` items, or no verifiable claim.
    """
    return _require(_recall_at_k(claims, ranked, k), "recall@k")


def _hit_rate(claims: Sequence[Claim], retrieved: Sequence[Iterable[SentenceId]]) -> float | None:
    _check_pairing(claims, retrieved)
    sets = [_as_ids(r, i) for i, r in enumerate(retrieved)]
    return _verifiable_mean(claims, (float(fully_supported(c, r)) for c, r in zip(claims, sets, strict=True)))


def hit_rate(claims: Sequence[Claim], retrieved: Sequence[Iterable[SentenceId]]) -> float:
    """GRAAL's hit rate: recall of whole gold sets within an unranked retrieved set of any size.

    Raises:
        ValueError: lengths differ, non-``SentenceId`` items, or no verifiable claim.
    """
    return _require(_hit_rate(claims, retrieved), "hit rate")


def avg_retrieved_sentences(retrieved: Sequence[Iterable[SentenceId]]) -> float:
    """Mean number of distinct sentences retrieved per claim (0.0 for no claims)."""
    counts = [len(set(_as_ids(r, i))) for i, r in enumerate(retrieved)]
    return sum(counts) / len(counts) if counts else 0.0


def avg_retrieved_pages(retrieved: Sequence[Iterable[SentenceId]]) -> float:
    """Mean number of distinct pages among the sentences retrieved per claim (0.0 for no claims)."""
    counts = [len({s.page for s in _as_ids(r, i)}) for i, r in enumerate(retrieved)]
    return sum(counts) / len(counts) if counts else 0.0


def _claim_page_recall(claim: Claim, retrieved: Iterable[SentenceId]) -> float:
    pages = {s.page for s in retrieved}
    return max(
        (
            len({s.page for s in group} & pages) / len({s.page for s in group})
            for group in claim.evidence
            if group
        ),
        default=0.0,
    )


def _page_recall(claims: Sequence[Claim], retrieved: Sequence[Iterable[SentenceId]]) -> float | None:
    _check_pairing(claims, retrieved)
    sets = [_as_ids(r, i) for i, r in enumerate(retrieved)]
    return _verifiable_mean(claims, (_claim_page_recall(c, r) for c, r in zip(claims, sets, strict=True)))


def page_recall(claims: Sequence[Claim], retrieved: Sequence[Iterable[SentenceId]]) -> float:
    """Mean share of a gold set's pages found among the retrieved sentences' pages.

    Per claim the best gold set counts (any one set suffices, as for recall);
    averaged over verifiable claims.  Useful for multi-hop data: a retriever
    may reach the right pages while missing the exact sentences.

    Raises:
        ValueError: lengths differ, non-``SentenceId`` items, or no verifiable claim.
    """
    return _require(_page_recall(claims, retrieved), "page recall")


@dataclass(frozen=True)
class RetrievalReport:
    """Retrieval quality of one set of claims.

    Metrics over verifiable claims are None when the set has none.

    Attributes:
        n_claims: number of claims.
        n_verifiable: claims with at least one gold evidence set (the recall denominator).
        recall_at_k: ``(k, recall@k)`` pairs in increasing ``k``.
        hit_rate: whole-set recall over the full retrieved lists.
        page_recall: mean share of a gold set's pages retrieved.
        avg_sentences: mean distinct sentences retrieved per claim.
        avg_pages: mean distinct pages retrieved per claim.
    """

    n_claims: int
    n_verifiable: int
    recall_at_k: tuple[tuple[int, float | None], ...]
    hit_rate: float | None
    page_recall: float | None
    avg_sentences: float
    avg_pages: float

    def recall(self, k: int) -> float | None:
        """recall@k for a ``k`` the report was built with."""
        for kk, value in self.recall_at_k:
            if kk == k:
                return value
        raise ValueError(f"recall@{k} not in this report (ks: {[kk for kk, _ in self.recall_at_k]})")

    def to_dict(self) -> dict:
        return {
            "n_claims": self.n_claims,
            "n_verifiable": self.n_verifiable,
            **{f"recall@{k}": v for k, v in self.recall_at_k},
            "hit_rate": self.hit_rate,
            "page_recall": self.page_recall,
            "avg_sentences": self.avg_sentences,
            "avg_pages": self.avg_pages,
        }


@dataclass(frozen=True)
class RetrievalBreakdown:
    """An overall report and one report per group (e.g. per HoVer ``num_hops``).

    Attributes:
        overall: report over all claims.
        groups: ``(key, report)`` pairs, sorted by key when keys are comparable.
    """

    overall: RetrievalReport
    groups: tuple[tuple[Hashable, RetrievalReport], ...]

    def group(self, key: Hashable) -> RetrievalReport:
        for kk, report in self.groups:
            if kk == key:
                return report
        raise ValueError(f"no group {key!r} (groups: {[kk for kk, _ in self.groups]})")


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if len(ks) == 0:
        raise ValueError("ks must not be empty")
    for k in ks:
        _check_k(k)
    return tuple(sorted(set(ks)))


def retrieval_report(
    claims: Sequence[Claim], ranked: Sequence[Sequence[SentenceId]], ks: Sequence[int]
) -> RetrievalReport:
    """Recall@k for each of ``ks``, hit rate, page recall and output size for one set of claims.

    Args:
        claims: gold claims.
        ranked: per claim, retrieved sentence ids best first (hit rate uses the whole list).
        ks: cut-offs, each >= 1.

    Raises:
        ValueError: bad ``ks``, lengths differ, or non-``SentenceId`` items.
    """
    ks = _check_ks(ks)
    _check_pairing(claims, ranked)
    lists = [_as_ids(r, i) for i, r in enumerate(ranked)]
    return RetrievalReport(
        n_claims=len(claims),
        n_verifiable=sum(1 for c in claims if c.verifiable),
        recall_at_k=tuple((k, _recall_at_k(claims, lists, k)) for k in ks),
        hit_rate=_hit_rate(claims, lists),
        page_recall=_page_recall(claims, lists),
        avg_sentences=avg_retrieved_sentences(lists),
        avg_pages=avg_retrieved_pages(lists),
    )


def by_num_hops(claim: Claim) -> Hashable:
    """Grouping key: the claim's ``num_hops`` (None for single-hop datasets)."""
    return claim.num_hops


def retrieval_breakdown(
    claims: Sequence[Claim],
    ranked: Sequence[Sequence[SentenceId]],
    ks: Sequence[int],
    key: Callable[[Claim], Hashable] = by_num_hops,
) -> RetrievalBreakdown:
    """``retrieval_report`` over all claims and over each group of claims sharing ``key(claim)``.

    Raises:
        ValueError: as ``retrieval_report``.
    """
    _check_pairing(claims, ranked)
    lists = [_as_ids(r, i) for i, r in enumerate(ranked)]
    overall = retrieval_report(claims, lists, ks)
    grouped: dict[Hashable, tuple[list[Claim], list[Sequence[SentenceId]]]] = {}
    for claim, r in zip(claims, lists, strict=True):
        bucket = grouped.setdefault(key(claim), ([], []))
        bucket[0].append(claim)
        bucket[1].append(r)
    keys = list(grouped)
    try:
        keys.sort(key=lambda k: (k is None, k))  # None (no group) last
    except TypeError:
        keys.sort(key=repr)  # mixed types (e.g. None and ints): a stable, readable order
    return RetrievalBreakdown(
        overall=overall,
        groups=tuple((k, retrieval_report(grouped[k][0], grouped[k][1], ks)) for k in keys),
    )
