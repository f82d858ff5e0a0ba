"""The learned claim-level aggregator: features, fitting, storage, and NLIVerifier using it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from garag.config import VerifierConfig
from garag.types import Evidence, Label, SentenceId
from verifier.claim_aggregator import (
    AGGREGATOR_FILE,
    ClaimAggregator,
    balanced_accuracy,
    claim_features,
    feature_names,
    fit_aggregator,
    read_aggregator,
)
from verifier.nli import NLIVerifier

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES


def _ev(page: str, line: int, text: str) -> Evidence:
    return Evidence(SentenceId(page, line), text)


def _named(values: np.ndarray, top_k: int) -> dict[str, float]:
    names = feature_names(top_k)
    assert len(values) == len(names)
    return dict(zip(names, values.tolist(), strict=True))


def test_features_of_a_known_claim() -> None:
    claim = "Oslo was founded in 1040."
    evidence = [
        _ev("Oslo", 0, "Oslo is the capital of Norway ."),  # covers "oslo" only
        _ev("Founding_of_Oslo", 2, "The city was founded in 1040 by Harald ."),  # title + text cover all
    ]
    probs = np.array([[0.2, 0.7, 0.1], [0.9, 0.05, 0.05]])  # LABEL_ORDER: S, N, R
    f = _named(claim_features(claim, evidence, probs, top_k=3), 3)
    assert [f["entail_rank1"], f["entail_rank2"], f["entail_rank3"]] == [0.2, 0.9, 0.0]
    assert [f["contra_rank1"], f["contra_rank2"], f["contra_rank3"]] == [0.1, 0.05, 0.0]
    assert f["entail_max"] == 0.9 and f["entail_second"] == 0.2 and f["contra_max"] == 0.1
    assert f["entail_sum"] == pytest.approx(1.1) and f["neutral_min"] == 0.05
    assert f["read_share"] == pytest.approx(2 / 3)
    # content words of the claim: oslo, founded, 1040 ("was", "in" are stop words)
    assert f["claim_coverage"] == 1.0
    assert f["claim_coverage_best_entail"] == 1.0  # the Founding_of_Oslo sentence with its title
    assert f["claim_coverage_best_contra"] == pytest.approx(1 / 3)  # best contradiction: Oslo 0
    assert f["claim_numbers_missing"] == 0.0 and f["claim_has_numbers"] == 1.0
    assert f["title_in_claim_best_entail"] == 0.5  # title words founding, oslo: half in the claim
    assert f["title_in_claim_best_contra"] == 1.0 and f["title_in_claim_max"] == 1.0
    assert f["best_entail_is_first"] == 0.0 and f["best_contra_is_first"] == 1.0


def test_features_without_evidence_and_beyond_top_k() -> None:
    f = _named(claim_features("Oslo was founded in 1040.", [], np.zeros((0, 3)), top_k=2), 2)
    assert f["neutral_min"] == 1.0 and f["entail_max"] == 0.0 and f["read_share"] == 0.0
    assert f["claim_numbers_missing"] == 1.0 and f["claim_has_numbers"] == 1.0
    ev = [_ev(f"P{i}", i, "x") for i in range(3)]
    probs = np.array([[0.1, 0.8, 0.1], [0.2, 0.6, 0.2], [0.99, 0.0, 0.01]])
    g = _named(claim_features("Oslo.", ev, probs, top_k=2), 2)
    assert g["entail_max"] == 0.2 and g["read_share"] == 1.0  # the third sentence is not read
    with pytest.raises(ValueError, match="2 evidence sentences but 3 probability rows"):
        claim_features("Oslo.", ev[:2], probs, top_k=2)


def _synthetic(n: int, seed: int) -> tuple[np.ndarray, list[Label]]:
    """Rows whose label is decided by entail_max vs contra_max, NEI when both are low."""
    rng = np.random.default_rng(seed)
    width = len(feature_names(1))
    x = rng.uniform(0, 1, size=(n, width)) * 0.1
    labels = []
    for row in x:
        kind = rng.integers(3)
        e, c = (
            (rng.uniform(0.7, 1), rng.uniform(0, 0.3))
            if kind == 0
            else (rng.uniform(0, 0.3), rng.uniform(0, 0.3))
        )
        if kind == 2:
            e, c = c, rng.uniform(0.7, 1)
        row[2], row[3] = e, c  # entail_max, contra_max for top_k=1
        labels.append((S, N, R)[kind])
    return x, labels


def test_fit_learns_a_separable_rule_and_is_deterministic() -> None:
    x, y = _synthetic(300, 0)
    agg = fit_aggregator(x, y, top_k=1)
    x2, y2 = _synthetic(200, 1)
    predicted = [(S, N, R)[i] for i in agg.predict_proba(x2).argmax(axis=1)]
    assert balanced_accuracy(y2, predicted) > 0.95
    assert np.allclose(agg.predict_proba(x2).sum(axis=1), 1.0)
    assert np.array_equal(fit_aggregator(x, y, top_k=1).weights, agg.weights)
    assert agg.info["examples"] == {lab.value: y.count(lab) for lab in (S, N, R)}


def test_prior_correction_equalises_class_shares() -> None:
    # Features carry no signal: the fitted intercepts learn the 1:2:1 shares and the correction cancels them.
    x = np.random.default_rng(0).normal(size=(400, len(feature_names(1))))
    y = [S] * 100 + [N] * 200 + [R] * 100
    agg = fit_aggregator(x, y, top_k=1, l2=1.0)
    assert agg.prior_correction.tolist() == pytest.approx((-np.log([0.25, 0.5, 0.25])).tolist())
    assert agg.predict_proba(np.zeros((1, x.shape[1])))[0] == pytest.approx([1 / 3] * 3, abs=0.02)
    with pytest.raises(ValueError, match="every class needs fitting examples"):
        fit_aggregator(x[:200], y[:200], top_k=1)
    with pytest.raises(ValueError, match="do not match"):
        fit_aggregator(x[:, :5], y, top_k=1)
    with pytest.raises(ValueError, match="need l2 > 0"):
        fit_aggregator(x, y, top_k=1, l2=0.0)


def test_save_and_read_round_trip(tmp_path: Path) -> None:
    x, y = _synthetic(90, 2)
    agg = fit_aggregator(x, y, top_k=1)
    assert read_aggregator(tmp_path) is None
    agg.save(tmp_path)
    back = read_aggregator(tmp_path)
    assert back is not None and np.array_equal(back.predict_proba(x), agg.predict_proba(x))
    obj = json.loads((tmp_path / AGGREGATOR_FILE).read_text())
    obj["weights"] = obj["weights"][:-1]
    with pytest.raises(ValueError, match="array shapes"):
        ClaimAggregator.from_json(obj, "bad.json")
    with pytest.raises(ValueError, match=r"bad.json: missing \['scale'\]"):
        ClaimAggregator.from_json({k: v for k, v in obj.items() if k != "scale"}, "bad.json")
    obj["version"] = 0
    (tmp_path / AGGREGATOR_FILE).write_text(json.dumps(obj))
    assert read_aggregator(tmp_path) is None  # another version: refitted by ensure_verifier
    (tmp_path / AGGREGATOR_FILE).write_text('{"version": 1, "top_k"')
    with pytest.raises(ValueError, match=f"{AGGREGATOR_FILE}: not valid JSON"):
        read_aggregator(tmp_path)


def test_balanced_accuracy() -> None:
    assert balanced_accuracy([S, S, S, N], [S, S, S, S]) == 0.5
    with pytest.raises(ValueError):
        balanced_accuracy([], [])


# NLIVerifier with an aggregator beside the toy classifier of conftest.


def _constant(top_k: int, label: Label) -> ClaimAggregator:
    """An aggregator that always answers ``label`` (zero weights, one large intercept)."""
    n = len(feature_names(top_k))
    weights = np.zeros((n + 1, 3))
    weights[-1, (S, N, R).index(label)] = 5.0
    return ClaimAggregator(top_k, np.zeros(n), np.ones(n), weights, np.zeros(3))


@pytest.fixture(scope="module")
def model_dir(trained) -> Path:
    return trained[0].model_dir


def test_verifier_uses_the_aggregator_beside_the_model(
    model_dir: Path, tmp_path: Path, make_evidence
) -> None:
    stacked = Path(shutil.copytree(model_dir, tmp_path / "stacked"))
    _constant(2, R).save(stacked)
    cfg = dict(mode="per_sentence", top_k=2, max_length=64)
    learned = NLIVerifier(VerifierConfig(**cfg), str(stacked)).load()
    rule = NLIVerifier(VerifierConfig(**cfg, aggregation="rule"), str(stacked)).load()
    assert (learned.aggregation, rule.aggregation) == ("learned", "rule")
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("Yes", 4, "Oslo", S)]
    by_rule = rule.verify("Oslo is famous.", evidence)
    by_learned = learned.verify("Oslo is famous.", evidence)
    assert by_rule.label is S
    assert by_learned.label is R and by_learned.scores[R] == pytest.approx(np.exp(5) / (np.exp(5) + 2))
    assert sum(by_learned.scores.values()) == pytest.approx(1.0)
    # The explanation names the most contradicting sentence (listed first) with its own probability,
    # which is the rule's score for REFUTES (the maximum contradiction).
    first = by_learned.evidence[0]
    assert by_learned.explanation.startswith(f"REFUTES (p={by_learned.scores[R]:.2f}): ")
    assert f"({first.page}, {first.line}) contradicts the claim (p={by_rule.scores[R]:.2f} alone" in (
        by_learned.explanation
    )
    assert "claim-level aggregator over 2 sentences" in by_learned.explanation


def test_the_aggregator_reads_probabilities_without_the_nei_bias(
    model_dir: Path, tmp_path: Path, make_evidence
) -> None:
    stacked = Path(shutil.copytree(model_dir, tmp_path / "stacked"))
    x, y = _synthetic(90, 3)
    fit_aggregator(np.hstack([x, np.zeros((90, len(feature_names(2)) - x.shape[1]))]), y, top_k=2).save(
        stacked
    )
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("Yes", 4, "Oslo", S)]
    verdicts = [
        NLIVerifier(VerifierConfig(top_k=2, max_length=64, nei_bias=bias), str(stacked))
        .load()
        .verify("Oslo is famous.", evidence)
        for bias in (0.0, 3.0)
    ]
    assert verdicts[0].scores == verdicts[1].scores and verdicts[0].label is verdicts[1].label


def test_nei_from_the_aggregator_names_the_closest_sentence(
    model_dir: Path, tmp_path: Path, make_evidence
) -> None:
    stacked = Path(shutil.copytree(model_dir, tmp_path / "stacked"))
    _constant(2, N).save(stacked)
    verifier = NLIVerifier(VerifierConfig(mode="per_sentence", top_k=2, max_length=64), str(stacked)).load()
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("Yes", 4, "Oslo", S)]
    verdict = verifier.verify("Oslo is famous.", evidence)
    assert verdict.label is N
    assert "no evidence sentence decides the claim" in verdict.explanation
    assert "closest: (Yes, 4), entailment p=" in verdict.explanation
    assert verdict.evidence == (SentenceId("Hist", 0), SentenceId("Yes", 4))  # retrieval order for NEI


def test_aggregation_setting(model_dir: Path, tmp_path: Path) -> None:
    # auto without an aggregator: the rule; learned without one: a clear error.
    assert (
        NLIVerifier(VerifierConfig(mode="per_sentence", max_length=64), str(model_dir)).load().aggregation
        == "rule"
    )
    with pytest.raises(
        ValueError, match="'learned' but no claim-level aggregator at .*garag_aggregator.json"
    ):
        NLIVerifier(
            VerifierConfig(mode="per_sentence", aggregation="learned", max_length=64), str(model_dir)
        ).load()
    stacked = Path(shutil.copytree(model_dir, tmp_path / "stacked"))
    _constant(3, S).save(stacked)
    assert NLIVerifier(VerifierConfig(top_k=2, max_length=64), str(stacked)).load().aggregation == "rule"
    with pytest.raises(ValueError, match="fitted for top_k=3, verifier.top_k is 2"):
        NLIVerifier(VerifierConfig(top_k=2, aggregation="learned", max_length=64), str(stacked)).load()
    assert NLIVerifier(VerifierConfig(top_k=3, max_length=64), str(stacked)).load().aggregation == "learned"
    with pytest.raises(ValueError, match="verifier.aggregation"):
        VerifierConfig(aggregation="mean")
