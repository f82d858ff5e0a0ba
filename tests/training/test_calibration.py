from __future__ import annotations

import numpy as np
import pytest

from training.calibration import best_nei_bias
from verifier.calibration import apply_nei_bias

# Columns in LABEL_ORDER: SUPPORTS, NOT ENOUGH INFO, REFUTES.


def test_bias_moves_mass_to_nei_and_renormalises():
    p = np.array([[0.5, 0.25, 0.25]])
    q = apply_nei_bias(p, float(np.log(2)))
    assert q.sum() == pytest.approx(1.0)
    assert q[0].tolist() == pytest.approx([0.4, 0.4, 0.2])
    assert apply_nei_bias(p, 0.0) is p


def test_best_bias_on_a_hand_made_case():
    # Two NEI claims whose NEI prob is a bit too low; one SUPPORTS claim that must stay SUPPORTS.
    probs = np.array([[0.45, 0.40, 0.15], [0.30, 0.33, 0.37], [0.70, 0.20, 0.10]])
    gold = np.array([1, 1, 0])
    bias, acc, base = best_nei_bias(probs, gold)
    assert base == pytest.approx(1 / 3)
    assert acc == pytest.approx(1.0)
    # Smallest bias on the grid that flips claim 0: log(0.45/0.40) = 0.118 -> 0.2 (grid step 0.1).
    assert bias == pytest.approx(0.2)
    with pytest.raises(ValueError):
        best_nei_bias(np.zeros((0, 3)), np.zeros(0, dtype=int))
