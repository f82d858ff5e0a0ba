"""Seconds per claim of the LLM programmer alone (issue 18: LLM-program path <= 5 s per claim cold).

Writes each of the first ``--claims`` claims of a part (HoVer tune by default) as a reasoning
program with the configured chat model (``configs/graph.yaml+configs/joint.yaml`` with
:data:`LLM_PROGRAMS`, the former graph-joint-llm.yaml: the local Qwen2.5-Coder-1.5B through
llama.cpp), once with a private, empty response cache (cold) and once more from it (warm), and
records per claim the wall time, the program's source (the model's, or the rule program after an
unusable reply) and its steps, with the model's token counts.  The rest of the LLM-program path
(per-step retrieval, verification) is in ``multihop_speed.py``.

With ``--batched`` the cold pass asks for all the programs at once (``LLMProgrammer.programs``:
decoded ``llm.batch`` at a time on llama.cpp), so a claim's seconds and tokens are the pass's
mean; ``same as one at a time`` counts the programs equal to those of the latest row of the same
claims written one at a time.

    python benchmarks/program_speed.py [--claims 30] [--tag NAME] [--batched]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from garag.config import config_name, load_config
from garag.datasets import dataset_from_config
from garag.llm import LLMClient
from garag.llm.cache import ResponseCache
from pipeline.reasoning import make_programmer
from prompts import load_prompt

OUT = Path(__file__).resolve().parent / "results"

# LLM reasoning programs, as the former configs/graph-joint-llm.yaml set them (--set overrides them):
# a bridging question's answer is the named entity of the asked type in its top sentences.
LLM_PROGRAMS = [
    "reasoning.programs=llm",
    "reasoning.combine=union",
    "reasoning.answer_from=entity",
]


_WORD = re.compile(r"[^\W_]+")


def coverage(claim: str, steps: list[list[str]]) -> float:
    """The share of the claim's content words (not stop words) that some step's text contains: a
    program that drops a fact of the claim leaves its words out."""
    from spacy.lang.en.stop_words import STOP_WORDS

    words = {w for w in _WORD.findall(claim.casefold()) if w not in STOP_WORDS}
    said = {w for _, text in steps for w in _WORD.findall(text.casefold())}
    return len(words & said) / len(words) if words else 1.0


def _pass(programmer, claims: list) -> list[dict]:  # noqa: ANN001
    rows = []
    for claim in claims:
        before = programmer.client.stats.stage("program")
        t = time.perf_counter()
        program = programmer.program(claim.text)
        seconds = time.perf_counter() - t
        after = programmer.client.stats.stage("program")
        rows.append(
            {
                "id": claim.id,
                "seconds": seconds,
                "source": program.source,
                "steps": [[s.kind, s.text] for s in program.steps],
                "coverage": coverage(claim.text, [[s.kind, s.text] for s in program.steps]),
                "calls": after.calls - before.calls,
                "prompt_tokens": after.prompt_tokens - before.prompt_tokens,
                "completion_tokens": after.completion_tokens - before.completion_tokens,
            }
        )
    return rows


def _pass_batched(programmer, claims: list) -> list[dict]:  # noqa: ANN001
    before = programmer.client.stats.stage("program")
    t = time.perf_counter()
    programs = programmer.programs([c.text for c in claims])
    seconds = (time.perf_counter() - t) / len(claims)
    after = programmer.client.stats.stage("program")
    n = len(claims)
    return [
        {
            "id": claim.id,
            "seconds": seconds,
            "source": program.source,
            "steps": [[s.kind, s.text] for s in program.steps],
            "coverage": coverage(claim.text, [[s.kind, s.text] for s in program.steps]),
            "calls": (after.calls - before.calls) / n,
            "prompt_tokens": (after.prompt_tokens - before.prompt_tokens) / n,
            "completion_tokens": (after.completion_tokens - before.completion_tokens) / n,
        }
        for claim, program in zip(claims, programs, strict=True)
    ]


def _same_programs(row: dict, rows: list[dict]) -> str:
    """How many of ``row``'s programs equal those of the latest one-at-a-time row of the same claims."""
    ids = [p["id"] for p in row["programs"]]
    for other in reversed(rows):
        if other.get("batched") or [p["id"] for p in other["programs"]] != ids or other is row:
            continue
        same = sum(a["steps"] == b["steps"] for a, b in zip(row["programs"], other["programs"], strict=True))
        return f"{same} / {len(ids)} ({other['tag']})"
    return "-"


def _summary(rows: list[dict]) -> dict:
    secs = [r["seconds"] for r in rows]
    return {
        "claims": len(rows),
        "mean_s": statistics.fmean(secs),
        "median_s": statistics.median(secs),
        "max_s": max(secs),
        "llm_programs": sum(r["source"] == "llm" for r in rows),
        "fallbacks": sum(r["source"] != "llm" for r in rows),
        "completion_tokens_mean": statistics.fmean(r["completion_tokens"] for r in rows),
        "prompt_tokens_mean": statistics.fmean(r["prompt_tokens"] for r in rows),
        "steps_mean": statistics.fmean(len(r["steps"]) for r in rows),
        "questions_mean": statistics.fmean(sum(k == "question" for k, _ in r["steps"]) for r in rows),
        "coverage_mean": statistics.fmean(r["coverage"] for r in rows),
    }


def report(rows: list[dict]) -> str:
    lines = [
        "# LLM reasoning programs: seconds per claim (2 cores)",
        "",
        "Each row: `python benchmarks/program_speed.py` over the first claims of a part, the program cache",
        "cold (a private, empty response cache), then warm.  Coverage: the share of a claim's content words",
        "that some step of its program contains (a dropped fact leaves its words out); programs that",
        "fall back to the rule program are counted and included.",
        "",
        "| tag | prompt | model | claims | cold s/claim mean / median / max | warm s/claim "
        "| completion tokens | LLM programs / fallbacks | steps (questions) | coverage "
        "| same as one at a time |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for r in rows:
        c, w = r["cold"], r["warm"]
        cold = (
            f"{c['mean_s']:.2f} (batched)"
            if r.get("batched")
            else f"{c['mean_s']:.2f} / {c['median_s']:.2f} / {c['max_s']:.2f}"
        )
        lines.append(
            f"| {r['tag']} | {r['prompt']} | {r['model']} | {c['claims']} | {cold} | {w['mean_s']:.4f} "
            f"| {c['completion_tokens_mean']:.1f} | {c['llm_programs']} / {c['fallbacks']} "
            f"| {c['steps_mean']:.2f} ({c['questions_mean']:.2f}) | {c['coverage_mean']:.3f} "
            f"| {_same_programs(r, rows) if r.get('batched') else '-'} |"
        )
    lines += ["", "Commands:", ""] + [f"* {r['tag']}: `{r['command']}`" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/graph.yaml+configs/joint.yaml")
    ap.add_argument("--dataset", default="hover")
    ap.add_argument("--part", default="tune", choices=("all", "tune", "report"))
    ap.add_argument("--claims", type=int, default=30)
    ap.add_argument("--cache", default="cache", help="where the model file is (paths.cache_dir)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--prompt", default="program", help="the program prompt (prompts/NAME.yaml)")
    ap.add_argument("--tag", default="", help="a name for this row of the results")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--batched", action="store_true", help="ask for all the programs at once")
    args = ap.parse_args(argv)
    overrides = [f"data.dataset={args.dataset}", f"data.part={args.part}", f"paths.cache_dir={args.cache}"]
    config = load_config(args.config, overrides + LLM_PROGRAMS + args.overrides)
    if config.reasoning.programs != "llm":
        ap.error(f"{args.config}: reasoning.programs is {config.reasoning.programs!r}, not llm")
    claims = list(dataset_from_config(config.data).claims())[: args.claims]
    tmp = Path(tempfile.mkdtemp(prefix="garag-program-speed-"))
    try:
        client = LLMClient(config.llm, config.paths.cache_dir).load()
        client._cache = ResponseCache(tmp / "responses.sqlite")  # private and empty: the first pass is cold
        programmer = make_programmer(config, client)
        programmer.prompt = load_prompt(args.prompt)
        cold = (_pass_batched if args.batched else _pass)(programmer, claims)
        warm = _pass(programmer, claims)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    row = {
        "tag": args.tag or f"{config_name(args.config)}-llm",
        "config": args.config,
        "overrides": args.overrides,
        "model": config.llm.model,
        "prompt": programmer.prompt.tag,
        "batched": args.batched,
        "cold": _summary(cold),
        "warm": _summary(warm),
        "programs": cold,
        "command": "python benchmarks/program_speed.py " + shlex.join(argv),
    }
    path = args.out / "program_speed.json"
    rows = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    rows = [r for r in rows if r["tag"] != row["tag"]] + [row]
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    (args.out / "program_speed.md").write_text(report(rows), encoding="utf-8")
    print(json.dumps({k: row[k] for k in ("tag", "cold", "warm")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
