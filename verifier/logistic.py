"""A multinomial logistic regression over standardised features, stored as plain arrays.

Both learned stages of a verdict use it: the claim aggregator over per-sentence NLI probabilities
(:mod:`verifier.claim_aggregator`) and the decision model over the verifier's output and features
of the claim and its evidence (:mod:`verifier.decision`).  Fitting uses scikit-learn's
``LogisticRegression``; prediction is pure numpy, so a stored model loads without scikit-learn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Softmax:
    """Standardisation, weights and a prior correction.

    Attributes:
        mean, scale: feature standardisation.
        weights: ``(n_features + 1, n_classes)``, the last row the intercepts.
        prior_correction: added to the scores: minus the log of the fitting data's class shares,
            so that the probabilities are those of equal class priors.
        counts: fitting examples per class.
    """

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    prior_correction: np.ndarray
    counts: tuple[int, ...] = ()

    def scores(self, features: np.ndarray) -> np.ndarray:
        """Prior-corrected log-scores, ``(n, n_classes)``."""
        x = np.atleast_2d(np.asarray(features, dtype=np.float64))
        if x.shape[1] != len(self.mean):
            raise ValueError(f"expected {len(self.mean)} features, got {x.shape[1]}")
        z = np.hstack([(x - self.mean) / self.scale, np.ones((len(x), 1))])
        return z @ self.weights + self.prior_correction

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        """Class probabilities ``(n, n_classes)``."""
        s = self.scores(features)
        s = np.exp(s - s.max(axis=1, keepdims=True))
        return s / s.sum(axis=1, keepdims=True)

    def contributions(self, features: np.ndarray, cls: int) -> np.ndarray:
        """Each standardised feature's term in class ``cls``'s score, for one row."""
        x = (np.asarray(features, dtype=np.float64) - self.mean) / self.scale
        return x * self.weights[:-1, cls]


def fit_softmax(features: np.ndarray, classes: Sequence[int], n_classes: int, l2: float) -> Softmax:
    """Fit with L-BFGS (deterministic): mean cross-entropy plus ``l2 / 2`` times the squared weights
    of the standardised features (intercepts not penalised), i.e. scikit-learn's ``C = 1 / (l2 * n)``.

    Raises:
        ValueError: shapes disagree, ``l2`` is not positive, or a class has no example.
    """
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(classes, dtype=np.int64)
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(f"features {x.shape} do not match {len(y)} labels")
    if not l2 > 0:
        raise ValueError(f"need l2 > 0, got {l2}")
    counts = np.bincount(y, minlength=n_classes)
    if (counts == 0).any():
        raise ValueError(f"every class needs fitting examples, got counts {counts.tolist()}")
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    model = LogisticRegression(C=1.0 / (l2 * len(x)), max_iter=5000, tol=1e-8)
    model.fit((x - mean) / scale, y)
    return Softmax(
        mean=mean,
        scale=scale,
        weights=np.vstack([model.coef_.T, model.intercept_[None, :]]),
        prior_correction=-np.log(counts / counts.sum()),
        counts=tuple(int(c) for c in counts),
    )


def read_model_file(path: Path, version: int) -> dict | None:
    """A stored model's JSON object, or None when there is no file or it is of another version
    (then it is fitted again).

    Raises:
        ValueError: the file is not a JSON object (naming it, with what to do).
    """
    if not path.is_file():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); delete it and garag fits a new one") from exc
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return obj if obj.get("version") == version else None


ARRAYS = ("mean", "scale", "weights", "prior_correction")


def softmax_json(model: Softmax) -> dict:
    """The regression's arrays as JSON lists (:data:`ARRAYS`)."""
    return {k: getattr(model, k).tolist() for k in ARRAYS}


def softmax_from_json(obj: dict, source: str, n_features: int, n_classes: int) -> Softmax:
    """The regression stored by :func:`softmax_json`.

    Raises:
        ValueError: an array missing, malformed or of the wrong shape, naming ``source``.
    """
    missing = [k for k in ARRAYS if k not in obj]
    if missing:
        raise ValueError(f"{source}: missing {missing}")
    try:
        arrays = [np.asarray(obj[k], dtype=np.float64) for k in ARRAYS]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source}: malformed arrays ({exc})") from exc
    shapes = tuple(a.shape for a in arrays)
    n = n_features
    if shapes != ((n,), (n,), (n + 1, n_classes), (n_classes,)):
        raise ValueError(f"{source}: array shapes {shapes} do not fit {n} features")
    return Softmax(*arrays)
