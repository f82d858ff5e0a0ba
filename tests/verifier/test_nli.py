"""NLIVerifier on the toy classifier trained in conftest, loaded by path like a hub checkpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from garag.config import VerifierConfig
from garag.types import Evidence, Label, SentenceId, Verdict
from verifier.base import Verifier
from verifier.calibration import CALIBRATION_FILE, apply_nei_bias
from verifier.inputs import build_premise, encode_pairs, evidence_text
from verifier.nli import ModelUnavailableError, NLIVerifier

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES
CITE = re.compile(r"\(([^(),]+), (\d+)\)")


@pytest.fixture(scope="module")
def model_dir(trained) -> Path:
    return trained[0].model_dir


@pytest.fixture(scope="module")
def concat(model_dir: Path) -> NLIVerifier:
    return NLIVerifier(VerifierConfig(mode="concat", max_length=64, batch_size=4), str(model_dir)).load()


@pytest.fixture(scope="module")
def per_sentence(model_dir: Path) -> NLIVerifier:
    config = VerifierConfig(mode="per_sentence", max_length=64, batch_size=4, min_confidence=0.5)
    return NLIVerifier(config, str(model_dir)).load()


def _cited(text: str) -> list[SentenceId]:
    return [SentenceId(page, int(line)) for page, line in CITE.findall(text)]


def test_is_a_verifier_and_reads_fever_labels(concat: NLIVerifier) -> None:
    assert isinstance(concat, Verifier)
    assert concat.index_to_label == {0: S, 1: N, 2: R}
    assert concat.device == ("cuda" if torch.cuda.is_available() else "cpu")  # "auto", resolved at load


def test_concat_verdicts_follow_the_evidence(concat: NLIVerifier, make_evidence) -> None:
    # Unseen subjects and pages: the toy model must have learned "yes" / "no" / neither.
    cases = {
        S: [make_evidence("Yes_Page", 3, "Madrid", S), make_evidence("Other", 1, "Madrid", N)],
        R: [make_evidence("No_Page", 2, "Madrid", R)],
        N: [make_evidence("History", 0, "Madrid", N), make_evidence("More", 5, "Lisbon", N)],
    }
    verdicts = concat.verify_batch(["Madrid is famous."] * 3, list(cases.values()))
    for (want, evidence), verdict in zip(cases.items(), verdicts, strict=True):
        assert isinstance(verdict, Verdict)
        assert verdict.label is want
        assert set(verdict.scores) == {S, N, R}
        assert sum(verdict.scores.values()) == pytest.approx(1.0, abs=1e-6)
        assert max(verdict.scores, key=verdict.scores.get) is want
        assert verdict.evidence == tuple(e.sentence for e in evidence)
        assert verdict.explanation.startswith(f"{want.value} (p={verdict.scores[want]:.2f}):")
        assert _cited(verdict.explanation) == [e.sentence for e in evidence[:2]]


def test_verify_equals_verify_batch(concat: NLIVerifier, make_evidence) -> None:
    evidence = [make_evidence("P", 1, "Oslo", R)]
    one = concat.verify("Oslo is famous.", evidence)
    many = concat.verify_batch(["Oslo is famous."], [evidence])[0]
    assert one.label is many.label
    assert one.scores == pytest.approx(many.scores)


def test_concat_reads_only_top_k(model_dir: Path, make_evidence) -> None:
    verifier = NLIVerifier(VerifierConfig(mode="concat", top_k=1, max_length=64), str(model_dir)).load()
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("Yes", 1, "Oslo", S)]
    verdict = verifier.verify("Oslo is famous.", evidence)
    assert verdict.label is N  # the supporting sentence is ranked second and not read
    assert verdict.evidence == (SentenceId("Hist", 0), SentenceId("Yes", 1))
    assert "(1 sentence read together)" in verdict.explanation


def test_concat_sentence_probs_explanation(concat: NLIVerifier, make_evidence) -> None:
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("Yes", 4, "Oslo", S)]
    verdict = concat.verify("Oslo is famous.", evidence, sentence_probs=True)
    assert verdict.label is S
    assert "strongest single sentence:" in verdict.explanation
    assert _cited(verdict.explanation) == [SentenceId("Yes", 4)]


def test_per_sentence_puts_the_deciding_sentence_first(per_sentence: NLIVerifier, make_evidence) -> None:
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("Other", 2, "Rome", N)]
    evidence.insert(1, make_evidence("No_Page", 7, "Oslo", R))
    verdict = per_sentence.verify("Oslo is famous.", evidence)
    assert verdict.label is R
    assert verdict.evidence == (SentenceId("No_Page", 7), SentenceId("Hist", 0), SentenceId("Other", 2))
    assert verdict.explanation.startswith(f"REFUTES (p={verdict.scores[R]:.2f}): ")
    assert _cited(verdict.explanation) == [SentenceId("No_Page", 7)]
    assert '"About Oslo the answer is no."' in verdict.explanation
    assert verdict.scores[R] > 0.5 > verdict.scores[S]
    assert verdict.scores[N] == pytest.approx(1 - verdict.scores[R])


def test_per_sentence_nei(per_sentence: NLIVerifier, make_evidence) -> None:
    evidence = [make_evidence("Hist", 0, "Oslo", N), make_evidence("More", 1, "Rome", N)]
    verdict = per_sentence.verify("Oslo is famous.", evidence)
    assert verdict.label is N
    assert verdict.evidence == (SentenceId("Hist", 0), SentenceId("More", 1))
    assert "none of the 2 evidence sentences" in verdict.explanation


def test_no_evidence_is_nei(concat: NLIVerifier, per_sentence: NLIVerifier, make_evidence) -> None:
    for verifier in (concat, per_sentence):
        before = verifier.pairs_scored + verifier.pairs_remembered
        verdicts = verifier.verify_batch(
            ["Oslo is famous.", "Rome is famous."], [[], [make_evidence("Y", 1, "Rome", S)]]
        )
        assert verdicts[0].label is N
        assert verdicts[0].evidence == ()
        assert "no evidence" in verdicts[0].explanation
        assert verdicts[0].scores == {S: 0.0, N: 1.0, R: 0.0}
        assert verdicts[1].label is S
        # nothing was scored for the empty claim
        assert verifier.pairs_scored + verifier.pairs_remembered == before + 1


def test_a_pair_scored_again_is_remembered_with_the_same_probabilities(per_sentence: NLIVerifier) -> None:
    premises, claims = ["Oslo is a city in Norway .", "Rome is old ."], ["Oslo is in Norway.", "Rome is new."]
    first = per_sentence.predict_pairs(premises, claims)
    scored, remembered = per_sentence.pairs_scored, per_sentence.pairs_remembered
    again = per_sentence.predict_pairs([premises[1], "Bern is Swiss ."], [claims[1], "Bern is Swiss."])
    assert again[0].tolist() == first[1].tolist()
    assert (per_sentence.pairs_scored, per_sentence.pairs_remembered) == (scored + 1, remembered + 1)


def test_evidence_is_capped_at_five_and_deduplicated(concat: NLIVerifier, make_evidence) -> None:
    evidence = [make_evidence(f"P{i}", i, "Oslo", N) for i in range(7)]
    evidence.insert(1, evidence[0])
    verdict = concat.verify("Oslo is famous.", evidence)
    assert verdict.evidence == tuple(SentenceId(f"P{i}", i) for i in range(5))


def test_bad_input(concat: NLIVerifier, make_evidence) -> None:
    with pytest.raises(ValueError, match="2 claims but 1 evidence"):
        concat.verify_batch(["a", "b"], [[]])
    with pytest.raises(ValueError, match="claim 0 is empty"):
        concat.verify(" ", [make_evidence("P", 0, "Oslo", S)])


def test_not_loaded(model_dir: Path) -> None:
    with pytest.raises(RuntimeError, match="load"):
        NLIVerifier(VerifierConfig(), str(model_dir)).verify("x", [])
    with pytest.raises(RuntimeError, match="load"):
        _ = NLIVerifier(VerifierConfig(), str(model_dir)).device


def test_missing_local_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        NLIVerifier(VerifierConfig(), str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="empty model path"):
        NLIVerifier(VerifierConfig(), "")


def _copy_model(model_dir: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in model_dir.iterdir():
        if f.is_file():
            (dest / f.name).write_bytes(f.read_bytes())
    return dest


def test_calibrated_nei_bias(concat: NLIVerifier, model_dir: Path, tmp_path: Path, make_evidence) -> None:
    calibrated = _copy_model(model_dir, tmp_path / "calibrated")
    (calibrated / CALIBRATION_FILE).write_text(json.dumps({"nei_bias": 2.0}))
    biased = NLIVerifier(VerifierConfig(mode="concat", max_length=64), str(calibrated)).load()
    assert concat.nei_bias == 0.0 and biased.nei_bias == 2.0
    evidence = [make_evidence("Yes", 1, "Oslo", S)]
    plain, shifted = (
        concat.verify("Oslo is famous.", evidence).scores,
        biased.verify("Oslo is famous.", evidence).scores,
    )
    expected = apply_nei_bias(np.array([[plain[S], plain[N], plain[R]]]), 2.0)[0]
    assert [shifted[S], shifted[N], shifted[R]] == pytest.approx(expected.tolist())
    assert shifted[N] > plain[N]
    # An explicit verifier.nei_bias wins; per_sentence mode ignores the concat calibration.
    assert NLIVerifier(VerifierConfig(nei_bias=0.5, max_length=64), str(calibrated)).load().nei_bias == 0.5
    assert (
        NLIVerifier(VerifierConfig(mode="per_sentence", max_length=64), str(calibrated)).load().nei_bias
        == 0.0
    )


def test_anonymous_labels_need_label_map(tiny_base: Path, tmp_path: Path, model_dir: Path) -> None:
    # The same trained weights, re-saved with LABEL_0.. names as many hub checkpoints have.
    anonymous = _copy_model(model_dir, tmp_path / "anonymous")
    config = json.loads((anonymous / "config.json").read_text())
    config["id2label"] = {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    config["label2id"] = {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}
    (anonymous / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"verifier\.label_map"):
        NLIVerifier(VerifierConfig(max_length=64), str(anonymous)).load()
    label_map = {"LABEL_0": "SUPPORTS", "LABEL_1": "NOT ENOUGH INFO", "LABEL_2": "REFUTES"}
    verifier = NLIVerifier(VerifierConfig(label_map=label_map, max_length=64), str(anonymous)).load()
    assert verifier.index_to_label == {0: S, 1: N, 2: R}


def test_bare_encoder_is_rejected(tiny_base: Path) -> None:
    with pytest.raises(ValueError, match="no trained classification head"):
        NLIVerifier(VerifierConfig(max_length=64), str(tiny_base)).load()


def test_premise_text() -> None:
    ev = [
        Evidence(
            SentenceId("Liverpool_-LRB-band-RRB-", 0), "The band -LRB- formed 1960 -RRB- is n't famous ."
        ),
        Evidence(SentenceId("Beatles", 2), "They came from Liverpool ."),
    ]
    assert evidence_text(ev[0]) == "Liverpool (band): The band (formed 1960) isn't famous."
    assert (
        build_premise(ev)
        == "Liverpool (band): The band (formed 1960) isn't famous. Beatles: They came from Liverpool."
    )
    assert build_premise(ev, top_k=1) == evidence_text(ev[0])
    assert build_premise([]) == ""


def test_encode_pairs_truncates_the_premise_not_the_claim(tiny_base: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_base))
    claim = "Oslo is the capital of Norway."
    long_premise = "Oslo: " + "The city has many parks and museums. " * 30
    enc = encode_pairs(tokenizer, [long_premise, "Oslo: short."], [claim, claim], max_length=32)
    assert enc["input_ids"].shape == (2, 32)
    decoded = tokenizer.decode(enc["input_ids"][0], skip_special_tokens=True)
    assert decoded.endswith("oslo is the capital of norway.")
    assert enc["attention_mask"][1].sum() < 32  # dynamic padding for the short pair
    # A claim longer than half the budget is shortened rather than failing.
    long_claim = "word " * 40
    enc = encode_pairs(tokenizer, ["Oslo: short premise."], [long_claim], max_length=32)
    assert enc["input_ids"].shape == (1, 32)


def test_max_length_beyond_the_models_positions_is_refused(model_dir: Path) -> None:
    # The tiny model embeds 64 positions: 128 used to crash on the first long input.
    refused = NLIVerifier(VerifierConfig(mode="concat", max_length=128), str(model_dir))
    with pytest.raises(ValueError, match=r"^verifier\.max_length: 128 tokens exceed the 64 positions of "):
        refused.load()
    with pytest.raises(RuntimeError, match=r"load\(\) must be called before use"):
        refused.predict_pairs(["Oslo is a city."], ["Oslo is in Norway."])  # half-loaded: refused, not used
    fits = NLIVerifier(VerifierConfig(mode="concat", max_length=64), str(model_dir)).load()
    huge = "word " * 20_000  # a 100 KB claim is cut to the model's positions, not a crash
    probs = fits.predict_pairs(["Oslo is a city."], [huge])
    assert probs.shape == (1, 3)


def test_bfloat16_precision_gives_the_float32_verdicts_closely(
    model_dir: Path, concat: NLIVerifier, make_evidence
) -> None:
    half = NLIVerifier(
        VerifierConfig(mode="concat", max_length=64, batch_size=4, precision="bfloat16"), str(model_dir)
    ).load()
    assert next(half._model.parameters()).dtype is torch.bfloat16
    assert next(concat._model.parameters()).dtype is torch.float32
    claims = ["Madrid is famous.", "Oslo is famous.", "Lima is famous."]
    evidence = [
        [make_evidence("Yes_Page", 3, "Madrid", S)],
        [make_evidence("No_Page", 2, "Oslo", R)],
        [make_evidence("History", 0, "Lima", N)],
    ]
    full, bf = concat.verify_batch(claims, evidence), half.verify_batch(claims, evidence)
    assert [v.label for v in bf] == [v.label for v in full] == [S, R, N]
    for a, b in zip(full, bf, strict=True):
        assert b.scores == pytest.approx(a.scores, abs=0.05)  # bfloat16 keeps 8 bits of mantissa
        assert sum(b.scores.values()) == pytest.approx(1.0, abs=1e-6)  # the softmax runs in float32
    # the precision is the setting's, not the checkpoint's: the float32 files are untouched
    again = NLIVerifier(VerifierConfig(mode="concat", max_length=64), str(model_dir)).load()
    assert [v.scores for v in again.verify_batch(claims, evidence)] == [v.scores for v in full]


def test_cpu_has_amx_bf16_reads_the_flags(tmp_path: Path) -> None:
    from verifier.nli import cpu_has_amx_bf16

    amx = tmp_path / "amx"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f amx_bf16 amx_tile\n\nprocessor\t: 1\n")
    avx2 = tmp_path / "avx2"
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n")
    bf16 = tmp_path / "bf16"
    bf16.write_text("flags : avx512f avx512_bf16\n")
    no_flags = tmp_path / "arm"
    no_flags.write_text("processor : 0\nFeatures : fp asimd\n")
    assert cpu_has_amx_bf16(str(amx)) is True
    assert cpu_has_amx_bf16(str(bf16)) is False  # AVX512-BF16 alone: slower than float32
    assert cpu_has_amx_bf16(str(avx2)) is False
    assert cpu_has_amx_bf16(str(no_flags)) is None
    assert cpu_has_amx_bf16(str(tmp_path / "missing")) is None
