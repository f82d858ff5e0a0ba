"""MixedVerifier on two real toy classifiers (the conftest model read with two NEI biases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from garag.config import VerifierConfig
from garag.types import Label
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
