"""Prediction runs know what they were made from, have one writer, and never rewrite what they read.

Every case runs the real CLI (``garag predict`` / ``evaluate``) on the fixture corpus with the
real tiny classifier trained on the fixture claims.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("integrity")
    corpus = root / "corpus"
    shutil.copytree(tiny_corpus, corpus)
    claims = root / "claims.jsonl"
    shutil.copy(tiny_claims, claims)
    return {"root": root, "config": predict_config(root, claims, corpus), "claims": claims, "corpus": corpus}


def _cli(world: dict, *argv: str) -> int:
    return main([*argv[:1], "--config", str(world["config"]), "--no-progress", *argv[1:]])


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("garag: error:")]
    assert len(err) == 1, err
    return err[0]


def test_changed_claims_are_refused_until_force_new(world: dict, capsys) -> None:
    out = world["root"] / "run-claims"
    assert _cli(world, "predict", "--out", str(out)) == 0
    first = (out / "predictions.jsonl").read_bytes()
    original = world["claims"].read_bytes()
    try:
        lines = original.decode("utf-8").splitlines(keepends=True)
        record = json.loads(lines[0])
        record["claim"] = "The Beatles were formed in Hamburg."  # same id, other text
        world["claims"].write_text(json.dumps(record) + "\n" + "".join(lines[1:]), encoding="utf-8")
        edited = world["claims"].read_bytes()
        capsys.readouterr()
        assert _cli(world, "predict", "--out", str(out)) == 2
        message = _one_error_line(capsys)
        assert "holds predictions made from other settings or inputs (claims differ)" in message
        assert "--force-new" in message
        assert world["claims"].read_bytes() == edited and (out / "predictions.jsonl").read_bytes() == first
        assert _cli(world, "predict", "--out", str(out), "--force-new") == 0
        stale = sorted(out.glob("predictions.stale-*.jsonl"))
        assert len(stale) == 1 and stale[0].read_bytes() == first
        again = [json.loads(x) for x in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
        assert len(again) == len(lines) and again[0]["claim"] == "The Beatles were formed in Hamburg."
    finally:
        world["claims"].write_bytes(original)


def test_changed_corpus_is_refused(world: dict, capsys) -> None:
    out = world["root"] / "run-corpus"
    assert _cli(world, "predict", "--out", str(out)) == 0
    wiki = next(world["corpus"].glob("*.jsonl"))
    original = wiki.read_bytes()
    try:
        page = {"id": "Extra_page", "text": "An extra page .", "lines": "0\tAn extra page .\n"}
        wiki.write_bytes(original + (json.dumps(page) + "\n").encode("utf-8"))
        capsys.readouterr()
        assert _cli(world, "predict", "--out", str(out)) == 2
        assert "(corpus differ)" in _one_error_line(capsys)
    finally:
        wiki.write_bytes(original)
    assert _cli(world, "predict", "--out", str(out)) == 0  # the original corpus resumes again


def test_a_second_writer_is_refused_and_a_killed_holder_frees_the_run(world: dict, capsys) -> None:
    out = world["root"] / "run-lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom garag.runs import run_lock\n"
         "with run_lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(120)\n", str(out)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert _cli(world, "predict", "--out", str(out)) == 2
        message = _one_error_line(capsys)
        assert f"{out}: another garag run (pid {holder.pid} since" in message
        assert not (out / "predictions.jsonl").exists()
    finally:
        holder.kill()  # kill -9: the OS drops the lock with the process
        holder.wait()
    assert _cli(world, "predict", "--out", str(out)) == 0
    assert (out / "predictions.jsonl").is_file()


def test_scoring_a_file_with_a_corrupt_line_names_it_and_changes_nothing(world: dict, capsys) -> None:
    out = world["root"] / "run-score"
    assert _cli(world, "predict", "--out", str(out)) == 0
    lines = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    bad = world["root"] / "bad-predictions.jsonl"
    bad.write_text(lines[0] + '{"id": 2, "predicted_label": \n' + "".join(lines[2:]), encoding="utf-8")
    before = bad.read_bytes()
    capsys.readouterr()
    assert _cli(world, "evaluate", "--predictions", str(bad)) == 2
    assert _one_error_line(capsys) == f"garag: error: {bad}:2: not valid JSON (Expecting value)"
    assert bad.read_bytes() == before
    assert _cli(world, "evaluate", "--predictions", str(bad), "--set", "data.skip_bad_lines=true") == 0
    assert bad.read_bytes() == before
    metrics = json.loads((world["root"] / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["skipped_prediction_lines"] == {"bad_json": 1}
    value, low, high = metrics["macro_f1_ci"]  # evaluate gives macro-F1 its interval
    assert value == metrics["macro_f1"] and low <= value <= high
    assert "macro-F1 [95% CI]" in (world["root"] / "metrics.md").read_text(encoding="utf-8")


def test_out_naming_a_file_is_one_line(world: dict, capsys) -> None:
    target = world["root"] / "a-file"
    target.write_text("keep me", encoding="utf-8")
    assert _cli(world, "predict", "--out", str(target)) == 2
    assert _one_error_line(capsys) == f"garag: error: --out {target}: exists and is not a directory"
    assert target.read_text(encoding="utf-8") == "keep me"


def test_skip_bad_lines_is_honoured_and_reported(world: dict, capsys) -> None:
    claims = world["root"] / "claims-with-a-bad-one.jsonl"
    lines = world["claims"].read_text(encoding="utf-8").splitlines(keepends=True)
    empty = json.dumps({"id": 99, "verifiable": "NOT VERIFIABLE", "label": "NOT ENOUGH INFO", "claim": " ",
                        "evidence": [[[None, None, None, None]]]})  # fmt: skip
    claims.write_text("".join(lines[:2]) + empty + "\n" + "".join(lines[2:]), encoding="utf-8")
    out = world["root"] / "run-skip"
    data = ["--set", f"data.claims={claims}"]
    assert _cli(world, "evaluate", "--out", str(out), *data) == 2
    assert _one_error_line(capsys).startswith(f"garag: error: {claims}: claim 99 (#3) has no words")
    assert not (out / "predictions.jsonl").exists()
    assert _cli(world, "evaluate", "--out", str(out), *data, "--set", "data.skip_bad_lines=true") == 0
    manifest = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert manifest["skipped"]["counts"] == {"empty_claim": 1}
    assert "claim 99 (#3) has no words" in manifest["skipped"]["examples"][0]
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["skipped_claims"] == {"empty_claim": 1} and metrics["n"] == len(lines)


def test_predict_reports_claims_that_fell_back_from_the_llm(world: dict, capsys) -> None:
    pytest.importorskip("langchain_openai", reason="the llm extra is not installed")
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening: the LLM server is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = world["root"] / "run-llm-down"
    llm = ["pipeline.verifier=llm", "llm.backend=openai", f"llm.base_url=http://127.0.0.1:{port}/v1",
           "llm.model=none", "llm.retries=0", "llm.timeout_s=5", "llm.cache=false"]  # fmt: skip
    capsys.readouterr()
    assert _cli(world, "predict", "--out", str(out), *[x for o in llm for x in ("--set", o)]) == 0
    report = json.loads(capsys.readouterr().out)
    n = len(world["claims"].read_text(encoding="utf-8").splitlines())
    assert report["written"] == n
    assert report["llm"]["verifier_fallbacks"] == n and report["llm"]["errors"] >= n


def test_settings_for_two_way_labels_leave_a_three_way_run_valid(world: dict, capsys) -> None:
    """The fixture's claims are FEVER's 3-way ones: the HoVer-only LLM judge changes none of their
    verdicts, so a saved run resumes; the verifier's own label instead of the decision's does not."""
    out = world["root"] / "run-two-way"
    assert _cli(world, "predict", "--out", str(out)) == 0
    first = (out / "predictions.jsonl").read_bytes()
    capsys.readouterr()
    two_way = ["--set", "verifier.llm_judge=two_way"]
    assert _cli(world, "predict", "--out", str(out), *two_way) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["written"] == 0 and summary["resumed"] == len(first.splitlines())
    assert (out / "predictions.jsonl").read_bytes() == first and not list(out.glob("*.stale-*"))
    # the premise: made afresh with those settings, every verdict is the same
    fresh = world["root"] / "run-two-way-fresh"
    assert _cli(world, "predict", "--out", str(fresh), *two_way) == 0
    keys = ("id", "predicted_label", "predicted_evidence", "scores", "explanation")

    def verdicts(path: Path) -> list[tuple]:
        return [tuple(json.loads(x)[k] for k in keys) for x in path.read_text(encoding="utf-8").splitlines()]

    assert verdicts(fresh / "predictions.jsonl") == verdicts(out / "predictions.jsonl")
    capsys.readouterr()
    assert _cli(world, "predict", "--out", str(out), "--set", "verifier.decision=verifier") == 2
    assert "(config_hash differ)" in _one_error_line(capsys)
