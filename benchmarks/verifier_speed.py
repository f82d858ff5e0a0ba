"""Baseline pipeline throughput (claims/s) and verifier throughput (pairs/s), per verifier runtime.

Uses the trained verifier from the cache (run ``garag train-verifier`` or ``make run`` first).  Each
runtime (``verifier.runtime``: PyTorch, ONNX Runtime) gets a pipeline of its own over the same
claims, nothing remembered from the one before (spaCy parses, NLI pairs); the labels and scores of
each are compared with the first's.  Results: ``benchmarks/results/verifier_speed.{json,md}``.

    python benchmarks/verifier_speed.py [--claims 500] [--cache cache] [--runtimes torch onnx]
        [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from eval.run_env import machine
from garag import nlp
from garag.config import load_config
from garag.cpu import CPU
from pipeline.verification import VerificationPipeline, hits_to_evidence
from verifier.inputs import build_premise

OUT = Path(__file__).resolve().parent / "results"


def measure(overrides: list[str], n_claims: int, batch: int) -> tuple[dict, list[dict]]:
    """One runtime's speeds, and its verdicts (label and scores per claim)."""
    nlp.forget_parses()  # the runtime before parsed these claims already
    config = load_config(overrides=overrides)
    started = time.perf_counter()
    pipe = VerificationPipeline(config, progress=False).build()
    claims = list(pipe.dataset.claims())[:n_claims]
    pipe.run(claims[:4])  # warm-up (and, on ONNX Runtime's first use, the export)
    ready = time.perf_counter() - started

    t = time.perf_counter()
    results = list(pipe.iter_results(claims, batch_size=batch))
    whole = len(claims) / (time.perf_counter() - t)
    stage = {k: 1000 * sum(r.seconds[k] for r in results) / len(results) for k in results[0].seconds}

    verifier = pipe.verifier
    assert verifier is not None
    evidence = [hits_to_evidence(r.retrieval.fused, pipe.store, config.verifier.top_k) for r in results]
    premises = [build_premise(ev, config.verifier.top_k) for ev in evidence]
    texts = [c.text for c in claims]
    verifier.forget_pairs()
    t = time.perf_counter()
    verifier.predict_pairs(premises, texts)
    concat_pairs = len(premises) / (time.perf_counter() - t)
    singles = [(build_premise([e]), c) for ev, c in zip(evidence, texts, strict=True) for e in ev]
    verifier.forget_pairs()  # the pipeline read these pairs already: time the model, not its memory
    t = time.perf_counter()
    verifier.predict_pairs([p for p, _ in singles], [c for _, c in singles])
    single_pairs = len(singles) / (time.perf_counter() - t)
    speeds = {
        "claims": len(claims),
        "pipeline_claims_per_second": whole,
        "ms_per_claim_by_stage": stage,
        "verifier_concat_pairs_per_second": concat_pairs,
        "verifier_single_sentence_pairs_per_second": single_pairs,
        "built_and_warmed_seconds": ready,
        "model": pipe.model_path,
        "mode": config.verifier.mode,
        "top_k": config.verifier.top_k,
        "max_length": config.verifier.max_length,
    }
    verdicts = [
        {
            "id": c.id,
            "label": r.verdict.label.value,
            "scores": {k.value: v for k, v in r.verdict.scores.items()},
        }
        for c, r in zip(claims, results, strict=True)
    ]
    return speeds, verdicts


def agreement(first: list[dict], other: list[dict]) -> dict:
    """How ``other``'s verdicts differ from ``first``'s, claim by claim."""
    same = sum(a["label"] == b["label"] for a, b in zip(first, other, strict=True))
    diff = max(
        abs(a["scores"][k] - b["scores"][k]) for a, b in zip(first, other, strict=True) for k in a["scores"]
    )
    return {"claims": len(first), "labels_equal": same, "max_score_difference": diff}


def markdown(result: dict) -> str:
    runs, names = result["runs"], list(result["runs"])
    first = runs[names[0]]
    m = result["machine"]
    cpu = CPU.from_dict(m["cpu"]).line() if m.get("cpu") else f"{m['cpu_count']} CPUs"
    rows = [
        (
            f"whole pipeline (retrieval, {first['mode']} verifier of the top {first['top_k']}, decision), "
            "claims/s",
            "pipeline_claims_per_second",
        ),
        *[(f"{k}, ms/claim", ("ms_per_claim_by_stage", k)) for k in first["ms_per_claim_by_stage"]],
        (f"verifier, concat premise (top {first['top_k']}), pairs/s", "verifier_concat_pairs_per_second"),
        ("verifier, single-sentence pairs/s", "verifier_single_sentence_pairs_per_second"),
        ("pipeline built and warmed, s", "built_and_warmed_seconds"),
    ]

    def value(run: dict, key: str | tuple[str, str]) -> str:
        v = run[key[0]][key[1]] if isinstance(key, tuple) else run[key]
        return f"{v:.1f}"

    lines = [
        f"# Baseline pipeline speed per verifier runtime ({first['claims']} FEVER claims, batch "
        f"{result['batch']})",
        "",
        f"Command: `{result['command'].strip()}`; {cpu}, Python {m['python']}.",
        "",
        "| measure | " + " | ".join(f"`verifier.runtime: {n}`" for n in names) + " |",
        "| --- |" + " ---: |" * len(names),
        *[f"| {label} | " + " | ".join(value(runs[n], key) for n in names) + " |" for label, key in rows],
    ]
    for name, agree in result["agreement"].items():
        lines += [
            "",
            f"`{name}` against `{names[0]}`: the same label for {agree['labels_equal']} of {agree['claims']} "
            f"claims; scores within {agree['max_score_difference']:.1e}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--claims", type=int, default=500)
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runtimes", nargs="+", default=["torch", "onnx"], choices=["torch", "onnx"])
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    base = ["data.dataset=fever", f"paths.cache_dir={args.cache}", *args.overrides]
    runs, verdicts = {}, {}
    for runtime in dict.fromkeys(args.runtimes):
        runs[runtime], verdicts[runtime] = measure(
            [*base, f"verifier.runtime={runtime}"], args.claims, args.batch
        )
    first = next(iter(verdicts))
    args_used = sys.argv[1:] if argv is None else argv
    result = {
        "batch": args.batch,
        "runs": runs,
        "agreement": {n: agreement(verdicts[first], v) for n, v in verdicts.items() if n != first},
        "machine": machine(),
        "command": " ".join(["python benchmarks/verifier_speed.py", *args_used]),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "verifier_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (OUT / "verifier_speed.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
