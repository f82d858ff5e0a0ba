"""The NOT ENOUGH INFO calibration stored beside a trained model, read and applied.

A classifier trained with synthetic NEI examples is rarely calibrated for
the NEI share of real data.  Training picks one additive bias ``b`` on the NEI
log-probability (``argmax(log p + b * e_NEI)``) on validation claims
(:mod:`training.calibration`); ``b = 0`` is plain argmax.  The bias is stored
beside the model (``garag_calibration.json``) and applied by
:class:`verifier.nli.NLIVerifier` unless ``verifier.nei_bias`` overrides it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from garag.types import Label
from verifier.labels import LABEL_ORDER

CALIBRATION_FILE = "garag_calibration.json"


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


def read_calibration(model_dir: str | Path) -> dict:
    """The stored calibration of a model directory ({} when there is none, e.g. a hub model)."""
    path = Path(model_dir) / CALIBRATION_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
