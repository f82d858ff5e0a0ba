"""`garag evaluate`'s macro-F1 intervals, overall and per hop count, on the embedded HoVer tune claims."""

from __future__ import annotations

import pytest

from eval.fever_score import macro_f1
from eval.verification_eval import metrics_table, score_records
from garag.config import Config
from garag.datasets import dataset_from_config


@pytest.fixture(scope="module")
def hover_tune():
    return dataset_from_config(Config().data.model_copy(update={"dataset": "hover", "part": "tune"}))


def _records(claims) -> list[dict]:
    # every third claim REFUTES (NOT_SUPPORTED), the rest SUPPORTS: a system of known labels
    return [
        {"id": c.id, "predicted_label": "REFUTES" if i % 3 == 0 else "SUPPORTS", "predicted_evidence": []}
        for i, c in enumerate(claims)
    ]


def test_intervals_per_hop_hold_the_groups_macro_f1(hover_tune):
    claims = list(hover_tune.claims())
    recs = _records(claims)
    m = score_records(hover_tune, recs, n_resamples=2000, seed=1)
    predicted = ["NOT_SUPPORTED" if i % 3 == 0 else "SUPPORTED" for i in range(len(claims))]
    labels = list(hover_tune.labels)
    value, low, high = m["macro_f1_ci"]
    assert value == pytest.approx(macro_f1([c.label for c in claims], predicted, labels)) == m["macro_f1"]
    assert low < value < high
    assert set(m["groups"]) == {"2", "3", "4"}
    for hops, g in m["groups"].items():
        idx = [i for i, c in enumerate(claims) if str(c.num_hops) == hops]
        expected = macro_f1([claims[i].label for i in idx], [predicted[i] for i in idx], labels)
        v, lo, hi = g["macro_f1_ci"]
        assert v == pytest.approx(expected) == pytest.approx(g["macro_f1"])
        assert lo <= v <= hi and hi - lo > high - low  # a hop group is smaller, so less certain
    table = metrics_table("t", m)
    assert "macro-F1 [95% CI]" in table
    two = m["groups"]["2"]
    assert f"| 2 | {two['n']} |" in table and f"[{two['macro_f1_ci'][1]:.3f}, " in table
    assert score_records(hover_tune, recs, n_resamples=2000, seed=1) == m  # seeded


def test_no_intervals_unless_asked(hover_tune):
    m = score_records(hover_tune, _records(list(hover_tune.claims())))
    assert "macro_f1_ci" not in m and all("macro_f1_ci" not in g for g in m["groups"].values())
    assert "macro-F1 [95% CI]" not in metrics_table("t", m)
