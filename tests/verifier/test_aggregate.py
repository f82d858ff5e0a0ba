"""per_sentence aggregation rule on given probability arrays (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from garag.types import Label
from verifier.aggregate import CONFLICT, CONTRADICTS, ENTAILS, LOW_CONFIDENCE, aggregate_sentence_probs

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES
# Columns: SUPPORTS (entailment), NOT ENOUGH INFO (neutral), REFUTES (contradiction).


def test_max_entailment_wins() -> None:
    probs = np.array([[0.10, 0.80, 0.10], [0.93, 0.05, 0.02], [0.20, 0.30, 0.50]])
    agg = aggregate_sentence_probs(probs, min_confidence=0.5, nei_margin=0.0)
    assert agg.label is S and agg.reason == ENTAILS
    assert agg.decisive == 1 and agg.best_support == 1 and agg.best_refute == 2
    assert agg.scores == {S: 0.93, N: pytest.approx(0.07), R: 0.50}


def test_max_contradiction_wins() -> None:
    probs = np.array([[0.30, 0.60, 0.10], [0.05, 0.10, 0.85]])
    agg = aggregate_sentence_probs(probs, 0.5, 0.0)
    assert agg.label is R and agg.reason == CONTRADICTS and agg.decisive == 1


def test_below_min_confidence_is_nei() -> None:
    probs = np.array([[0.45, 0.50, 0.05], [0.10, 0.60, 0.30]])
    agg = aggregate_sentence_probs(probs, 0.5, 0.0)
    assert agg.label is N and agg.reason == LOW_CONFIDENCE
    assert agg.decisive == 0  # the closest sentence
    assert agg.scores[N] == pytest.approx(0.55)


def test_min_confidence_is_inclusive() -> None:
    agg = aggregate_sentence_probs(np.array([[0.5, 0.5, 0.0]]), 0.5, 0.0)
    assert agg.label is S


def test_margin_not_met_is_conflict() -> None:
    probs = np.array([[0.80, 0.10, 0.10], [0.10, 0.15, 0.75]])
    agg = aggregate_sentence_probs(probs, 0.5, nei_margin=0.10)
    assert agg.label is N and agg.reason == CONFLICT
    assert (agg.best_support, agg.best_refute) == (0, 1)


def test_margin_met_exactly() -> None:
    probs = np.array([[0.75, 0.15, 0.10], [0.10, 0.25, 0.65]])
    assert aggregate_sentence_probs(probs, 0.5, nei_margin=0.10).label is S


def test_exact_tie_is_nei_even_without_margin() -> None:
    probs = np.array([[0.7, 0.3, 0.0], [0.0, 0.3, 0.7]])
    agg = aggregate_sentence_probs(probs, 0.5, 0.0)
    assert agg.label is N and agg.reason == CONFLICT


def test_single_sentence() -> None:
    agg = aggregate_sentence_probs(np.array([[0.1, 0.2, 0.7]]), 0.6, 0.2)
    assert agg.label is R and agg.decisive == 0


@pytest.mark.parametrize("bad", [np.zeros((0, 3)), np.zeros((2, 2)), np.array([[0.5, 0.6, -0.1]])])
def test_bad_input(bad: np.ndarray) -> None:
    with pytest.raises(ValueError):
        aggregate_sentence_probs(bad)
