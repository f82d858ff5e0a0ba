"""``benchmarks/fusion_grid.py``: the HoVer-score evidence condition it measures (``hover_evidence_found``)
and the rule it picks by."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from eval.fever_score import hover_evidence_found
from garag.types import Claim, SentenceId

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fusion_grid", ROOT / "benchmarks" / "fusion_grid.py")
assert _spec is not None and _spec.loader is not None
grid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grid)

A0, A1, B0, C3 = SentenceId("A", 0), SentenceId("A", 1), SentenceId("B", 0), SentenceId("C", 3)


def test_hover_evidence_found_needs_one_gold_sentence_of_every_gold_page():
    claim = Claim(1, "a claim", "SUPPORTED", ((A0, A1, B0),), 2)
    assert hover_evidence_found(claim, [A1, B0])  # A0 may be missing: A1 stands for page A
    assert not hover_evidence_found(claim, [A0, A1, C3])  # page B has none
    assert not hover_evidence_found(claim, [])


def test_hover_evidence_found_takes_any_one_gold_set():
    claim = Claim(2, "a claim", "SUPPORTS", ((A0, B0), (C3,)))
    assert hover_evidence_found(claim, [C3])
    assert not hover_evidence_found(claim, [A0])


def _row(hover: float, fever: float) -> dict:
    return {"hover": {"r_at_5": hover}, "fever": {"r_at_5": fever}}


def test_pick_keeps_the_shipped_setting_unless_two_more_hover_claims():
    table = {"shipped": _row(0.50, 0.99), "one more": _row(0.51, 0.99)}
    chosen, why = grid.pick(table, "shipped", 100)
    assert chosen == "shipped" and "1 more" in why
    table["three more"] = _row(0.53, 0.99)
    assert grid.pick(table, "shipped", 100)[0] == "three more"


def test_pick_refuses_a_setting_that_costs_fever_more_than_the_slack():
    table = {"shipped": _row(0.50, 0.990), "costly": _row(0.60, 0.984), "cheap": _row(0.55, 0.986)}
    assert grid.pick(table, "shipped", 100)[0] == "cheap"  # 0.004 below: inside the 0.005 slack


def test_pick_breaks_a_hover_tie_by_fever():
    table = {"shipped": _row(0.50, 0.99), "x": _row(0.55, 0.985), "y": _row(0.55, 0.992)}
    assert grid.pick(table, "shipped", 100)[0] == "y"
