"""Calibrating the NOT ENOUGH INFO decision on held-out claims.

A classifier trained with synthetic NEI examples is rarely calibrated for
the NEI share of real data.  We pick one additive bias ``b`` on the NEI
log-probability (``argmax(log p + b * e_NEI)``) that maximises validation
accuracy; ``b = 0`` is plain argmax.  The bias is stored beside the model
(``garag_calibration.json``) and applied by :class:`verifier.nli.NLIVerifier`
unless ``verifier.nei_bias`` overrides it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from garag.artifacts import write_json_atomic
from garag.types import Label
from verifier.base import TrainExample
from verifier.inputs import build_premise
from verifier.labels import LABEL_ORDER

CALIBRATION_FILE = "garag_calibration.json"
_GRID = np.round(np.arange(-3.0, 3.01, 0.1), 2)

PairScorer = Callable[[list[str], list[str]], np.ndarray]


def apply_nei_bias(probs: np.ndarray, bias: float) -> np.ndarray:
    """Re-normalised probabilities after adding ``bias`` to the NEI log-probability.

    Args:
        probs: (n, 3) probabilities in ``LABEL_ORDER``.
        bias: additive log-space bias for NEI.
    """
    if bias == 0.0:
        return probs
    nei = LABEL_ORDER.index(Label.NOT_ENOUGH_INFO)
    scaled = probs.astype(np.float64).copy()
    scaled[:, nei] *= float(np.exp(bias))
    return scaled / scaled.sum(axis=1, keepdims=True)


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


def read_calibration(model_dir: str | Path) -> dict:
    """The stored calibration of a model directory ({} when there is none, e.g. a hub model)."""
    path = Path(model_dir) / CALIBRATION_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
