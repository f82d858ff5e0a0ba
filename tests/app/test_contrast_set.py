"""``garag contrast`` then ``garag evaluate`` on the tiny corpus: the claims file holds every claim and
its twins with the claim's gold evidence, and the evaluation reports them per change type, with the
pairs both right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from garag.claims import read_fever_claims
from garag.types import ContrastOf


@pytest.fixture(scope="module")
def made(tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path_factory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("contrast")
    config = predict_config(root, tiny_claims, tiny_corpus)
    out = root / "contrast.jsonl"
    assert main(["contrast", "--config", str(config), "--out", str(out), "--no-progress"]) == 0
    return config, out, {c.id: c for c in read_fever_claims(out)}


def test_every_claim_and_its_twins_with_the_claims_evidence(made, tiny_claims: Path) -> None:
    _, _, claims = made
    originals = list(read_fever_claims(tiny_claims))
    assert [claims[c.id].contrast for c in originals] == [ContrastOf("original", c.id) for c in originals]
    twins = [c for c in claims.values() if c.contrast.change != "original"]
    assert twins
    for twin in twins:
        source = claims[twin.contrast.source]
        assert twin.id == f"{source.id}~{twin.contrast.change}" and twin.text != source.text
        if twin.label != "NOT ENOUGH INFO":
            assert twin.evidence == source.evidence
    assert {c.id: (c.label, c.text) for c in twins} == {
        "1~negation": ("REFUTES", "The Beatles were not formed in Liverpool."),
        "2~negation": ("REFUTES", "The Beatles were not formed in England."),
        "3~negation_removed": ("SUPPORTS", "Sandra Bullock was a producer."),
        "4~negation": ("SUPPORTS", "Snowpiercer is not a romantic comedy."),
        "5~negation": ("NOT ENOUGH INFO", "Paul McCartney does not own a horse farm in Wales."),
        "6~negation": ("REFUTES", "John Lennon wasn't born in 1940."),
        "6~number": ("REFUTES", "John Lennon was born in 1937."),
        "6~relation": ("REFUTES", "John Lennon died in 1940."),
    }


def test_evaluate_reports_the_contrast_set(made, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, out, claims = made
    run = tmp_path / "run"
    argv = ["evaluate", "--config", str(config), "--set", f"data.claims={out}", "--out", str(run)]
    assert main([*argv, "--no-progress"]) == 0
    assert "Contrast set (changes that keep every name)" in capsys.readouterr().out
    metrics = json.loads((run / "metrics.json").read_text())
    contrast = metrics["contrast"]
    twins = [c for c in claims.values() if c.contrast.change != "original"]
    assert contrast["changed"]["n"] == len(twins)
    assert contrast["by_change"]["original"]["n"] == len(claims) - len(twins)
    pairs = contrast["pairs"]
    assert pairs["n"] == len(twins)
    # every twin is counted once, where its claim is right or where it is wrong, and the pairs both
    # right are the twins right where their claim is
    right, wrong = pairs["if_original_right"], pairs["if_original_wrong"]
    assert right["n"] + wrong["n"] == len(twins)
    assert round(pairs["consistent"] * pairs["n"]) == round((right["accuracy"] or 0) * right["n"])


def test_an_unknown_kind_is_one_line(made, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, _, _ = made
    out = str(tmp_path / "x.jsonl")
    assert main(["contrast", "--config", str(config), "--out", out, "--kinds", "negation,typo"]) == 2
    assert "--kinds: expected names among negation, negation_removed" in capsys.readouterr().err
