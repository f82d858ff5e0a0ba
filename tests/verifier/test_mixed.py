"""MixedVerifier on two real toy classifiers (the conftest model read with two NEI biases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from garag.config import VerifierConfig
from garag.types import Label, SentenceId, Verdict
from verifier.labels import LABEL_ORDER
from verifier.mixed import MixedVerifier
from verifier.nli import NLIVerifier

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES


@pytest.fixture(scope="module")
def pair(trained) -> tuple[NLIVerifier, NLIVerifier]:
    model = str(Path(trained[0].model_dir))
    plain = NLIVerifier(
        VerifierConfig(mode="concat", max_length=64, batch_size=4, nei_bias=0.0), model
    ).load()
    # the same weights leaning hard to NEI: a second verifier that disagrees on evidence-backed claims
    nei = NLIVerifier(VerifierConfig(mode="concat", max_length=64, batch_size=4, nei_bias=6.0), model).load()
    return plain, nei


@pytest.fixture(scope="module")
def cases(make_evidence) -> tuple[list[str], list]:
    claims = ["Madrid is famous.", "Lisbon is famous.", "Rome is famous."]
    evidence = [
        [make_evidence("Yes_Page", 3, "Madrid", S)],
        [make_evidence("No_Page", 2, "Lisbon", R)],
        [],  # nothing read
    ]
    return claims, evidence


def test_the_weights_ends_give_each_verifier_back(pair, cases) -> None:
    plain, nei = pair
    claims, evidence = cases
    for weight, alone in ((0.0, plain), (1.0, nei)):
        mixed = MixedVerifier(plain, nei, weight).verify_batch(claims, evidence)
        for m, v in zip(mixed, alone.verify_batch(claims, evidence), strict=True):
            assert m.label is v.label
            if v.scores:
                assert m.scores == pytest.approx(v.scores)


def test_a_mix_averages_the_scores_and_takes_the_likeliest_label(pair, cases) -> None:
    plain, nei = pair
    claims, evidence = cases
    a, b = plain.verify_batch(claims, evidence), nei.verify_batch(claims, evidence)
    assert a[0].label is S and b[0].label is N  # the two disagree on the supported claim
    mixed = MixedVerifier(plain, nei, 0.3).verify_batch(claims, evidence)
    for m, x, y in zip(mixed[:2], a[:2], b[:2], strict=True):
        want = {lab: 0.7 * x.scores[lab] + 0.3 * y.scores[lab] for lab in LABEL_ORDER}
        assert m.scores == pytest.approx(want)
        assert m.label is max(want, key=want.get)
        source = x if m.label is x.label or y.label is not m.label else y
        assert m.evidence == source.evidence  # the evidence of a verifier that says the same
        assert m.explanation.startswith(f"{m.label.value} (p=")
        assert x.label.value in m.explanation and y.label.value in m.explanation
    assert mixed[2] == a[2]  # no evidence: the first verifier's verdict, unmixed


def test_a_weight_outside_zero_to_one_is_refused(pair) -> None:
    with pytest.raises(ValueError, match="outside"):
        MixedVerifier(*pair, 1.5)


def test_a_per_sentence_verifier_deciding_by_the_rule_is_refused(trained) -> None:
    # the toy model has no claim aggregator beside it: per_sentence falls back to the rule
    config = VerifierConfig(mode="per_sentence", max_length=64, batch_size=4, nei_bias=0.0)
    rule = NLIVerifier(config, str(Path(trained[0].model_dir))).load()
    assert rule.aggregation == "rule"
    concat = NLIVerifier(VerifierConfig(mode="concat", max_length=64), str(Path(trained[0].model_dir))).load()
    with pytest.raises(ValueError, match="second verifier .* rule aggregator"):
        MixedVerifier(concat, rule, 0.5)


class _FixedVerifier:
    """A fake verifier (named as such): one fixed verdict per call, so that the mixed verdict's choice
    of evidence and explanation can be told apart; the real models above give both the same evidence."""

    def __init__(self, label: Label, scores: tuple[float, float, float], page: str) -> None:
        self.verdict = Verdict(
            label,
            f"{label.value} because of ({page}, 0).",
            (SentenceId(page, 0),),
            dict(zip(LABEL_ORDER, scores, strict=True)),
        )

    def verify_batch(self, claims, evidence):  # noqa: ANN001, ANN201
        return [self.verdict for _ in claims]


def test_the_evidence_and_explanation_come_from_a_verifier_that_agrees(make_evidence) -> None:
    ev = [[make_evidence("P", 0, "Madrid", S)]]
    first = _FixedVerifier(S, (0.6, 0.3, 0.1), "First")  # LABEL_ORDER: SUPPORTS, NEI, REFUTES
    second = _FixedVerifier(R, (0.1, 0.2, 0.7), "Second")
    agrees_first = MixedVerifier(first, second, 0.2).verify_batch(["c"], ev)[0]
    assert agrees_first.label is S and agrees_first.evidence == (SentenceId("First", 0),)
    agrees_second = MixedVerifier(first, second, 0.8).verify_batch(["c"], ev)[0]
    assert agrees_second.label is R and agrees_second.evidence == (SentenceId("Second", 0),)
    assert agrees_second.explanation.endswith("REFUTES because of (Second, 0).")
    assert "SUPPORTS p=0.60, REFUTES p=0.70" in agrees_second.explanation
    # neither says NEI, the mix does: the first verifier's evidence, under the mixed label's head
    third = _FixedVerifier(R, (0.0, 0.5, 0.5), "Third")
    first_nei = _FixedVerifier(S, (0.5, 0.5, 0.0), "First")
    neither = MixedVerifier(first_nei, third, 0.5).verify_batch(["c"], ev)[0]
    assert neither.label is N and neither.evidence == (SentenceId("First", 0),)
    assert neither.explanation.startswith("NOT ENOUGH INFO (p=0.50")


def test_the_second_verifier_reads_as_many_sentences_as_the_first(pair, cases) -> None:
    plain, nei = pair
    claims, evidence = cases
    mixed = MixedVerifier(plain, nei, 0.5)
    before = plain.config.top_k
    try:
        plain.config.top_k = 1  # as the service sets it for one request
        mixed.verify_batch(claims, evidence)
        assert nei.config.top_k == 1
    finally:
        plain.config.top_k = nei.config.top_k = before
