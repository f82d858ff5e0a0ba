"""Slices, attribution, explanation checks and cost on small hand-made records."""

from __future__ import annotations

import pytest

from eval.report import llm_counts
from eval.slices import (
    attribute_gold,
    cited_ids,
    cost_summary,
    evidence_shape,
    explanation_checks,
    hit_rate_curve,
    only_one_right,
    slice_keys,
    slice_table,
    solved_only_by,
)
from garag.types import Claim, SentenceId

A0, A1, B0 = SentenceId("A", 0), SentenceId("A", 1), SentenceId("B", 0)

ONE = Claim(1, "one sentence", "SUPPORTS", ((A0,), (A1, B0)))
TWO_PAGES = Claim(2, "two pages", "REFUTES", ((A1, B0),))
TWO_LINES = Claim(3, "two lines", "SUPPORTS", ((A0, A1),), num_hops=2)
NEI = Claim(4, "nothing", "NOT ENOUGH INFO", ())


def _rec(claim: Claim, per: dict, **kw) -> dict:
    return {"id": claim.id, "per_retriever": {k: [s.to_json() for s in v] for k, v in per.items()}, **kw}


def test_evidence_shape_takes_the_smallest_set():
    assert evidence_shape(ONE) == ("one", "one")  # {A0} suffices even though {A1, B0} spans two pages
    assert evidence_shape(TWO_PAGES) == ("several", "several")
    assert evidence_shape(TWO_LINES) == ("several", "one")
    assert evidence_shape(NEI) == ("none", "none")
    assert slice_keys(TWO_LINES) == [
        "evidence in several sentences", "evidence on one page", "label SUPPORTS", "2 hops",
    ]  # fmt: skip
    assert slice_keys(NEI) == ["label NOT ENOUGH INFO"]


def test_slice_table_averages_within_each_slice():
    claims = [ONE, TWO_PAGES, TWO_LINES, NEI]
    correct = {"a": [1, 0, 1, 1], "b": [1, 1, 0, 1]}
    strict = {"a": [1, 0, 0, 1], "b": [0, 1, 0, 1]}
    rows = {r["slice"]: r for r in slice_table(claims, correct, strict)}
    several = rows["evidence in several sentences"]  # claims 2 and 3
    assert several["n"] == 2
    assert several["systems"]["a"] == {"accuracy": 0.5, "fever_score": 0.0}
    assert several["systems"]["b"] == {"accuracy": 0.5, "fever_score": 0.5}
    assert rows["label SUPPORTS"]["n"] == 2 and rows["label SUPPORTS"]["systems"]["a"]["accuracy"] == 1.0
    with pytest.raises(ValueError, match="one value per claim"):
        slice_table(claims, {"a": [1]}, {"a": [1]})


def test_only_one_right():
    assert only_one_right([1, 2, 3, 4], [1, 0, 1, 0], [1, 1, 0, 0]) == {"only_a": [3], "only_b": [2]}


def test_attribution_counts_each_gold_sentence_once_per_claim():
    recs = [
        _rec(ONE, {"bm25": [A0, A1], "graal": [B0, A1], "graal@sub question": [A0]}),
        _rec(TWO_PAGES, {"bm25": [A1], "graal": [B0]}),
    ]
    out = attribute_gold([ONE, TWO_PAGES], recs)
    # claim 1: A0 -> bm25+graal (graal via its subquestion list), A1 -> bm25+graal, B0 -> graal
    # claim 2: A1 -> bm25, B0 -> graal
    assert out["sentences"] == 5
    assert out["found_by"] == {"bm25": 3, "graal": 4}
    assert out["only_by"] == {"graal": 2, "bm25": 1}
    assert out["combinations"] == {"bm25+graal": 2, "graal": 2, "bm25": 1}
    # claim 2's set {A1, B0} needs both retrievers; claim 1's {A0} bm25 alone finds
    assert solved_only_by([ONE, TWO_PAGES], recs) == []
    recs2 = [_rec(TWO_PAGES, {"bm25": [A0], "graal": [A1, B0]})]
    assert solved_only_by([TWO_PAGES], recs2) == [2]
    with pytest.raises(ValueError, match="has id"):
        attribute_gold([ONE], [recs[1]])


def test_hit_rate_curve_per_retriever():
    recs = [
        _rec(ONE, {"bm25": [A1, A0]}, retrieved=[A0.to_json(), A1.to_json()]),
        _rec(TWO_PAGES, {"bm25": [B0, A0]}, retrieved=[A1.to_json(), B0.to_json()]),
        _rec(NEI, {"bm25": [A0]}, retrieved=[A0.to_json()]),
    ]
    curves = hit_rate_curve([ONE, TWO_PAGES, NEI], recs, cutoffs=(1, 2))
    # fused at k=1: claim 1 has A0 (hit), claim 2 has only A1 (miss) -> 0.5; k=2 both hit -> 1.0
    assert [p["hit_rate"] for p in curves["fused"]] == [0.5, 1.0]
    # bm25 at k=1: A1 (miss), B0 (miss) -> 0; k=2: claim 1 hit, claim 2 {B0, A0} misses A1 -> 0.5
    assert [p["hit_rate"] for p in curves["bm25"]] == [0.0, 0.5]
    # sentences per claim include the NEI claim: k=2 -> (2 + 2 + 1) / 3
    assert curves["bm25"][1]["avg_sentences"] == pytest.approx(5 / 3)


def test_cited_ids_parse_the_explanation_format():
    text = (
        'SUPPORTS (p=0.91): "x" (The_Beatles, 0) entails; top-ranked: (Titanic (1997 film), 12); '
        "(A, 3); (A, 3)."
    )
    assert cited_ids(text) == [
        SentenceId("The_Beatles", 0), SentenceId("Titanic (1997 film)", 12), SentenceId("A", 3),
    ]  # fmt: skip
    assert cited_ids("NOT ENOUGH INFO: no evidence sentences were retrieved for the claim.") == []
    quoted = 'SUPPORTS (p=0.39): top-ranked: "Carlos Santana (born July 20, 1947) is..." (Carlos_Santana, 0).'
    assert cited_ids(quoted) == [SentenceId("Carlos_Santana", 0)]


def test_explanation_checks():
    recs = [
        {"id": 1, "explanation": "(A, 0) entails", "retrieved": [["A", 0]], "evidence_read": []},
        {"id": 2, "explanation": "(A, 1); (Z, 9)", "retrieved": [["A", 1]], "evidence_read": [["Z", 9]]},
        {"id": 3, "explanation": "(A, 7)", "retrieved": [], "evidence_read": []},
        {"id": 4, "explanation": "no citation", "retrieved": [], "evidence_read": []},
    ]
    corpus = {A0, A1, SentenceId("A", 7)}
    out = explanation_checks(recs, corpus.__contains__, judge=lambda r, ids: r["id"] != 2)
    # with citations: 1, 2, 3. exist: 1 and 3 (Z,9 is not in the corpus); retrieved: 1 and 2.
    assert out == {
        "n": 4, "with_citations": 3, "cited_exist": 2 / 3, "cited_retrieved": 2 / 3, "grounded": 1 / 3,
        "faithful": 2 / 3,
    }  # fmt: skip
    assert explanation_checks(recs[3:], corpus.__contains__)["cited_exist"] is None


def test_cost_summary():
    recs = [
        {"seconds": {"retrieval": 0.1, "verification": 0.3}, "llm": {"calls": 2, "prompt_tokens": 100}},
        {"seconds": {"retrieval": 0.3, "verification": 0.1}},
        {"seconds": {"retrieval": 0.2, "verification": 0.2}, "llm": {"calls": 4, "prompt_tokens": 300}},
    ]
    out = cost_summary(recs)
    assert out["stages"]["retrieval"]["mean"] == pytest.approx(0.2)
    assert out["stages"]["retrieval"]["median"] == pytest.approx(0.2)
    assert out["stages"]["retrieval"]["p95"] == pytest.approx(0.29)  # 0.2 + 0.9 * (0.3 - 0.2)
    assert out["total"]["mean"] == pytest.approx(0.4)
    assert out["claims_per_second"] == pytest.approx(3 / 1.2)
    # claim 2 made no LLM call: calls (2 + 0 + 4) / 3, prompt tokens (100 + 0 + 300) / 3
    assert out["llm_per_claim"] == pytest.approx(
        {"calls": 2.0, "prompt_tokens": 400 / 3, "completion_tokens": 0.0}
    )
    assert cost_summary(recs[1:2])["llm_per_claim"] is None
    assert cost_summary(recs[1:2])["llm_cache_hit_rate"] is None
    assert cost_summary(recs, wall_seconds=2.0)["claims_per_second"] == 1.5
    with pytest.raises(ValueError):
        cost_summary([])


def test_cost_summary_llm_totals_and_cache_hit_rate():
    # per-claim counters are batch means (a batch of 2 claims made 3 calls and hit the cache once)
    recs = [
        {"seconds": {"verification": 5.0}, "llm": {"calls": 1.5, "cache_hits": 0.5, "timeouts": 0.5}},
        {"seconds": {"verification": 5.0}, "llm": {"calls": 1.5, "cache_hits": 0.5, "timeouts": 0.5}},
        {"seconds": {"verification": 0.1}, "llm": {"cache_hits": 1, "verifier_fallbacks": 1}},
    ]
    out = cost_summary(recs)
    totals = out["llm_totals"]
    assert (totals["calls"], totals["cache_hits"], totals["timeouts"]) == (3, 2, 1)
    assert totals["verifier_fallbacks"] == 1 and totals["invalid_citations"] == 0
    # 2 of the 5 replies came from the cache
    assert out["llm_cache_hit_rate"] == pytest.approx(2 / 5)
    line = llm_counts(out)
    assert line.startswith("cache hits 2/5 (40%)")
    assert "timeouts 1" in line and "verifier fallbacks 1" in line
