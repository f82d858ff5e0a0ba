"""eval.contrast_metrics: accuracy per change type and pair consistency, one small case each."""

from __future__ import annotations

import pytest

from eval.contrast_metrics import contrast_metrics, contrast_table
from eval.report import contrast_section
from garag.types import Claim, ContrastOf


def _claim(cid: str, label: str, change: str | None = None, source: str | None = None) -> Claim:
    return Claim(cid, f"claim {cid}", label, contrast=ContrastOf(change, source) if change else None)


CLAIMS = [
    _claim("1", "REFUTES", "original", "1"),
    _claim("2", "SUPPORTS", "original", "2"),
    _claim("1~negation", "SUPPORTS", "negation", "1"),
    _claim("2~negation", "REFUTES", "negation", "2"),
    _claim("2~number", "REFUTES", "number", "2"),
    _claim("3", "SUPPORTS"),  # not in the contrast set: ignored
]


def test_accuracy_per_change_and_pairs_both_right() -> None:
    predicted = ["REFUTES", "SUPPORTS", "REFUTES", "REFUTES", "REFUTES", "SUPPORTS"]
    m = contrast_metrics(CLAIMS, predicted)
    assert m["by_change"] == {
        "negation": {"n": 2, "accuracy": 0.5},
        "number": {"n": 1, "accuracy": 1.0},
        "original": {"n": 2, "accuracy": 1.0},
    }
    assert m["changed"] == {"n": 3, "accuracy": 2 / 3}
    # 1~negation is wrong; 2~negation and 2~number are right with their original
    assert m["pairs"]["n"] == 3 and m["pairs"]["consistent"] == 2 / 3
    assert m["pairs"]["by_change"]["negation"] == {
        "n": 2,
        "consistent": 0.5,
        "if_original_right": {"n": 2, "accuracy": 0.5},
        "if_original_wrong": {"n": 0, "accuracy": None},
    }
    assert "| all changed | 3 | 0.667 | 0.667 (3) | 0.667 (3) |  |" in contrast_table(m)


def test_a_twin_right_while_its_original_is_wrong_is_no_consistent_pair() -> None:
    predicted = ["SUPPORTS", "SUPPORTS", "SUPPORTS", "REFUTES", "REFUTES", "SUPPORTS"]
    m = contrast_metrics(CLAIMS, predicted)
    assert m["by_change"]["negation"]["accuracy"] == 1.0
    negation = m["pairs"]["by_change"]["negation"]
    assert (negation["n"], negation["consistent"]) == (2, 0.5)
    # the twins' accuracy apart where the original is right (2~negation) and wrong (1~negation)
    assert negation["if_original_right"] == {"n": 1, "accuracy": 1.0}
    assert negation["if_original_wrong"] == {"n": 1, "accuracy": 1.0}
    assert "| negation | 2 | 1.000 | 0.500 (2) | 1.000 (1) | 1.000 (1) |" in contrast_table(m)


def test_twins_that_follow_their_originals_show_it_apart_from_their_accuracy() -> None:
    # every twin right exactly when its original is: 1 wrong, so its negation is wrong too
    predicted = ["SUPPORTS", "SUPPORTS", "REFUTES", "REFUTES", "REFUTES", "SUPPORTS"]
    pairs = contrast_metrics(CLAIMS, predicted)["pairs"]
    assert pairs["if_original_right"] == {"n": 2, "accuracy": 1.0}
    assert pairs["if_original_wrong"] == {"n": 1, "accuracy": 0.0}
    assert pairs["consistent"] == 2 / 3


def test_a_twin_whose_original_is_absent_counts_for_accuracy_only() -> None:
    m = contrast_metrics([_claim("9~number", "REFUTES", "number", "9")], ["REFUTES"])
    assert m["by_change"]["number"] == {"n": 1, "accuracy": 1.0}
    assert m["pairs"]["n"] == 0 and m["pairs"]["consistent"] is None
    assert m["pairs"]["if_original_right"] == {"n": 0, "accuracy": None}
    assert "| number | 1 | 1.000 |  |  |  |" in contrast_table(m)


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="6 claims but 1 predicted labels"):
        contrast_metrics(CLAIMS, ["SUPPORTS"])


def test_the_compare_reports_section_gives_each_systems_twins_where_their_claim_is_right_or_wrong() -> None:
    baseline = ["REFUTES", "SUPPORTS", "REFUTES", "REFUTES", "REFUTES", "SUPPORTS"]
    graph = ["SUPPORTS", "SUPPORTS", "SUPPORTS", "REFUTES", "REFUTES", "SUPPORTS"]
    metrics = {
        "systems": ["baseline", "graph"],
        "per_system": {
            "baseline": {"contrast": contrast_metrics(CLAIMS, baseline)},
            "graph": {"contrast": contrast_metrics(CLAIMS, graph)},
        },
    }
    lines = contrast_section(metrics)
    assert lines[2] == (
        "| change | n | baseline acc | baseline pairs | baseline if claim right / wrong "
        "| graph acc | graph pairs | graph if claim right / wrong |"
    )
    # baseline: 1~negation wrong with its claim right, no claim wrong; graph: one each way, both right
    assert "| negation | 2 | 0.500 | 0.500 | 0.500 / - | 1.000 | 0.500 | 1.000 / 1.000 |" in lines
    assert "| original | 2 | 1.000 |  |  | 0.500 |  |  |" in lines
