"""Tests for eval.fever_score: parity with the official FEVER scorer, its own edge cases, label metrics.

The edge-case tests are ported from sheffieldnlp/fever-scorer's tests/test_scorer_*.py,
test_evidence_format.py and test_max_evidence.py, one small dict each.  Where the
official code raises AssertionError, this implementation raises ValueError.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from eval.fever_score import (
    ClassScores,
    FeverPrediction,
    FeverScores,
    check_predicted_evidence_format,
    claim_to_actual,
    confusion_matrix,
    evidence_macro_precision,
    evidence_macro_recall,
    fever_score,
    hover_evidence_found,
    is_correct_label,
    is_strictly_correct,
    macro_f1,
    per_class_scores,
    score_claims,
)
from garag.claims import read_fever_claims
from garag.types import Claim, Label, SentenceId

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "data" / "fever" / "fixtures"

# What the official scorer prints for the fixture pair (max_evidence=5).
OFFICIAL = (0.29, 0.505, 0.10364963503649624, 0.4233576642335766, 0.16652849950462004)


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="module")
def sample() -> tuple[list[dict], list[dict]]:
    return (
        _read_jsonl(FIXTURES / "scorer_predictions_sample.jsonl"),
        _read_jsonl(FIXTURES / "scorer_actual_sample.jsonl"),
    )


def _claim_from_actual(i: int, actual: dict) -> Claim:
    # The gold ids are redacted to 0, so the file cannot go through read_fever_claims (repeated ids).
    groups = tuple(
        tuple(SentenceId(e[2], e[3]) for e in group if e[2] is not None and e[3] is not None)
        for group in actual["evidence"]
    )
    return Claim(id=i, text=actual["claim"], label=actual["label"], evidence=tuple(g for g in groups if g))


# --- parity on the fixture pair


def test_parity_with_official_scorer_on_fixture(sample: tuple[list[dict], list[dict]]) -> None:
    predictions, actual = sample
    assert len(predictions) == len(actual) == 200
    got = fever_score(predictions, actual)
    assert got == pytest.approx(OFFICIAL, abs=1e-9)


def test_fixture_inputs_are_not_mutated(sample: tuple[list[dict], list[dict]]) -> None:
    predictions, actual = sample
    before = copy.deepcopy((predictions, actual))
    fever_score(predictions, actual, max_evidence=1)
    assert (predictions, actual) == before


def test_typed_api_matches_official_on_fixture(sample: tuple[list[dict], list[dict]]) -> None:
    predictions, actual = sample
    claims = [_claim_from_actual(i, a) for i, a in enumerate(actual)]
    preds = [
        FeverPrediction(
            p["predicted_label"], tuple(SentenceId(page, line) for page, line in p["predicted_evidence"])
        )
        for p in predictions
    ]
    scores = score_claims(claims, preds)
    assert isinstance(scores, FeverScores)
    assert scores.n == 200
    got = (scores.strict, scores.accuracy, scores.precision, scores.recall, scores.f1)
    assert got == pytest.approx(OFFICIAL, abs=1e-9)


def test_max_evidence_changes_fixture_scores(sample: tuple[list[dict], list[dict]]) -> None:
    predictions, actual = sample
    strict1, acc1, _, rec1, _ = fever_score(predictions, actual, max_evidence=1)
    strict5, acc5, _, rec5, _ = fever_score(predictions, actual, max_evidence=5)
    assert acc1 == acc5 == 0.505  # labels do not depend on the evidence cut-off
    assert strict1 < strict5 and rec1 < rec5


def test_oracle_predictions_score_one(sample: tuple[list[dict], list[dict]]) -> None:
    _, actual = sample
    oracle = []
    for a in actual:
        if a["label"] == "NOT ENOUGH INFO":
            evidence = []
        else:
            smallest = min(a["evidence"], key=len)
            evidence = [[e[2], e[3]] for e in smallest]
        oracle.append({"predicted_label": a["label"], "predicted_evidence": evidence})
    assert fever_score(oracle, actual) == (1.0, 1.0, 1.0, 1.0, 1.0)


# --- official tests: is_correct_label


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ({"label": "not enough info", "predicted_label": "not enough info"}, True),
        ({"label": "not enough info", "predicted_label": "NOT ENOUGH INFO"}, True),
        ({"label": "NOT ENOUGH INFO", "predicted_label": "not enough info"}, True),
        ({"label": "supports", "predicted_label": "not enough info"}, False),
    ],
)
def test_is_correct_label(instance: dict, expected: bool) -> None:
    assert is_correct_label(instance) is expected


# --- official tests: is_strictly_correct


def test_strict_nei_no_evidence() -> None:
    assert is_strictly_correct({"label": "not enough info", "predicted_label": "not enough info"})


def test_strict_supports_no_predicted_evidence_raises() -> None:
    instance = {"label": "supports", "predicted_label": "supports", "evidence": [[[None, None, "page", 0]]]}
    with pytest.raises(ValueError, match="predicted evidence must be provided"):
        is_strictly_correct(instance)


def test_strict_supports_evidence_subset() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page", 0], [None, None, "page", 1]]],
        "predicted_evidence": [["page", 0]],
    }
    assert not is_strictly_correct(instance)


def test_strict_supports_evidence_wrong_line() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page", 0]]],
        "predicted_evidence": [["page", 2]],
    }
    assert not is_strictly_correct(instance)


def test_strict_supports_evidence_wrong_page() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page", 0]]],
        "predicted_evidence": [["page1", 0]],
    }
    assert not is_strictly_correct(instance)


def test_strict_supports_evidence_correct_single() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page", 0]]],
        "predicted_evidence": [["page", 0]],
    }
    assert is_strictly_correct(instance)


def test_strict_supports_evidence_matches_1_group() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page", 0]], [[None, None, "page1", 0]]],
        "predicted_evidence": [["page", 0]],
    }
    assert is_strictly_correct(instance)


def test_strict_supports_evidence_matches_part_group() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page2", 0], [None, None, "page1", 1]], [[None, None, "page2", 0]]],
        "predicted_evidence": [["page2", 0]],
    }
    assert is_strictly_correct(instance)


def test_strict_supports_evidence_matches_disjoint() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page1", 1]], [[None, None, "page2", 0]]],
        "predicted_evidence": [["page1", 1], ["page2", 0]],
    }
    assert is_strictly_correct(instance)


def test_strict_supports_evidence_matches_superset() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "supports",
        "evidence": [[[None, None, "page1", 1], [None, None, "page2", 0]]],
        "predicted_evidence": [["page1", 1], ["page2", 0], ["page3", 2]],
    }
    assert is_strictly_correct(instance)


def test_strict_wrong_label_with_perfect_evidence() -> None:
    instance = {
        "label": "supports",
        "predicted_label": "refutes",
        "evidence": [[[None, None, "page", 0]]],
        "predicted_evidence": [["page", 0]],
    }
    assert not is_strictly_correct(instance)


# --- official tests: evidence format


def test_format_no_evidence_no_error() -> None:
    check_predicted_evidence_format({"predicted_evidence": []})


@pytest.mark.parametrize(
    "predicted",
    [
        ["line", "text"],  # list of strings
        [[["page", 0]]],  # list of lists of lists
        [[[0, 0]]],  # first element not a string
        [["page", "some text"]],  # second element not an int
        [("page", 0)],  # a tuple, not a list (the official check requires lists)
        [["page", True]],  # bool is not a line number (stricter than the official check)
    ],
)
def test_format_errors(predicted: list) -> None:
    with pytest.raises(ValueError, match=r"predicted_evidence item 0"):
        check_predicted_evidence_format({"predicted_evidence": predicted})


def test_bad_format_names_the_claim_index() -> None:
    predictions = [
        {"predicted_label": "SUPPORTS", "predicted_evidence": [["page", 0]]},
        {"predicted_label": "SUPPORTS", "predicted_evidence": [["page", 0], ["page", "1"]]},
    ]
    actual = [{"label": "SUPPORTS", "evidence": [[[None, None, "page", 0]]]}] * 2
    with pytest.raises(ValueError, match=r"prediction 1: predicted_evidence item 1"):
        fever_score(predictions, actual)


def test_bad_format_is_caught_even_when_label_is_wrong() -> None:
    # The official scorer only checks the format when the label is right; a tuple would silently score 0.
    predictions = [{"predicted_label": "REFUTES", "predicted_evidence": [("page", 0)]}]
    actual = [{"label": "SUPPORTS", "evidence": [[[None, None, "page", 0]]]}]
    with pytest.raises(ValueError, match=r"prediction 0"):
        fever_score(predictions, actual)


# --- official tests: fever_score


def _nei(predicted_label: str) -> dict:
    return {
        "label": "not enough info",
        "predicted_label": predicted_label,
        "evidence": [],
        "predicted_evidence": [],
    }


def test_fever_perfect_scorer() -> None:
    strict, acc, *_ = fever_score([_nei("not enough info"), _nei("not enough info")])
    assert (strict, acc) == (1.0, 1.0)


def test_fever_imperfect_scorer() -> None:
    strict, acc, *_ = fever_score([_nei("refutes"), _nei("supports")])
    assert (strict, acc) == (0.0, 0.0)


def test_fever_blind_no_data_raises() -> None:
    predictions = [{"predicted_label": "not enough info", "predicted_evidence": []}] * 2
    with pytest.raises(ValueError, match="actual data must be provided"):
        fever_score(predictions)


def test_fever_blind_diff_instances_raises() -> None:
    predictions = [{"predicted_label": "not enough info", "predicted_evidence": []}] * 2
    with pytest.raises(ValueError, match="length must match"):
        fever_score(predictions, [{}])


def test_fever_blind_no_evidence_nei_raises() -> None:
    predictions = [{"predicted_label": "not enough info", "predicted_evidence": []}] * 2
    actual = [{"label": "not enough info"}, {"label": "not enough info"}]
    with pytest.raises(ValueError, match=r"prediction 0: missing field 'evidence'"):
        fever_score(predictions, actual)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (("not enough info", "not enough info"), (1.0, 1.0)),  # perfect
        (("supports", "refutes"), (0.0, 0.0)),  # imperfect
        (("not enough info", "refutes"), (0.5, 0.5)),  # imperfect2
    ],
)
def test_fever_blind_nei(labels: tuple[str, str], expected: tuple[float, float]) -> None:
    predictions = [{"predicted_label": lab, "predicted_evidence": []} for lab in labels]
    actual = [{"label": "not enough info", "evidence": []}, {"label": "not enough info", "evidence": []}]
    strict, acc, *_ = fever_score(predictions, actual)
    assert (strict, acc) == expected


def test_fever_blind_imperfect3() -> None:
    predictions = [
        {"predicted_label": "refutes", "predicted_evidence": [["page3", 2]]},
        {"predicted_label": "refutes", "predicted_evidence": [["page1", 1], ["page2", 0], ["page3", 2]]},
    ]
    gold = {"label": "refutes", "evidence": [[[None, None, "page1", 1], [None, None, "page2", 0]]]}
    strict, acc, precision, recall, f1 = fever_score(predictions, [gold, gold])
    assert (strict, acc) == (0.5, 1.0)
    assert precision == pytest.approx((0 / 1 + 2 / 3) / 2)
    assert recall == 0.5
    assert f1 == pytest.approx(2 * precision * recall / (precision + recall))


# --- official tests: max_evidence

_TWO_GOLD = {
    "label": "supports",
    "predicted_label": "supports",
    "evidence": [[[None, None, "page", 0], [None, None, "page", 1]]],
    "predicted_evidence": [["page", 0], ["page", 1]],
}
_ONE_WRONG = {
    "label": "supports",
    "predicted_label": "supports",
    "evidence": [[[None, None, "page", 0], [None, None, "page", 2]]],
    "predicted_evidence": [["page", 0], ["page", 1]],
}


@pytest.mark.parametrize(("max_evidence", "expected"), [(1, 0.0), (2, 1.0)])
def test_recall_partial_predictions_same_group(max_evidence: int, expected: float) -> None:
    assert evidence_macro_recall(_TWO_GOLD, max_evidence=max_evidence)[0] == expected


@pytest.mark.parametrize(("max_evidence", "expected"), [(1, 1.0), (2, 0.5)])
def test_precision_partial_predictions_same_group(max_evidence: int, expected: float) -> None:
    assert evidence_macro_precision(_ONE_WRONG, max_evidence=max_evidence)[0] == expected


@pytest.mark.parametrize(("max_evidence", "expected"), [(2, 1.0), (1, 0.0)])
def test_strict_partial(max_evidence: int, expected: float) -> None:
    assert fever_score([_TWO_GOLD], max_evidence=max_evidence)[0] == expected


@pytest.mark.parametrize(("max_evidence", "expected"), [(2, 0.5), (1, 1.0)])
def test_global_precision_partial(max_evidence: int, expected: float) -> None:
    assert fever_score([_ONE_WRONG], max_evidence=max_evidence)[2] == expected


@pytest.mark.parametrize(("max_evidence", "expected"), [(2, 1.0), (1, 0.0)])
def test_global_recall_partial(max_evidence: int, expected: float) -> None:
    assert fever_score([_TWO_GOLD], max_evidence=max_evidence)[3] == expected


def test_max_evidence_none_uses_all_predictions() -> None:
    instance = {**_TWO_GOLD, "predicted_evidence": [["x", 0]] * 6 + [["page", 0], ["page", 1]]}
    assert fever_score([instance], max_evidence=5)[0] == 0.0
    assert fever_score([instance], max_evidence=None)[0] == 1.0


# --- macro precision / recall details


def test_precision_nei_gold_is_not_counted() -> None:
    instance = {
        "label": "NOT ENOUGH INFO",
        "predicted_label": "SUPPORTS",
        "evidence": [],
        "predicted_evidence": [],
    }
    assert evidence_macro_precision(instance) == (0.0, 0.0)
    assert evidence_macro_recall(instance) == (0.0, 0.0)


def test_precision_no_predicted_evidence_is_one() -> None:
    instance = {
        "label": "SUPPORTS",
        "predicted_label": "SUPPORTS",
        "evidence": [[[1, 1, "p", 0]]],
        "predicted_evidence": [],
    }
    assert evidence_macro_precision(instance) == (1.0, 1.0)
    assert evidence_macro_recall(instance) == (0.0, 1.0)


def test_precision_ignores_gold_pointers_without_line() -> None:
    instance = {
        "label": "SUPPORTS",
        "predicted_label": "SUPPORTS",
        "evidence": [[[1, None, "p", None]], [[1, 2, "p", 3]]],
        "predicted_evidence": [["p", 3], ["p", 4]],
    }
    assert evidence_macro_precision(instance) == (0.5, 1.0)


def test_precision_counts_duplicate_predictions() -> None:
    instance = {
        "label": "SUPPORTS",
        "predicted_label": "SUPPORTS",
        "evidence": [[[1, 1, "p", 0]]],
        "predicted_evidence": [["p", 0], ["p", 0], ["q", 0]],
    }
    assert evidence_macro_precision(instance)[0] == pytest.approx(2 / 3)


def test_recall_no_gold_evidence_is_one() -> None:
    instance = {
        "label": "SUPPORTS",
        "predicted_label": "REFUTES",
        "evidence": [],
        "predicted_evidence": [["p", 0]],
    }
    assert evidence_macro_recall(instance) == (1.0, 1.0)


def test_recall_key_iteration_quirk_has_no_effect() -> None:
    # Official: all([len(eg) == 0 for eg in instance]) iterates dict keys (never true).  A claim whose only
    # group is empty still gets recall 1, from the loop: an empty group is trivially wholly retrieved.
    instance = {
        "label": "SUPPORTS",
        "predicted_label": "SUPPORTS",
        "evidence": [[]],
        "predicted_evidence": [],
    }
    assert evidence_macro_recall(instance) == (1.0, 1.0)


def test_recall_needs_a_whole_group() -> None:
    instance = {
        "label": "REFUTES",
        "predicted_label": "REFUTES",
        "evidence": [[[1, 1, "a", 0], [1, 1, "b", 0]], [[1, 2, "c", 1], [1, 2, "d", 1]]],
        "predicted_evidence": [["a", 0], ["c", 1], ["d", 1]],
    }
    assert evidence_macro_recall(instance) == (1.0, 1.0)
    assert evidence_macro_recall({**instance, "predicted_evidence": [["a", 0], ["d", 1]]}) == (0.0, 1.0)


def test_all_nei_f1_is_zero_not_zero_division() -> None:
    # Precision defaults to 1.0 and recall to 0.0 with no non-NEI claim; the official code still divides
    # by pr + rec > 0 here, but raises ZeroDivisionError when both are 0 (below).
    assert fever_score([_nei("not enough info")]) == (1.0, 1.0, 1.0, 0.0, 0.0)
    wrong = {
        "label": "SUPPORTS",
        "predicted_label": "SUPPORTS",
        "evidence": [[[1, 1, "p", 0]]],
        "predicted_evidence": [["q", 0]],
    }
    assert fever_score([wrong]) == (0.0, 1.0, 0.0, 0.0, 0.0)


def test_empty_predictions_raise() -> None:
    with pytest.raises(ValueError, match="no predictions"):
        fever_score([])


def test_negative_max_evidence_raises() -> None:
    with pytest.raises(ValueError, match="max_evidence"):
        fever_score([_nei("not enough info")], max_evidence=-1)


def test_missing_predicted_label_names_index() -> None:
    with pytest.raises(ValueError, match=r"prediction 1: missing field 'predicted_label'"):
        fever_score([_nei("supports"), {"label": "supports", "evidence": [], "predicted_evidence": []}])


# --- typed API


def test_score_claims_on_tiny_fixture(tiny_claims: Path) -> None:
    claims = list(read_fever_claims(tiny_claims))
    by_id = {c.id: c for c in claims}
    preds = [
        FeverPrediction(Label.SUPPORTS, (SentenceId("The_Beatles", 0),)),  # 1: strict
        FeverPrediction("SUPPORTS", (SentenceId("The_Beatles", 0),)),  # 2: half of a 2-page set
        FeverPrediction("REFUTES", (SentenceId("Sandra_Bullock", 2), SentenceId("Sandra_Bullock", 9))),  # 3
        FeverPrediction("SUPPORTS", (SentenceId("Snowpiercer", 0),)),  # 4: wrong label, right evidence
        FeverPrediction(Label.NOT_ENOUGH_INFO, ()),  # 5: NEI right
        FeverPrediction("refutes", ()),  # 6: wrong label, no evidence
    ]
    assert [c.id for c in claims] == [1, 2, 3, 4, 5, 6]
    assert by_id[5].evidence == ()
    scores = score_claims(claims, preds)
    assert scores.n == 6
    assert scores.strict == pytest.approx(3 / 6)  # claims 1, 3, 5
    assert scores.accuracy == pytest.approx(4 / 6)  # claims 1, 2, 3, 5
    # Precision over the 5 non-NEI claims: 1, 1, 1/2, 1, 1 (no evidence predicted gives 1).
    assert scores.precision == pytest.approx((1 + 1 + 0.5 + 1 + 1) / 5)
    # Recall: complete groups for claims 1, 3, 4.
    assert scores.recall == pytest.approx(3 / 5)
    assert scores.to_dict()["n"] == 6


def test_claim_to_actual_round_trip() -> None:
    claim = Claim(1, "c", "SUPPORTS", ((SentenceId("A", 0), SentenceId("B", 2)),))
    assert claim_to_actual(claim) == {
        "label": "SUPPORTS",
        "evidence": [[[None, None, "A", 0], [None, None, "B", 2]]],
    }


def test_score_claims_errors() -> None:
    claim = Claim(7, "c", "SUPPORTS", ((SentenceId("A", 0),),))
    with pytest.raises(ValueError, match="1 claims but 2 predictions"):
        score_claims([claim], [FeverPrediction("SUPPORTS")] * 2)
    with pytest.raises(ValueError, match=r"claim 0: claim 7 has no gold label"):
        score_claims([Claim(7, "c")], [FeverPrediction("SUPPORTS")])
    with pytest.raises(ValueError, match="expected a FeverPrediction"):
        score_claims([claim], [("SUPPORTS", [SentenceId("A", 0)])])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="SentenceId"):
        FeverPrediction("SUPPORTS", (("A", 0),))  # type: ignore[arg-type]


def test_fever_prediction_normalises() -> None:
    p = FeverPrediction(Label.REFUTES, [SentenceId("A", 1)])  # type: ignore[arg-type]
    assert p.label == "REFUTES" and p.evidence == (SentenceId("A", 1),)
    assert p.to_json() == {"predicted_label": "REFUTES", "predicted_evidence": [["A", 1]]}


# --- label metrics

FEVER3 = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def test_confusion_matrix_hand_computed() -> None:
    gold = ["SUPPORTS", "SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "REFUTES"]
    pred = ["SUPPORTS", "refutes", "REFUTES", "SUPPORTS", "NOT ENOUGH INFO"]
    assert confusion_matrix(gold, pred, FEVER3) == [[1, 1, 0], [0, 1, 1], [1, 0, 0]]


def test_per_class_and_macro_f1_hand_computed() -> None:
    gold = ["SUPPORTS", "SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "REFUTES"]
    pred = ["SUPPORTS", "REFUTES", "REFUTES", "SUPPORTS", "NOT ENOUGH INFO"]
    s, r, n = per_class_scores(gold, pred, FEVER3)
    assert s == ClassScores("SUPPORTS", 0.5, 0.5, 0.5, 2)
    assert r == ClassScores("REFUTES", 0.5, 0.5, 0.5, 2)
    assert n == ClassScores("NOT ENOUGH INFO", 0.0, 0.0, 0.0, 1)
    assert macro_f1(gold, pred, FEVER3) == pytest.approx(1 / 3)


def test_hover_labels_and_unpredicted_class() -> None:
    labels = ("SUPPORTED", "NOT_SUPPORTED")
    gold = ["SUPPORTED", "NOT_SUPPORTED", "NOT_SUPPORTED"]
    pred = ["SUPPORTED", "SUPPORTED", "SUPPORTED"]
    sup, nsup = per_class_scores(gold, pred, labels)
    assert (sup.precision, sup.recall) == (pytest.approx(1 / 3), 1.0)
    assert sup.f1 == pytest.approx(0.5)
    assert nsup == ClassScores("NOT_SUPPORTED", 0.0, 0.0, 0.0, 2)  # never predicted: zero division gives 0
    assert macro_f1(gold, pred, labels) == pytest.approx(0.25)


def test_label_metrics_errors() -> None:
    with pytest.raises(ValueError, match=r"predicted label 1 is 'MAYBE'"):
        confusion_matrix(["SUPPORTS", "REFUTES"], ["SUPPORTS", "MAYBE"], FEVER3)
    with pytest.raises(ValueError, match="2 gold labels but 1 predicted"):
        macro_f1(["SUPPORTS", "REFUTES"], ["SUPPORTS"], FEVER3)
    with pytest.raises(ValueError, match="given twice"):
        confusion_matrix([], [], ("SUPPORTS", "supports"))


def test_label_metrics_match_sklearn(sample: tuple[list[dict], list[dict]]) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    predictions, actual = sample
    gold = [a["label"] for a in actual]
    pred = [p["predicted_label"] for p in predictions]
    labels = list(FEVER3)
    assert (
        confusion_matrix(gold, pred, labels) == metrics.confusion_matrix(gold, pred, labels=labels).tolist()
    )
    p, r, f, support = metrics.precision_recall_fscore_support(gold, pred, labels=labels, zero_division=0)
    ours = per_class_scores(gold, pred, labels)
    assert [s.precision for s in ours] == pytest.approx(list(p))
    assert [s.recall for s in ours] == pytest.approx(list(r))
    assert [s.f1 for s in ours] == pytest.approx(list(f))
    assert [s.support for s in ours] == list(support)
    assert macro_f1(gold, pred, labels) == pytest.approx(
        metrics.f1_score(gold, pred, labels=labels, average="macro", zero_division=0)
    )


def test_hover_score_needs_one_gold_sentence_per_page_and_the_label():
    from eval.fever_score import hover_correct, hover_score

    gold = (SentenceId("A", 0), SentenceId("A", 1), SentenceId("B", 2))
    claim = Claim(1, "c", "SUPPORTED", (gold,), num_hops=2)
    right = FeverPrediction("SUPPORTED", (SentenceId("X", 0), SentenceId("A", 1), SentenceId("B", 2)))
    assert hover_correct(claim, right)  # A's other sentence may be missing (FEVER's strict score fails)
    assert not score_claims([claim], [right]).strict
    assert not hover_correct(claim, FeverPrediction("NOT_SUPPORTED", right.evidence))
    assert not hover_correct(claim, FeverPrediction("SUPPORTED", (SentenceId("A", 0),)))  # page B missing
    late = FeverPrediction(
        "SUPPORTED", tuple(SentenceId("X", i) for i in range(5)) + (SentenceId("A", 0), SentenceId("B", 2))
    )
    assert not hover_correct(claim, late) and hover_correct(claim, late, max_evidence=None)
    assert hover_correct(Claim(2, "c", "NOT_SUPPORTED"), FeverPrediction("NOT_SUPPORTED"))
    assert hover_score([claim, claim], [right, late]) == 0.5


def test_hover_evidence_found_needs_one_gold_sentence_of_every_gold_page():
    a0, a1, b0, c3 = SentenceId("A", 0), SentenceId("A", 1), SentenceId("B", 0), SentenceId("C", 3)
    claim = Claim(1, "a claim", "SUPPORTED", ((a0, a1, b0),), 2)
    assert hover_evidence_found(claim, [a1, b0])  # A0 may be missing: A1 stands for page A
    assert not hover_evidence_found(claim, [a0, a1, c3])  # page B has none
    assert not hover_evidence_found(claim, [])


def test_hover_evidence_found_takes_any_one_gold_set():
    a0, b0, c3 = SentenceId("A", 0), SentenceId("B", 0), SentenceId("C", 3)
    claim = Claim(2, "a claim", "SUPPORTS", ((a0, b0), (c3,)))
    assert hover_evidence_found(claim, [c3])
    assert not hover_evidence_found(claim, [a0])
