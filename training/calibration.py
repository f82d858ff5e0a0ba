"""Fitting the NOT ENOUGH INFO bias of a trained verifier on held-out claims.

The bias that maximises validation accuracy is stored beside the model, where
:mod:`verifier.calibration` reads and applies it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from garag.artifacts import write_json_atomic
from verifier.base import TrainExample
from verifier.calibration import CALIBRATION_FILE, apply_nei_bias
from verifier.inputs import build_premise
from verifier.labels import LABEL_ORDER

_GRID = np.round(np.arange(-3.0, 3.01, 0.1), 2)

PairScorer = Callable[[list[str], list[str]], np.ndarray]


def best_nei_bias(
    probs: np.ndarray, gold: np.ndarray, grid: np.ndarray = _GRID
) -> tuple[float, float, float]:
    """The bias from ``grid`` with the highest accuracy (ties: the one closest to 0).

    Returns:
        ``(bias, accuracy_at_bias, accuracy_at_0)``.
    """
    if len(probs) == 0:
        raise ValueError("no validation predictions to calibrate on")
    base = float((probs.argmax(1) == gold).mean())
    best = (0.0, base)
    for b in sorted(grid, key=abs):
        acc = float((apply_nei_bias(probs, float(b)).argmax(1) == gold).mean())
        if acc > best[1] + 1e-12:
            best = (float(b), acc)
    return best[0], best[1], base


def calibrate_nei_bias(
    model_dir: Path, val: Sequence[TrainExample], predict_pairs: PairScorer, top_k: int
) -> dict:
    """Score the validation examples, pick the NEI bias, store it beside the model.

    Args:
        model_dir: the trained model's directory; ``garag_calibration.json`` is written there.
        val: held-out examples with gold labels.
        predict_pairs: ``(premises, claims) -> (n, 3)`` probabilities in ``LABEL_ORDER`` with no
            NEI bias applied (e.g. ``NLIVerifier.predict_pairs`` of the model loaded with bias 0).
        top_k: evidence sentences per premise, as the verifier builds them.
    """
    premises = [build_premise(ex.evidence, top_k) for ex in val]
    probs = predict_pairs(premises, [ex.claim for ex in val])
    gold = np.array([LABEL_ORDER.index(ex.label) for ex in val])
    bias, acc, base = best_nei_bias(probs, gold)
    result = {
        "nei_bias": bias,
        "val_accuracy": acc,
        "val_accuracy_without_bias": base,
        "val_examples": len(val),
    }
    write_json_atomic(Path(model_dir) / CALIBRATION_FILE, result)
    return result
