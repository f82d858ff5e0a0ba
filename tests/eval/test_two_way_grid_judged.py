"""``benchmarks/two_way_grid.py --judged``: which judged runs it reads, and that it applies the
judge's answers as the pipeline's judge (verifier/llm_judge.py) decides.

The judge's answers come from ``ScriptedJudgeClient``, a fake chat client with set replies (the
grid reads only what the pipeline's ``LLMJudge`` wrote into the explanations, not the model).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from garag.config import load_config
from garag.llm.client import Structured
from garag.types import Label, SentenceId, Verdict
from verifier.llm_judge import UNUSABLE, LLMJudge

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("two_way_grid", ROOT / "benchmarks" / "two_way_grid.py")
assert _spec is not None and _spec.loader is not None
grid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grid)


class ScriptedJudgeClient:
    """A fake LLMClient whose ``chat_text_many`` returns the scripted replies in order."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)

    def chat_text_many(self, stage, requests, prompt_sha="", max_tokens=None, max_lines=None):
        out, self.replies = self.replies[: len(requests)], self.replies[len(requests) :]
        return [Structured(r, r) for r in out]


def _scores(s: float, r: float, n: float) -> dict[Label, float]:
    return {Label.SUPPORTS: s, Label.REFUTES: r, Label.NOT_ENOUGH_INFO: n}


# claim id -> (verdict before the judge, the judge's reply if it is asked)
CASES = {
    "a": (Label.SUPPORTS, _scores(0.5, 0.3, 0.2), "No"),  # -> REFUTES, the likelier other label
    "b": (Label.SUPPORTS, _scores(0.5, 0.2, 0.3), "No"),  # -> NOT ENOUGH INFO
    "c": (Label.SUPPORTS, _scores(0.4, 0.3, 0.3), "No"),  # a tie -> NOT ENOUGH INFO
    "d": (Label.SUPPORTS, _scores(0.6, 0.3, 0.1), "Yes"),  # stays SUPPORTS
    "e": (Label.REFUTES, _scores(0.2, 0.7, 0.1), None),  # never asked
}


def _pipeline_verdicts() -> dict[str, Verdict]:
    """The verdicts the pipeline's judge gives for CASES."""
    ids = list(CASES)
    before = [Verdict(CASES[i][0], "x.", (SentenceId("P", 0),), CASES[i][1]) for i in ids]
    replies = [CASES[i][2] for i in ids if CASES[i][2] is not None]
    after = LLMJudge(ScriptedJudgeClient(replies)).apply(["claim"] * len(ids), [[]] * len(ids), before)
    return dict(zip(ids, after, strict=True))


def _record(cid: str, v: Verdict) -> dict:
    return {
        "id": cid,
        "claim": "claim",
        "predicted_label": v.label.value,
        "explanation": v.explanation,
        "scores": {k.value: p for k, p in v.scores.items()},
        "evidence_read": [["P", 0]],
    }


def test_apply_judged_decides_as_the_pipelines_judge() -> None:
    judged = {cid: _record(cid, v) for cid, v in _pipeline_verdicts().items()}
    # the records of a run without the judge: each case's verdict before it
    plain = [
        _record(cid, Verdict(label, "x.", (SentenceId("P", 0),), scores))
        for cid, (label, scores, _) in CASES.items()
    ]
    got = {r["id"]: r["predicted_label"] for r in grid.apply_judged(plain, judged)}
    assert got == {cid: v.label.value for cid, v in _pipeline_verdicts().items()}
    assert got == {
        "a": "REFUTES",
        "b": "NOT ENOUGH INFO",
        "c": "NOT ENOUGH INFO",
        "d": "SUPPORTS",
        "e": "REFUTES",
    }


def _write_run(tmp_path: Path, overrides: list[str], records: list[dict] | None) -> Path:
    run = tmp_path / "judged"
    run.mkdir()
    cfg = load_config(
        [ROOT / "configs" / "baseline.yaml", ROOT / "configs" / "judge.yaml"],
        ["data.dataset=hover", *overrides],
    )
    (run / "run.json").write_text(json.dumps({"config": cfg.to_dict()}), encoding="utf-8")
    if records is not None:
        lines = "".join(json.dumps(r) + "\n" for r in records)
        (run / "predictions.jsonl").write_text(lines, encoding="utf-8")
    return run


JUDGED_AT_0 = ["data.part=tune", "verifier.llm_judge=two_way", "verifier.two_way_threshold=0"]


def test_load_judged_reads_a_tune_run_judged_at_threshold_0(tmp_path: Path) -> None:
    records = [_record(cid, v) for cid, v in _pipeline_verdicts().items()]
    greedy = [*JUDGED_AT_0, "verifier.llm_judge_parts=0"]
    judged, parts = grid.load_judged(_write_run(tmp_path, greedy, records))
    assert set(judged) == set(CASES) and parts == 0  # what the grid's output says of the judge
    (tmp_path / "p").mkdir()
    _, parts = grid.load_judged(
        _write_run(tmp_path / "p", [*JUDGED_AT_0, "verifier.llm_judge_parts=0.25"], [])
    )
    assert parts == 0.25


def test_load_run_refusals_name_the_option(tmp_path: Path) -> None:
    run = _write_run(tmp_path, ["data.part=report"], [])
    with pytest.raises(SystemExit, match=r"^--judged .*run\.json: data\.part is 'report'") as e:
        grid.load_run(run, "--judged")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["data.part=report", "verifier.llm_judge=two_way", "verifier.two_way_threshold=0"],
        ["data.part=tune", "verifier.llm_judge=always", "verifier.two_way_threshold=0"],
        ["data.part=tune", "verifier.llm_judge=two_way", "verifier.two_way_threshold=0.02"],
    ],
)
def test_load_judged_refuses_another_part_mode_or_threshold(tmp_path: Path, overrides: list[str]) -> None:
    run = _write_run(tmp_path, overrides, [])
    with pytest.raises(SystemExit, match=r"run\.json: --judged needs a tune run") as e:
        grid.load_judged(run)
    assert str(run) in str(e.value) and "\n" not in str(e.value)


def test_load_judged_refuses_unusable_answers_and_unreadable_runs(tmp_path: Path) -> None:
    v = Verdict(Label.SUPPORTS, f"x. {UNUSABLE}", (SentenceId("P", 0),), _scores(0.5, 0.3, 0.2))
    run = _write_run(tmp_path, JUDGED_AT_0, [_record("a", v)])
    with pytest.raises(SystemExit, match=r"the judge gave no usable answer for claims \['a'\]"):
        grid.load_judged(run)
    (run / "predictions.jsonl").unlink()
    with pytest.raises(
        SystemExit, match=r"^--judged .*judged: not a readable evaluate run \(FileNotFoundError"
    ):
        grid.load_judged(run)


class ScriptedPartsClient:
    """A fake LLMClient for the judge's parts mode: P(Yes) 0.9 for the claim, 0.1 for its parts."""

    def yes_probability_many(self, stage, requests, prompt_sha=""):
        return [0.9] + [0.1] * (len(requests) - 1)


def test_apply_judged_reads_a_part_the_judge_withheld_for() -> None:
    judge = LLMJudge(ScriptedPartsClient(), parts=lambda c: ["A.", "B."], parts_threshold=0.3)
    v = Verdict(Label.SUPPORTS, "x.", (SentenceId("P", 0),), _scores(0.5, 0.2, 0.3))
    held = judge.apply(["A and B."], [[]], [v])[0]
    assert held.label is Label.NOT_ENOUGH_INFO and "asked about each part" in held.explanation
    got = grid.apply_judged([_record("a", v)], {"a": _record("a", held)})
    assert got[0]["predicted_label"] == "NOT ENOUGH INFO"


def test_table_says_where_the_verifiers_came_from_only_when_told() -> None:
    row = {"macro_f1": 0.75, "accuracy": 0.76, "supported_share": 0.5, "hops": {"2": 0.7, "3": 0.8}}
    res = {
        "pick": 0.05,
        "run_threshold": 0.02,
        "claims": 98,
        "entity_check": "two_way",
        "oracle": False,
        "judged": None,
        "run": "/runs/x",
        "rows": {"as run": row, "0.05": row},
    }
    plain = grid.table({"x": res}, "cmd")
    assert "replay" not in plain and "| 0.05 **pick** | 0.750 | 0.700 / 0.800 / nan | 0.760 | 0.50 |" in plain
    told = grid.table({"x": res}, "cmd", "The verifiers came back from the GPU.")
    assert "\n\nThe verifiers came back from the GPU.\n\n## x: pick 0.05 (the run had 0.02)" in told
