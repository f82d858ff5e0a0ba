"""The Python API (``garag.load(...).verify``) and ``garag verify`` on the real indexes of the tiny
corpus, with the tiny classifier trained on the fixture claims' premises; and that building a
pipeline never trains a verifier."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import garag
from app.cli import main
from garag.config import load_config
from garag.types import Label, SentenceId
from pipeline.verification import VerificationPipeline
from verifier.trained import VerifierNotTrainedError, verifier_artifact_dir

BEATLES = "The Beatles were formed in Liverpool."


@pytest.fixture(scope="module")
def config_file(tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path_factory) -> Path:
    return predict_config(tmp_path_factory.mktemp("api"), tiny_claims, tiny_corpus)


@pytest.fixture(scope="module")
def checker(config_file: Path) -> garag.FactChecker:
    return garag.load(config_file)


def test_verify_returns_a_typed_verdict_with_the_evidence_text(checker: garag.FactChecker) -> None:
    verdict = checker.verify(BEATLES)
    assert isinstance(verdict, garag.ClaimVerdict)
    assert verdict.claim == BEATLES and verdict.label in set(Label)
    assert verdict.explanation and verdict.evidence
    store = checker.pipeline.store
    for e in verdict.evidence:
        stored = store.get(SentenceId(e.page, e.line))
        assert stored is not None and e.raw_text == stored.text
        assert "-LRB-" not in e.text and "-RRB-" not in e.text
    assert set(verdict.scores) == {label.value for label in Label}
    assert all(0 <= p <= 1 for p in verdict.scores.values())
    assert {"retrieval", "verification", "total"} <= set(verdict.timings)


def test_the_api_says_what_the_pipeline_says(checker: garag.FactChecker, tiny_claims: Path) -> None:
    claims = list(checker.pipeline.dataset.claims())
    verdicts = checker.verify_many([c.text for c in claims], batch_size=4)
    direct = checker.pipeline.run(claims)
    assert [v.label for v in verdicts] == [r.verdict.label for r in direct]
    assert [[(e.page, e.line) for e in v.evidence] for v in verdicts] == [
        [(s.page, s.line) for s in r.verdict.evidence] for r in direct
    ]
    assert [v.claim for v in verdicts] == [c.text for c in claims]


def test_bad_claims_are_named(checker: garag.FactChecker) -> None:
    with pytest.raises(ValueError, match="claim 2: expected a non-empty string"):
        checker.verify_many([BEATLES, "  "])
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        checker.verify_many([BEATLES], batch_size=0)


def test_the_cli_prints_label_explanation_and_evidence_ids(
    config_file: Path, checker: garag.FactChecker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", BEATLES, "--config", str(config_file), "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    expected = checker.verify(BEATLES)
    assert out[0] == f"{expected.label.value}: {BEATLES}"
    assert out[1].strip() == expected.explanation
    assert out[2:] == [f"  [{e.page}, {e.line}] {e.text}" for e in expected.evidence]


def test_the_cli_reads_claims_from_stdin_and_writes_json_lines(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{BEATLES}\n\nSnowpiercer is a romantic comedy.\n"))
    assert main(["verify", "--json", "--config", str(config_file), "--no-progress"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["claim"] for r in rows] == [BEATLES, "Snowpiercer is a romantic comedy."]
    for r in rows:
        assert r["label"] in {label.value for label in Label}
        assert all({"page", "line", "text", "raw_text"} == set(e) for e in r["evidence"])


def test_the_cli_without_a_claim_says_so_in_one_line(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n  \n"))
    assert main(["verify", "--config", str(config_file)]) == 2
    assert capsys.readouterr().err.strip() == "garag: error: stdin: no claim (one per line expected)"


def test_building_a_pipeline_never_trains(config_file: Path) -> None:
    """Without ``verifier.model`` the config's own verifier is untrained here: building refuses in
    one line naming the command that trains it, and no verifier folder appears."""
    config = load_config(config_file, ["verifier.model="])
    with pytest.raises(VerifierNotTrainedError, match="no trained verifier .* run garag train-verifier"):
        VerificationPipeline(config, progress=False).build()
    assert not verifier_artifact_dir(config).exists()
    with pytest.raises(VerifierNotTrainedError):
        garag.load(config)
