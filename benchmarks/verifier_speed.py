"""Baseline pipeline throughput (claims/s) and verifier throughput (pairs/s) on this machine (its
CPU, as :func:`eval.run_env.machine` reads it, is recorded with the result).

Uses the trained verifier from the cache (run ``garag train-verifier`` or ``make run`` first).
Results: ``benchmarks/results/verifier_speed.{json,md}``.

    python benchmarks/verifier_speed.py [--claims 500] [--cache cache]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from eval.run_env import machine, machine_line
from garag.config import load_config
from pipeline.verification import VerificationPipeline, hits_to_evidence
from verifier.inputs import build_premise

OUT = Path(__file__).resolve().parent / "results"
_STAGE_NOTES = {"verification": " (verifier and decision model)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--claims", type=int, default=500)
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args(argv)
    config = load_config(overrides=["data.dataset=fever", f"paths.cache_dir={args.cache}"])
    pipe = VerificationPipeline(config, progress=False).build()
    claims = list(pipe.dataset.claims())[: args.claims]
    pipe.run(claims[:4])  # warm-up

    t = time.perf_counter()
    results = list(pipe.iter_results(claims, batch_size=args.batch))
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

    args_used = sys.argv[1:] if argv is None else argv
    result = {
        "claims": len(claims),
        "batch": args.batch,
        "pipeline_claims_per_second": whole,
        "ms_per_claim_by_stage": stage,
        "verifier_concat_pairs_per_second": concat_pairs,
        "verifier_single_sentence_pairs_per_second": single_pairs,
        "per_sentence_mode_claims_per_second_estimate": single_pairs / config.verifier.top_k,
        "model": pipe.model_path,
        "max_length": config.verifier.max_length,
        "machine": machine(),
        "command": " ".join(["python benchmarks/verifier_speed.py", *args_used]),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "verifier_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Baseline pipeline speed ({len(claims)} FEVER claims, batch {args.batch})",
        "",
        f"Command: `{result['command'].strip()}`; {machine_line(result['machine'])}",
        "",
        "| measure | value |",
        "| --- | ---: |",
        f"| whole pipeline (retrieval, {config.verifier.mode} verifier on the top {config.verifier.top_k}, "
        f"decision model), claims/s | {whole:.1f} |",
        *[f"| {k}{_STAGE_NOTES.get(k, '')}, ms/claim | {v:.1f} |" for k, v in stage.items()],
        f"| verifier, concat premise (top {config.verifier.top_k}), pairs/s | {concat_pairs:.1f} |",
        f"| verifier, single-sentence pairs/s | {single_pairs:.1f} |",
    ]
    (OUT / "verifier_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
