"""Reasoning programs through the real pipeline (BM25 + the tiny trained classifier, real spaCy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

MULTI = [  # claims of several clauses over the fixture pages
    {"id": 7, "verifiable": "VERIFIABLE", "label": "SUPPORTS",
     "claim": "The Beatles, who were formed in Liverpool, were an English rock band.",
     "evidence": [[[7, 7, "The_Beatles", 0]]]},
    {"id": 8, "verifiable": "VERIFIABLE", "label": "REFUTES",
     "claim": "John Lennon was born in 1940 and Snowpiercer is a romantic comedy.",
     "evidence": [[[8, 8, "John_Lennon", 0], [8, 8, "Snowpiercer", 0]]]},
]  # fmt: skip


@pytest.fixture(scope="module")
def config(tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("programs")
    claims = root / "claims.jsonl"
    extra = "".join(json.dumps(c) + "\n" for c in MULTI)
    claims.write_text(tiny_claims.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return predict_config(root, claims, tiny_corpus)


@pytest.mark.parametrize("verify_claim", [True, False])
def test_predictions_carry_programs_whose_steps_decide_the_label(config: Path, tmp_path: Path, verify_claim):
    out = tmp_path / "run"
    flag = f"reasoning.verify_claim={str(verify_claim).lower()}"
    args = ["predict", "--config", str(config), "--no-progress", "--out", str(out),
            "--set", "reasoning.programs=rule", "--set", flag]  # fmt: skip
    assert main(args) == 0
    records = [json.loads(line) for line in (out / "predictions.jsonl").open(encoding="utf-8")]
    assert records and all("program" in r for r in records)
    split = 0
    for r in records:
        prog = r["program"]
        verify = [s for s in prog["steps"] if s["kind"] == "verify"]
        assert verify and prog["source"] == "rule" and r["predicted_label"] == prog["label"]
        labels = [s["label"] for s in verify] + ([prog["claim_verdict"]] if prog["claim_verdict"] else [])
        if "REFUTES" in labels:
            assert r["predicted_label"] == "REFUTES"
        elif all(lab == "SUPPORTS" for lab in labels):
            assert r["predicted_label"] == "SUPPORTS"
        else:
            assert r["predicted_label"] == "NOT ENOUGH INFO"
        assert r["explanation"].startswith("Program (rule): fact_1:")
        assert all(f"{s['var']}: " in r["explanation"] for s in verify)
        if len(verify) > 1:
            split += 1
            assert all(s["read"] for s in verify)  # each step read its own retrieved evidence
        if verify_claim and len(verify) > 1:
            assert prog["claim_verdict"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
        if not verify_claim:
            assert prog["claim_verdict"] is None
        assert "reasoning" in r["seconds"]
    assert split >= 1, "some fixture claim has more than one clause"


def test_union_programs_verify_the_claim_once_on_every_step_evidence(config: Path, tmp_path: Path):
    out = tmp_path / "run"
    args = ["predict", "--config", str(config), "--no-progress", "--out", str(out),
            "--set", "reasoning.programs=rule", "--set", "reasoning.combine=union"]  # fmt: skip
    assert main(args) == 0
    records = [json.loads(line) for line in (out / "predictions.jsonl").open(encoding="utf-8")]
    multi = [r for r in records if len([s for s in r["program"]["steps"] if s["kind"] == "verify"]) > 1]
    assert multi
    for r in records:
        prog = r["program"]
        assert prog["combine"] == "union" and r["predicted_label"] == prog["label"]
        assert r["evidence_read"] == prog["read"] and len(r["evidence_read"]) <= 3  # verifier.top_k
        assert r["explanation"].startswith("Program (rule; the claim read with every step's evidence)")
    for r in multi:  # every step's best sentence is among what the verifier read
        read = {tuple(x) for x in r["evidence_read"]}
        for s in r["program"]["steps"]:
            if s["kind"] == "verify" and s["read"]:
                assert tuple(s["read"][0]) in read
