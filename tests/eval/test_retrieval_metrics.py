"""Tests for eval.retrieval_metrics: small hand-computed cases, one claim set each."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.retrieval_metrics import (
    RetrievalReport,
    avg_retrieved_pages,
    avg_retrieved_sentences,
    fully_supported,
    hit_rate,
    page_recall,
    recall_at_k,
    retrieval_breakdown,
    retrieval_report,
)
from garag.claims import read_fever_claims
from garag.types import Claim, SentenceId

A0, A1, B0, B1, C0, X0, X1 = (
    SentenceId("A", 0),
    SentenceId("A", 1),
    SentenceId("B", 0),
    SentenceId("B", 1),
    SentenceId("C", 0),
    SentenceId("X", 0),
    SentenceId("X", 1),
)


def _claim(
    cid: int, *sets: tuple[SentenceId, ...], label: str = "SUPPORTS", hops: int | None = None
) -> Claim:
    return Claim(id=cid, text=f"claim {cid}", label=label, evidence=tuple(sets), num_hops=hops)


NEI = _claim(9, label="NOT ENOUGH INFO")


def test_two_sentence_set_half_retrieved_counts_zero() -> None:
    claims = [_claim(1, (A0, B0))]
    assert recall_at_k(claims, [[A0, X0, X1]], k=3) == 0.0
    assert hit_rate(claims, [{A0, X0}]) == 0.0
    assert recall_at_k(claims, [[A0, X0, B0]], k=3) == 1.0


def test_any_one_complete_set_counts_one() -> None:
    claims = [_claim(1, (A0, B0), (C0,))]
    assert recall_at_k(claims, [[X0, C0]], k=2) == 1.0
    assert fully_supported(claims[0], [B0, X0, A0])
    assert not fully_supported(claims[0], [A0, X0])


def test_nei_claims_are_excluded_from_the_denominator() -> None:
    claims = [_claim(1, (A0,)), NEI, _claim(2, (B0,))]
    ranked = [[A0], [A0, B0], [X0]]
    assert recall_at_k(claims, ranked, k=1) == 0.5  # 1 of 2 verifiable, not 1 of 3
    assert hit_rate(claims, ranked) == 0.5


def test_k_cutoff_is_respected() -> None:
    claims = [_claim(1, (A0,)), _claim(2, (A1, B1))]
    ranked = [[X0, X1, A0], [A1, X0, B1]]
    assert recall_at_k(claims, ranked, k=1) == 0.0
    assert recall_at_k(claims, ranked, k=2) == 0.0
    assert recall_at_k(claims, ranked, k=3) == 1.0
    assert recall_at_k(claims, ranked, k=100) == 1.0  # shorter lists are used whole


def test_order_within_top_k_does_not_matter() -> None:
    claims = [_claim(1, (A0, B0))]
    assert recall_at_k(claims, [[B0, A0]], k=2) == recall_at_k(claims, [[A0, B0]], k=2) == 1.0


def test_hit_rate_uses_whole_unranked_sets() -> None:
    claims = [_claim(1, (A0, B0)), _claim(2, (C0,)), _claim(3, (X1,))]
    retrieved = [{X0, X1, A0, B0, C0}, frozenset({B0}), (X1,)]
    assert hit_rate(claims, retrieved) == pytest.approx(2 / 3)


def test_average_sentences_and_pages_count_distinct_and_include_nei() -> None:
    retrieved = [[A0, A1, A0], [B0, C0], []]
    assert avg_retrieved_sentences(retrieved) == pytest.approx((2 + 2 + 0) / 3)
    assert avg_retrieved_pages(retrieved) == pytest.approx((1 + 2 + 0) / 3)
    assert avg_retrieved_sentences([]) == 0.0


def test_page_recall_takes_the_best_set() -> None:
    claims = [_claim(1, (A0, B0, C0), (X0,)), _claim(2, (A0, B0)), NEI]
    retrieved = [[A1, B1], [A1], [A0]]  # right pages, wrong sentences
    # claim 1: set 1 has 2/3 of its pages, set 2 has 0; claim 2: 1/2.  NEI excluded.
    assert page_recall(claims, retrieved) == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert recall_at_k(claims, retrieved, k=5) == 0.0


def test_report_hand_computed() -> None:
    claims = [_claim(1, (A0,)), _claim(2, (A1, B1)), NEI, _claim(3, (C0,))]
    ranked = [[A0, X0], [X0, A1, B1], [X1], [X0, X1, B0]]
    report = retrieval_report(claims, ranked, ks=[2, 1, 3])
    assert report == RetrievalReport(
        n_claims=4,
        n_verifiable=3,
        recall_at_k=((1, 1 / 3), (2, 1 / 3), (3, 2 / 3)),
        hit_rate=2 / 3,
        page_recall=2 / 3,
        avg_sentences=(2 + 3 + 1 + 3) / 4,
        avg_pages=(2 + 3 + 1 + 2) / 4,
    )
    assert report.recall(3) == pytest.approx(2 / 3)
    assert report.to_dict()["recall@2"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="recall@5 not in this report"):
        report.recall(5)


def test_breakdown_by_num_hops() -> None:
    claims = [
        _claim(1, (A0, B0), hops=2),
        _claim(2, (A1, B1), hops=2),
        _claim(3, (A0, B0, C0), hops=3),
    ]
    ranked = [[A0, B0], [A1, X0, B1], [C0, B0, A0]]
    result = retrieval_breakdown(claims, ranked, ks=[2, 3])
    assert result.overall.recall_at_k == ((2, 1 / 3), (3, 1.0))
    assert [key for key, _ in result.groups] == [2, 3]
    two, three = result.group(2), result.group(3)
    assert (two.n_claims, two.recall_at_k) == (2, ((2, 0.5), (3, 1.0)))
    assert (three.n_claims, three.recall_at_k) == (1, ((2, 0.0), (3, 1.0)))


def test_breakdown_custom_key_with_group_without_evidence() -> None:
    claims = [_claim(1, (A0,)), NEI, _claim(2, (B0,), label="REFUTES")]
    ranked = [[A0], [B0], [X0]]
    result = retrieval_breakdown(claims, ranked, ks=[1], key=lambda c: c.label)
    assert [key for key, _ in result.groups] == ["NOT ENOUGH INFO", "REFUTES", "SUPPORTS"]
    nei = result.group("NOT ENOUGH INFO")
    assert (nei.n_claims, nei.n_verifiable, nei.recall_at_k, nei.hit_rate) == (1, 0, ((1, None),), None)
    assert result.group("SUPPORTS").hit_rate == 1.0
    assert result.group("REFUTES").hit_rate == 0.0


def test_breakdown_none_key_sorts_last() -> None:
    claims = [_claim(1, (A0,)), _claim(2, (B0,), hops=3), _claim(3, (C0,), hops=2)]
    result = retrieval_breakdown(claims, [[A0], [B0], [C0]], ks=[1])
    assert [key for key, _ in result.groups] == [2, 3, None]


def test_tiny_fixture_claims(tiny_claims: Path) -> None:
    claims = list(read_fever_claims(tiny_claims))  # ids 1..6; 2 needs two pages; 5 is NEI
    ranked = [
        [SentenceId("The_Beatles", 0)],
        [SentenceId("The_Beatles", 0), SentenceId("Sandra_Bullock", 0), SentenceId("Liverpool", 0)],
        [SentenceId("Sandra_Bullock", 2)],
        [SentenceId("Snowpiercer", 1)],
        [SentenceId("Paul_McCartney", 0)],
        [SentenceId("John_Lennon", 0)],
    ]
    assert recall_at_k(claims, ranked, k=2) == pytest.approx(3 / 5)  # claims 1, 3, 6
    assert recall_at_k(claims, ranked, k=3) == pytest.approx(4 / 5)  # + claim 2
    assert page_recall(claims, ranked) == pytest.approx(5 / 5)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_raises(k: object) -> None:
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        recall_at_k([_claim(1, (A0,))], [[A0]], k=k)  # type: ignore[arg-type]


def test_input_errors() -> None:
    claims = [_claim(1, (A0,))]
    with pytest.raises(ValueError, match="1 claims but 2 retrieved lists"):
        recall_at_k(claims, [[A0], [A0]], k=1)
    with pytest.raises(ValueError, match=r"retrieved list 0 holds \('A', 0\)"):
        hit_rate(claims, [[("A", 0)]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="retrieved list 0 is a string"):
        hit_rate(claims, ["A"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no claim has gold evidence"):
        recall_at_k([NEI], [[A0]], k=1)
    with pytest.raises(ValueError, match="ks must not be empty"):
        retrieval_report(claims, [[A0]], ks=[])
