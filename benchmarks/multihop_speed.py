"""Seconds per claim of the multi-hop pipelines on 2 CPU cores (issue 18's speed goals).

Runs each config over the first ``--claims`` HoVer claims of a part (tune by default) in
batches, twice for configs with LLM programs (cold program cache, then warm), and
writes ``benchmarks/results/multihop_speed.{json,md}``.  Goals: NLI-path graph RAG
<= 0.5 s per claim; LLM-program path <= 5 s per claim with a cold program cache.

    python benchmarks/multihop_speed.py --cache cache \\
        --configs configs/baseline.yaml+configs/joint.yaml configs/graph.yaml+configs/joint.yaml \\
        --set graph-joint:reasoning.programs=rule --set graph-joint:reasoning.combine=union [--claims 50]

A config given as ``NAME=SPEC`` is named NAME (for ``--set NAME:key=value``), so one spec can run
twice with different settings (``make bench-multihop``: graph-joint with rule and with LLM programs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from eval.run_env import machine, machine_line
from garag.config import config_name, load_config, scoped_overrides
from pipeline.verification import VerificationPipeline

OUT = Path(__file__).resolve().parent / "results"


def _timed(pipe: VerificationPipeline, claims: list, batch: int) -> tuple[float, dict[str, float]]:
    t = time.perf_counter()
    results = list(pipe.iter_results(claims, batch_size=batch))
    per_claim = (time.perf_counter() - t) / len(claims)
    stages = sorted({k for r in results for k in r.seconds})
    return per_claim, {k: sum(r.seconds.get(k, 0.0) for r in results) / len(results) for k in stages}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configs", nargs="+", required=True)
    ap.add_argument("--claims", type=int, default=50)
    ap.add_argument("--part", default="tune", choices=("all", "tune", "report"))
    ap.add_argument("--dataset", default="hover")
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--out", type=Path, default=OUT, help="where multihop_speed.{json,md} go")
    args = ap.parse_args(argv)
    rows = []
    for given in args.configs:
        name, _, path = given.rpartition("=") if "=" in given else (config_name(given), "", given)
        overrides = [
            f"data.dataset={args.dataset}",
            f"data.part={args.part}",
            f"paths.cache_dir={args.cache}",
            *scoped_overrides(name, args.overrides),  # NAME:key=value for NAME only
        ]
        config = load_config(path, overrides)
        llm_programs = config.reasoning.programs == "llm"
        llm_cache = None
        pipe = VerificationPipeline(config, progress=False).build()
        claims = list(pipe.dataset.claims())[: args.claims]
        if llm_programs:  # private response caches: the warm-up's, then an empty one for the cold pass
            from garag.llm.cache import ResponseCache

            llm_cache = Path(tempfile.mkdtemp(prefix="garag-bench-llm-"))
            pipe.llm_client._cache = ResponseCache(llm_cache / "warm-up.sqlite")
        pipe.run(claims[:2])  # warm-up: models loaded, first batch compiled
        for retriever in pipe.retrieval.retrievers.values():  # its claims' query vectors and GRAAL
            if hasattr(retriever, "clear_query_cache"):  # results must not answer the timed pass
                retriever.clear_query_cache()
        if llm_programs:  # the warm-up's programs must not answer the timed pass
            pipe.llm_client._cache = ResponseCache(llm_cache / "responses.sqlite")
            pipe.programmer.counts.clear()
        cold, stages = _timed(pipe, claims, args.batch)
        row = {"config": name, "claims": len(claims), "s_per_claim": cold, "stages": stages}
        if llm_programs:
            row["programs"] = dict(pipe.programmer.counts)  # LLM programs and rule fallbacks, cold pass
            row["s_per_claim_warm"], _ = _timed(pipe, claims, args.batch)
            shutil.rmtree(llm_cache, ignore_errors=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
    args_used = sys.argv[1:] if argv is None else argv
    result = {
        "rows": rows,
        "machine": machine(),
        "command": " ".join(["python benchmarks/multihop_speed.py", *args_used]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "multihop_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Multi-hop pipeline speed ({args.dataset} {args.part} part, batch {args.batch})",
        "",
        f"Command: `{result['command']}`; {machine_line(result['machine'])}",
        "",
        "| config | claims | s/claim | s/claim, warm LLM cache | LLM programs / rule fallbacks "
        "| ms/claim by stage |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        warm = f"{r['s_per_claim_warm']:.3f}" if "s_per_claim_warm" in r else "-"
        stages = ", ".join(f"{k} {1000 * v:.0f}" for k, v in r["stages"].items())
        progs = r.get("programs")
        counts = f"{progs.get('llm', 0)} / {progs.get('fallback', 0)}" if progs else "-"
        lines.append(
            f"| {r['config']} | {r['claims']} | {r['s_per_claim']:.3f} | {warm} | {counts} | {stages} |"
        )
    (args.out / "multihop_speed.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
