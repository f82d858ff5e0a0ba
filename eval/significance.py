"""Paired significance of the difference between two systems on the same claims (pure functions).

Two systems answer the same claims; each claim is right (1) or wrong (0) for
each system, either by label (accuracy) or by FEVER's strict criterion (FEVER
score).  Two tests of the difference:

* **McNemar's test** uses only the discordant claims: ``b`` = right for A and
  wrong for B, ``c`` = wrong for A and right for B.  Under H0 (equal accuracy)
  ``b ~ Binomial(b + c, 1/2)``.  When ``b + c < exact_below`` (default 25, the
  usual rule of thumb) the two-sided **exact binomial** p-value is used
  (``scipy.stats.binomtest``; for p = 1/2 it is
  ``min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2^n)``).  Otherwise the
  **chi-square statistic with Edwards' continuity correction**,
  ``(|b - c| - 1)^2 / (b + c)``, against the chi-square distribution with one
  degree of freedom (``scipy.stats.chi2.sf``).  ``b + c == 0`` gives p = 1.
* **Paired bootstrap**: claims are resampled with replacement (the same
  indices for both systems, so the pairing is kept) and the difference of
  means ``mean(B) - mean(A)`` is recomputed; the interval is the percentile
  interval of those differences.  Seeded, so a run is reproducible.  This
  stays a few lines of numpy rather than ``scipy.stats.bootstrap``: reports
  also need the one-sided share of resamples <= 0, the resampling is chunked
  to bound memory, and earlier reports' intervals stay reproducible.

Macro-F1 is not a mean over claims, so its interval resamples the claims and recomputes the whole
statistic on each resample (:func:`bootstrap_macro_f1`; :func:`paired_macro_f1` for the difference
of two systems, the same indices for both).  A class that a resample holds neither as gold nor as
predicted counts F1 0, as :func:`eval.fever_score.macro_f1` counts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from eval.fever_score import label_positions, macro_f1

EXACT_BELOW = 25


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test of two paired correctness vectors.

    Attributes:
        b: claims right for A, wrong for B.
        c: claims wrong for A, right for B.
        statistic: the continuity-corrected chi-square statistic (reported for both methods).
        p_value: two-sided p-value.
        method: "exact" (binomial), "chi2-cc" (chi-square, continuity corrected) or "none" (b + c == 0).
    """

    b: int
    c: int
    statistic: float
    p_value: float
    method: str

    def to_dict(self) -> dict:
        return {
            "b": self.b,
            "c": self.c,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "method": self.method,
        }


@dataclass(frozen=True)
class BootstrapResult:
    """Paired bootstrap of ``mean(B) - mean(A)``.

    Attributes:
        difference: the observed difference of means.
        low: lower end of the percentile interval.
        high: upper end.
        confidence: e.g. 0.95.
        n_resamples: number of bootstrap resamples.
        seed: the numpy seed used.
        share_not_positive: share of resamples with difference <= 0 (a one-sided bootstrap p-value for B > A).
    """

    difference: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    seed: int
    share_not_positive: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _as_binary(values: Sequence[bool | int | float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of 0/1 values")
    if arr.size and not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must hold only 0/1 (or booleans)")
    return arr


def _pair(a: Sequence, b: Sequence) -> tuple[np.ndarray, np.ndarray]:
    x, y = _as_binary(a, "correct_a"), _as_binary(b, "correct_b")
    if x.size != y.size:
        raise ValueError(f"paired vectors differ in length ({x.size} != {y.size})")
    if x.size == 0:
        raise ValueError("no claims to compare")
    return x, y


def mcnemar(
    correct_a: Sequence[bool | int], correct_b: Sequence[bool | int], exact_below: int = EXACT_BELOW
) -> McNemarResult:
    """McNemar's test on paired per-claim correctness (see the module docstring for the method choice).

    Raises:
        ValueError: lengths differ, empty input, or values other than 0/1.
    """
    x, y = _pair(correct_a, correct_b)
    b = int(np.sum((x == 1) & (y == 0)))
    c = int(np.sum((x == 0) & (y == 1)))
    n = b + c
    if n == 0:
        return McNemarResult(b, c, 0.0, 1.0, "none")
    statistic = (abs(b - c) - 1) ** 2 / n if abs(b - c) >= 1 else 0.0
    if n < exact_below:
        p_value = float(stats.binomtest(b, n, 0.5, alternative="two-sided").pvalue)
        return McNemarResult(b, c, statistic, min(1.0, p_value), "exact")
    return McNemarResult(b, c, statistic, float(stats.chi2.sf(statistic, df=1)), "chi2-cc")


def paired_bootstrap(
    values_a: Sequence[float],
    values_b: Sequence[float],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Percentile interval of ``mean(B) - mean(A)`` over claims resampled with replacement.

    Args:
        values_a: per-claim scores of system A (0/1 correctness, or any numbers).
        values_b: the same claims' scores of system B.
        n_resamples: bootstrap resamples.
        seed: numpy seed.
        confidence: interval coverage in (0, 1).

    Raises:
        ValueError: lengths differ, empty input, bad ``n_resamples`` or ``confidence``.
    """
    x = np.asarray(values_a, dtype=np.float64)
    y = np.asarray(values_b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or x.size != y.size:
        raise ValueError(f"paired vectors must be flat and equally long ({x.size} != {y.size})")
    _check_resampling(x.size, n_resamples, confidence)
    diff = y - x
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // diff.size)  # bound memory: at most ~2M indices at a time
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, diff.size, size=(stop - start, diff.size))
        means[start:stop] = diff[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return BootstrapResult(
        difference=float(diff.mean()),
        low=float(low),
        high=float(high),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        share_not_positive=float(np.mean(means <= 0)),
    )


def bootstrap_mean_ci(
    values: Sequence[float], n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """``(mean, low, high)``: the percentile bootstrap interval of one system's mean score."""
    zeros = np.zeros(len(values))
    r = paired_bootstrap(zeros, values, n_resamples, seed, confidence)
    return r.difference, r.low, r.high


def paired_comparison(
    a: Sequence[bool | int], b: Sequence[bool | int], n_resamples: int = 10_000, seed: int = 0
) -> dict:
    """McNemar and the paired bootstrap of one correctness criterion, as a JSON-able dict."""
    x, y = _pair(a, b)
    return {
        "n": int(x.size),
        "a": float(x.mean()),
        "b": float(y.mean()),
        "mcnemar": mcnemar(x, y).to_dict(),
        "bootstrap": paired_bootstrap(x, y, n_resamples, seed).to_dict(),
    }


def _codes(values: Sequence[str], labels: Sequence[str], what: str) -> np.ndarray:
    return np.asarray(label_positions(values, labels, what), dtype=np.int64)


def _macro_f1_rows(gold: np.ndarray, pred: np.ndarray, n_labels: int) -> np.ndarray:
    """Macro-F1 of each row of the (resamples x claims) label-code matrices: per class
    ``2 tp / (gold + predicted)``, 0 where the class is neither."""
    total = np.zeros(gold.shape[0], dtype=np.float64)
    for lab in range(n_labels):
        g, p = gold == lab, pred == lab
        tp = np.count_nonzero(g & p, axis=1)
        denom = np.count_nonzero(g, axis=1) + np.count_nonzero(p, axis=1)
        total += np.divide(2.0 * tp, denom, out=np.zeros_like(total), where=denom > 0)
    return total / n_labels


def _resampled_macro_f1(
    gold: np.ndarray, preds: Sequence[np.ndarray], n_labels: int, n_resamples: int, seed: int
) -> list[np.ndarray]:
    """Each system's macro-F1 on the same ``n_resamples`` resamples of the claims (chunked)."""
    rng = np.random.default_rng(seed)
    out = [np.empty(n_resamples, dtype=np.float64) for _ in preds]
    chunk = max(1, 2_000_000 // gold.size)
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, gold.size, size=(stop - start, gold.size))
        g = gold[idx]
        for o, p in zip(out, preds, strict=True):
            o[start:stop] = _macro_f1_rows(g, p[idx], n_labels)
    return out


def _check_resampling(n: int, n_resamples: int, confidence: float) -> None:
    if n == 0:
        raise ValueError("no claims to compare")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _macro_f1_resampled(
    gold: Sequence[str],
    systems: dict[str, Sequence[str]],
    labels: Sequence[str],
    n_resamples: int,
    seed: int,
    confidence: float,
) -> tuple[list[float], list[np.ndarray]]:
    """Each system's macro-F1 on the claims and on the same ``n_resamples`` resamples of them,
    after the checks :func:`bootstrap_macro_f1` and :func:`paired_macro_f1` share (``systems``:
    name -> predicted labels; the name is what an unknown label's error says)."""
    lengths = [len(gold), *(len(p) for p in systems.values())]
    if len(set(lengths)) > 1:
        names = " and ".join(systems)
        raise ValueError(f"gold and {names} labels differ in length ({', '.join(map(str, lengths))})")
    _check_resampling(len(gold), n_resamples, confidence)
    codes = [_codes(p, labels, name) for name, p in systems.items()]
    values = [macro_f1(gold, p, labels) for p in systems.values()]
    return values, _resampled_macro_f1(_codes(gold, labels, "gold"), codes, len(labels), n_resamples, seed)


def _percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_macro_f1(
    gold: Sequence[str],
    predicted: Sequence[str],
    labels: Sequence[str],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """``(macro-F1, low, high)``: one system's macro-F1 over ``labels`` and its percentile
    bootstrap interval (claims resampled with replacement).

    Raises:
        ValueError: lengths differ, no claims, a label outside ``labels``, bad ``n_resamples`` or
            ``confidence``.
    """
    (value,), (f1s,) = _macro_f1_resampled(
        gold, {"predicted": predicted}, labels, n_resamples, seed, confidence
    )
    return (value, *_percentile_interval(f1s, confidence))


def paired_macro_f1(
    gold: Sequence[str],
    predicted_a: Sequence[str],
    predicted_b: Sequence[str],
    labels: Sequence[str],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """Macro-F1 of systems A and B on the same claims and the paired bootstrap of B - A, as a
    JSON-able dict (``n``, ``a``, ``b``, ``bootstrap``: :class:`BootstrapResult`'s fields).

    Raises:
        ValueError: as :func:`bootstrap_macro_f1`.
    """
    (a, b), (fa, fb) = _macro_f1_resampled(
        gold, {"system A": predicted_a, "system B": predicted_b}, labels, n_resamples, seed, confidence
    )
    diff = fb - fa
    low, high = _percentile_interval(diff, confidence)
    result = BootstrapResult(
        difference=b - a,
        low=low,
        high=high,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        share_not_positive=float(np.mean(diff <= 0)),
    )
    return {"n": len(gold), "a": a, "b": b, "bootstrap": result.to_dict()}
