"""garag.runs.check_identity: the one refusal behind evaluate's and compare's resumable runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from eval.run_hash import run_config_hash
from garag.config import load_config
from garag.runs import changed_keys, check_identity


def test_nested_keys_are_compared_one_by_one():
    previous = {"claims": "c1", "models": {"baseline": "m1", "graph": "g1"}}
    identity = {"claims": "c1", "models": {"baseline": "m2", "graph": "g1", "llm": "q"}, "seed": 3}
    assert changed_keys(previous, identity) == (["models.baseline"], ["models.llm", "seed"])


def test_a_run_from_other_inputs_is_refused_then_set_aside(tmp_path: Path, caplog):
    run_json, out = tmp_path / "run.json", tmp_path / "predictions.jsonl"
    check_identity(run_json, {"claims": "c1"}, False, [out], "predictions", "another --out")  # no run yet
    run_json.write_text(json.dumps({"claims": "c1", "config": {"k": 5}}), encoding="utf-8")
    out.write_text('{"id": 1}\n', encoding="utf-8")
    with caplog.at_level(logging.WARNING):  # an older run.json without "seed": resumed, with a warning
        check_identity(run_json, {"claims": "c1", "seed": 3}, False, [out], "predictions", "another --out")
    assert "does not record ['seed']" in caplog.text and out.is_file()
    with pytest.raises(ValueError) as err:
        check_identity(
            run_json, {"claims": "c2", "config": {"k": 5}}, False, [out], "predictions", "another --out"
        )
    assert str(err.value) == (
        f"{tmp_path}: holds predictions made from other settings or inputs (claims differ); "
        "use --force-new to set them aside and start again, or another --out"
    )
    assert out.is_file() and run_json.is_file()  # nothing moved on a refusal
    check_identity(
        run_json, {"claims": "c2", "config": {"k": 6}}, True, [out], "predictions", "another --out"
    )
    assert not out.exists() and not run_json.exists()
    stale = sorted(p.name.split(".stale-")[0] for p in tmp_path.iterdir())
    assert stale == ["predictions", "run"]  # both kept, renamed
    assert [p.read_text(encoding="utf-8") for p in tmp_path.glob("predictions.stale-*")] == ['{"id": 1}\n']


def test_outputs_set_aside_together_stay_one_folder(tmp_path: Path):
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"claims": "c1"}), encoding="utf-8")
    (tmp_path / "predictions").mkdir()
    (tmp_path / "predictions" / "a.jsonl").write_text("x\n", encoding="utf-8")
    (tmp_path / "report.md").write_text("r\n", encoding="utf-8")
    outputs = [tmp_path / "predictions", tmp_path / "report.md", tmp_path / "figures"]  # no figures yet
    check_identity(run_json, {"claims": "c1"}, True, outputs, "a run", "another --run-id", together=True)
    assert run_json.is_file() and not list(tmp_path.glob("stale-*"))  # same inputs: resumed, nothing moved
    check_identity(run_json, {"claims": "c2"}, True, outputs, "a run", "another --run-id", together=True)
    (stale,) = tmp_path.glob("stale-*")
    assert sorted(p.name for p in tmp_path.iterdir()) == [stale.name]
    assert sorted(str(p.relative_to(stale)) for p in stale.rglob("*")) == [
        "predictions", "predictions/a.jsonl", "report.md", "run.json",
    ]  # fmt: skip


def test_two_way_settings_name_two_way_runs_only():
    """The HoVer-only judge settings count in a 2-way run's hash, not a 3-way one's; the decision
    model's version counts in both."""
    plain = load_config(None)
    tuned = load_config(None, ["verifier.llm_judge=two_way", "verifier.llm_judge_parts=0.3"])
    assert run_config_hash(tuned, two_way=False) == run_config_hash(plain, two_way=False)
    assert run_config_hash(tuned, two_way=True) != run_config_hash(plain, two_way=True)
    other = load_config(None, ["verifier.llm_judge=two_way", "verifier.llm_judge_parts=0.4"])
    assert run_config_hash(other, two_way=True) != run_config_hash(tuned, two_way=True)
    always = load_config(None, ["verifier.llm_judge=always"])  # acts on 3-way verdicts too
    assert run_config_hash(always, two_way=False) != run_config_hash(plain, two_way=False)
    own = load_config(None, ["verifier.decision=verifier"])
    for two_way in (False, True):
        assert run_config_hash(own, two_way=two_way) != run_config_hash(plain, two_way=two_way)
    assert run_config_hash(load_config(None, ["eval.limit=5"]), two_way=False) == run_config_hash(
        plain, two_way=False
    )
