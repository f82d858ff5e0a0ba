"""McNemar and the paired bootstrap against cases computed by hand (arithmetic in the comments)."""

from __future__ import annotations

import math

import pytest

from eval.fever_score import macro_f1
from eval.significance import (
    bootstrap_macro_f1,
    bootstrap_mean_ci,
    mcnemar,
    paired_bootstrap,
    paired_comparison,
    paired_macro_f1,
)


def _pairs(b: int, c: int, both_right: int = 0, both_wrong: int = 0) -> tuple[list[int], list[int]]:
    """Vectors with b claims right only for A, c right only for B, and concordant claims."""
    a = [1] * b + [0] * c + [1] * both_right + [0] * both_wrong
    bb = [0] * b + [1] * c + [1] * both_right + [0] * both_wrong
    return a, bb


def test_exact_mcnemar_b1_c5():
    # n = 6 discordant; two-sided p = 2 * (C(6,0) + C(6,1)) / 2^6 = 2 * 7 / 64 = 0.21875.
    # statistic (reported) = (|1 - 5| - 1)^2 / 6 = 9 / 6 = 1.5.
    a, b = _pairs(1, 5, both_right=10, both_wrong=4)
    r = mcnemar(a, b)
    assert (r.b, r.c, r.method) == (1, 5, "exact")
    assert r.p_value == pytest.approx(14 / 64)
    assert r.statistic == pytest.approx(1.5)


def test_exact_mcnemar_b2_c22_is_just_below_the_chi2_threshold():
    # n = 24 < 25: exact. p = 2 * (1 + 24 + 276) / 2^24 = 602 / 16777216 = 3.588e-05.
    r = mcnemar(*_pairs(2, 22))
    assert r.method == "exact"
    assert r.p_value == pytest.approx(602 / 2**24)


def test_chi2_mcnemar_b10_c30():
    # n = 40 >= 25: chi2 = (|10 - 30| - 1)^2 / 40 = 361 / 40 = 9.025;
    # p = P(chi2_1 > 9.025) = erfc(sqrt(9.025 / 2)) = 0.0026631 (scipy.stats.chi2.sf gives the same).
    r = mcnemar(*_pairs(10, 30, both_right=5))
    assert (r.b, r.c, r.method) == (10, 30, "chi2-cc")
    assert r.statistic == pytest.approx(9.025)
    assert r.p_value == pytest.approx(0.0026631192591, rel=1e-9)


def test_symmetric_and_degenerate_cases():
    # b = c = 3: 2 * (1 + 6 + 15 + 20) / 64 = 84 / 64 > 1 -> capped at 1.
    assert mcnemar(*_pairs(3, 3)).p_value == 1.0
    none = mcnemar([1, 0, 1], [1, 0, 1])
    assert (none.b, none.c, none.p_value, none.method) == (0, 0, 1.0, "none")
    # swapping the systems swaps b and c, not the p-value
    assert mcnemar(*_pairs(5, 1)).p_value == mcnemar(*_pairs(1, 5)).p_value


def test_tails_match_closed_forms():
    # b = 0, c = 1: exact, 2 * 1/2 = 1.  b = 0, c = 5: exact, 2 * C(5,0) / 2^5 = 2/32.
    assert mcnemar(*_pairs(0, 1)).p_value == 1.0
    assert mcnemar(*_pairs(0, 5)).p_value == pytest.approx(2 / 32)
    # b = 0, c = 26 (n = 26 >= 25): chi2 = 25^2 / 26 = 24.038; sf = erfc(sqrt(x / 2)) for one dof.
    r = mcnemar(*_pairs(0, 26))
    assert r.method == "chi2-cc"
    assert r.p_value == pytest.approx(math.erfc(math.sqrt(625 / 26 / 2)), rel=1e-9)
    # exact_below moves the switch: the same counts by the exact binomial, 2 / 2^26.
    assert mcnemar(*_pairs(0, 26), exact_below=30).p_value == pytest.approx(2 / 2**26)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="length"):
        mcnemar([1, 0], [1])
    with pytest.raises(ValueError, match="0/1"):
        mcnemar([1, 2], [1, 0])
    with pytest.raises(ValueError, match="no claims"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap([1], [0], confidence=1.5)


def test_bootstrap_two_claims_by_hand():
    # Differences per claim are [1, 0]. A resample of 2 claims has mean difference
    # 0 (prob 1/4), 0.5 (prob 1/2) or 1 (prob 1/4): the 2.5% and 97.5% percentiles are 0 and 1,
    # and the share of resamples with difference <= 0 is about 1/4.
    r = paired_bootstrap([0, 0], [1, 0], n_resamples=20_000, seed=1)
    assert r.difference == 0.5
    assert (r.low, r.high) == (0.0, 1.0)
    assert r.share_not_positive == pytest.approx(0.25, abs=0.015)


def test_bootstrap_keeps_the_pairing():
    # B equals A on every claim, so every resampled (paired) difference is exactly 0, however
    # variable each system is on its own; an unpaired bootstrap would give a wide interval.
    a = [1, 0, 1, 1, 0, 0, 1, 0]
    r = paired_bootstrap(a, a, n_resamples=2000, seed=3)
    assert (r.difference, r.low, r.high) == (0.0, 0.0, 0.0)


def test_bootstrap_interval_matches_the_normal_approximation():
    # 400 claims, B right on 40 more (c = 60, b = 20): difference 0.1; the sd of the mean
    # difference is sqrt((80/400 - 0.1^2) / 400) = sqrt(0.19 / 400) = 0.02179, so the 95%
    # interval is about 0.1 +- 1.96 * 0.02179 = [0.0573, 0.1427].
    a, b = _pairs(20, 60, both_right=200, both_wrong=120)
    r = paired_bootstrap(a, b, n_resamples=20_000, seed=7)
    half = 1.96 * math.sqrt(0.19 / 400)
    assert r.difference == pytest.approx(0.1)
    assert r.low == pytest.approx(0.1 - half, abs=0.006)
    assert r.high == pytest.approx(0.1 + half, abs=0.006)
    assert r.share_not_positive < 0.001


def test_bootstrap_is_seeded():
    a, b = _pairs(7, 12, both_right=30, both_wrong=11)
    assert paired_bootstrap(a, b, 500, seed=5) == paired_bootstrap(a, b, 500, seed=5)
    mean, low, high = bootstrap_mean_ci([1, 1, 0, 1], 2000, seed=2)
    assert mean == 0.75 and 0.0 <= low <= 0.75 <= high <= 1.0


def test_paired_comparison_bundles_both_tests():
    a, b = _pairs(1, 5, both_right=10, both_wrong=4)
    out = paired_comparison(a, b, n_resamples=200, seed=0)
    assert out["n"] == 20 and out["a"] == pytest.approx(11 / 20) and out["b"] == pytest.approx(15 / 20)
    assert out["mcnemar"]["p_value"] == pytest.approx(14 / 64)
    assert out["bootstrap"]["difference"] == pytest.approx(0.2)


def test_macro_f1_interval_by_hand():
    # Two claims, gold [S, N], predicted [S, S].  A resample draws each claim with probability 1/2:
    # both claim 1 (prob 1/4): S F1 1, N absent from gold and predictions -> 0: macro 0.5;
    # both claim 2 (1/4): S F1 0 (predicted, never gold), N F1 0: macro 0;
    # one of each (1/2): S precision 1/2, recall 1 -> 2/3, N 0: macro 1/3.
    # So the 2.5% and 97.5% percentiles are 0 and 0.5; the value itself is 1/3.
    value, low, high = bootstrap_macro_f1(["S", "N"], ["S", "S"], ["S", "N"], n_resamples=20_000, seed=1)
    assert value == pytest.approx(1 / 3) == pytest.approx(macro_f1(["S", "N"], ["S", "S"], ["S", "N"]))
    assert (low, high) == (0.0, 0.5)


def test_every_resample_is_scored_as_the_scorer_scores_it():
    # the interval's resamples, drawn again with the same seed and scored one by one with
    # eval.fever_score.macro_f1: tiny and skewed samples, so that classes drop out of resamples
    import numpy as np

    from eval.significance import _resampled_macro_f1

    rng = np.random.default_rng(11)
    for n_labels, n in ((2, 1), (2, 3), (3, 5), (3, 8), (2, 20)):
        labels = ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"][:n_labels]
        gold = [labels[0] if rng.random() < 0.7 else labels[-1] for _ in range(n)]
        pred = [labels[int(rng.integers(n_labels))] for _ in range(n)]
        codes = [np.array([labels.index(x) for x in v]) for v in (gold, pred)]
        (fast,) = _resampled_macro_f1(codes[0], [codes[1]], n_labels, 300, seed=5)
        draws = np.random.default_rng(5).integers(0, n, size=(300, n))
        slow = [macro_f1([gold[i] for i in d], [pred[i] for i in d], labels) for d in draws]
        assert fast.tolist() == pytest.approx(slow, abs=1e-12)


def test_macro_f1_labels_compare_as_the_scorer_compares_them():
    # case-insensitively, as eval.fever_score.macro_f1 (and FEVER's scorer) do
    gold, pred = ["supported", "NOT_SUPPORTED"], ["SUPPORTED", "SUPPORTED"]
    labels = ["SUPPORTED", "NOT_SUPPORTED"]
    assert bootstrap_macro_f1(gold, pred, labels, 100)[0] == macro_f1(gold, pred, labels)
    with pytest.raises(ValueError, match="given twice"):
        bootstrap_macro_f1(["S"], ["S"], ["S", "s"])


def test_macro_f1_interval_matches_the_scorer_on_random_labels():
    import random

    rng = random.Random(4)
    labels = ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    gold = [rng.choice(labels) for _ in range(120)]
    pred = [g if rng.random() < 0.7 else rng.choice(labels) for g in gold]
    value, low, high = bootstrap_macro_f1(gold, pred, labels, n_resamples=4000, seed=3)
    assert value == pytest.approx(macro_f1(gold, pred, labels))
    assert low < value < high and high - low < 0.3
    again = bootstrap_macro_f1(gold, pred, labels, 500, 9)
    assert bootstrap_macro_f1(gold, pred, labels, 500, seed=9) == again
    assert bootstrap_macro_f1(gold, gold, labels, 500, seed=9) == (1.0, 1.0, 1.0)


def test_paired_macro_f1_keeps_the_pairing():
    gold = ["S", "N", "S", "N", "S", "N", "S", "S"]
    a = ["S", "S", "S", "N", "N", "N", "S", "N"]
    out = paired_macro_f1(gold, a, a, ["S", "N"], n_resamples=1000, seed=2)
    assert out["bootstrap"]["difference"] == 0.0
    assert (out["bootstrap"]["low"], out["bootstrap"]["high"]) == (0.0, 0.0)
    better = paired_macro_f1(gold, a, gold, ["S", "N"], n_resamples=2000, seed=2)
    assert better["b"] == 1.0 and better["a"] == pytest.approx(macro_f1(gold, a, ["S", "N"]))
    assert better["bootstrap"]["difference"] == pytest.approx(1.0 - better["a"])
    assert better["bootstrap"]["low"] >= 0.0 and better["bootstrap"]["share_not_positive"] < 0.05


def test_macro_f1_bad_input_is_rejected():
    with pytest.raises(ValueError, match="predicted label 0 is 'X'"):
        bootstrap_macro_f1(["S"], ["X"], ["S", "N"])
    with pytest.raises(ValueError, match="differ in length"):
        paired_macro_f1(["S", "N"], ["S", "N"], ["S"], ["S", "N"])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_macro_f1(["S"], ["S"], ["S", "N"], confidence=1.0)
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_macro_f1(["S", "N"], ["S"], ["S", "N"])
    with pytest.raises(ValueError, match="no claims"):
        paired_macro_f1([], [], [], ["S", "N"])
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_macro_f1(["S"], ["S"], ["S", "N"], n_resamples=0)
