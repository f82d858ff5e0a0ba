"""The GA-RAG metrics on hand-made records whose values are known."""

from __future__ import annotations

import pytest

from eval.garag_metrics import (
    context_precision,
    garag_metrics,
    graph_completeness,
    graph_coverage,
    logical_consistency,
    response_time,
)
from garag.types import Claim, SentenceId

A0, A1, B0 = SentenceId("A", 0), SentenceId("A", 1), SentenceId("B", 0)
CLAIMS = [
    Claim(1, "c1", "SUPPORTS", ((A0, B0),)),
    Claim(2, "c2", "REFUTES", ((A1,),)),
    Claim(3, "c3", "NOT ENOUGH INFO"),
]


def _program(steps: list[str], claim_verdict: str | None) -> dict:
    return {
        "steps": [{"var": f"fact_{i}", "kind": "verify", "label": lab} for i, lab in enumerate(steps, 1)]
        + [{"var": "answer_1", "kind": "question", "answer": "X"}],
        "claim_verdict": claim_verdict,
    }


RECORDS = [
    {
        "predicted_label": "SUPPORTS",
        "program": _program(["SUPPORTS", "SUPPORTS"], "SUPPORTS"),
        "graph": {"entities": ["A", "B", "C", "D"], "covered": ["A"], "pool": [["A", 0], ["B", 0], ["C", 3]]},
        "evidence_read": [["A", 0], ["C", 3]],
        "seconds": {"retrieval": 0.25, "verification": 0.75},
    },
    {
        "predicted_label": "SUPPORTS",  # inconsistent: a step was refuted
        "program": _program(["SUPPORTS", "REFUTES"], None),
        "graph": {"entities": ["A", "B"], "covered": ["A", "B"], "pool": [["A", 0]]},
        "evidence_read": [["A", 1]],
        "seconds": {"retrieval": 1.0},
    },
    {
        "predicted_label": "NOT ENOUGH INFO",
        "program": _program(["SUPPORTS", "NOT ENOUGH INFO"], "SUPPORTS"),
        "graph": {"entities": [], "covered": [], "pool": []},
        "evidence_read": [["A", 1]],
        "seconds": {},
    },
]


def test_each_metric_on_known_records():
    assert logical_consistency(RECORDS) == pytest.approx(2 / 3)
    assert graph_coverage(RECORDS) == pytest.approx((1 / 4 + 2 / 2) / 2)  # claims without entities skipped
    assert graph_completeness(CLAIMS, RECORDS) == pytest.approx(1 / 2)  # claim 1 complete, claim 2 not
    assert context_precision(CLAIMS, RECORDS) == pytest.approx((1 / 2 + 1) / 2)  # NEI claim 3 skipped
    assert response_time(RECORDS) == pytest.approx(1.0)


def test_metrics_that_do_not_apply_are_none():
    plain = [{k: v for k, v in r.items() if k not in ("program", "graph")} for r in RECORDS]
    m = garag_metrics(CLAIMS, plain)
    assert m["logical_consistency"] is None and m["graph_coverage"] is None
    assert m["graph_completeness"] is None and m["hallucination_rate"] is None
    assert m["factual_grounding"] is None
    m = garag_metrics(CLAIMS, RECORDS, {"faithful": 0.75, "grounded": 0.5})
    assert m["hallucination_rate"] == pytest.approx(0.25) and m["factual_grounding"] == 0.5
