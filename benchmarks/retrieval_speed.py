"""Index build time, peak memory and per-claim retrieval latency on the embedded corpora.

Each build step runs in its own process so its peak memory (ru_maxrss) is its own.
Results: benchmarks/results/retrieval_speed.{json,md}.

    python benchmarks/retrieval_speed.py [--dataset fever] [--claims 300] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results"


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _step_build(dataset: str, cache: str, retriever: str) -> dict:
    from garag.config import load_config
    from garag.datasets import get_dataset
    from pipeline.retrieval import RetrievalPipeline, build_sentence_store

    started = time.perf_counter()
    if retriever == "store":
        store, _, _ = build_sentence_store(get_dataset(dataset), Path(cache), False, progress=False)
    else:
        overrides = [
            f"data.dataset={dataset}",
            f"paths.cache_dir={cache}",
            f"retrieval.retrievers=[{retriever}]",
        ]
        pipe = RetrievalPipeline(load_config(overrides=overrides), progress=False)
        pipe.build()
        store = pipe.store
    return {
        "step": retriever,
        "seconds": time.perf_counter() - started,
        "peak_rss_mb": _peak_mb(),
        "sentences": len(store),
    }


def _latency(dataset: str, cache: str, n_claims: int) -> dict:
    from garag.config import load_config
    from pipeline.retrieval import RetrievalPipeline

    config = load_config(overrides=[f"data.dataset={dataset}", f"paths.cache_dir={cache}"])
    pipe = RetrievalPipeline(config, progress=False)
    pipe.build()
    claims = [c.text for c in pipe.dataset.claims()][:n_claims]
    k = config.retrieval.k
    for r in pipe.retrievers.values():  # warm-up (model load, mmap)
        r.retrieve(claims[0], k)

    def clear_caches() -> None:
        for r in pipe.retrievers.values():
            if hasattr(r, "clear_query_cache"):
                r.clear_query_cache()

    out = {}
    for name, r in pipe.retrievers.items():
        clear_caches()
        times = []
        for q in claims:
            t = time.perf_counter()
            r.retrieve(q, config.fusion.depth)
            times.append(time.perf_counter() - t)
        out[name] = times
    clear_caches()
    times = []
    for q in claims:
        t = time.perf_counter()
        pipe.retrieve(q, k)
        times.append(time.perf_counter() - t)
    out["fused (all + RRF)"] = times
    clear_caches()
    t = time.perf_counter()
    pipe.retrieve_batch(claims, k)
    batch_per_claim = (time.perf_counter() - t) / len(claims)

    def summary(ts: list[float]) -> dict:
        ts = sorted(ts)
        return {
            "median_ms": 1000 * statistics.median(ts),
            "p95_ms": 1000 * ts[min(len(ts) - 1, int(0.95 * len(ts)))],
            "mean_ms": 1000 * statistics.fmean(ts),
        }

    res = {name: summary(ts) for name, ts in out.items()}
    res["fused, batched"] = {"mean_ms": 1000 * batch_per_claim}
    return {"claims": len(claims), "latency": res, "peak_rss_mb": _peak_mb()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="fever")
    ap.add_argument("--claims", type=int, default=300)
    ap.add_argument("--cache", default="", help="cache dir (default: a fresh temporary dir = cold build)")
    ap.add_argument("--builds-from", help="reuse the build rows of an earlier result JSON (latency only)")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--retriever", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.step == "build":
        print(json.dumps(_step_build(args.dataset, args.cache, args.retriever)))
        return 0
    if args.step == "latency":
        print(json.dumps(_latency(args.dataset, args.cache, args.claims)))
        return 0

    cache = args.cache or tempfile.mkdtemp(prefix="garag-bench-")

    def child(*extra: str) -> dict:
        cmd = [
            sys.executable,
            __file__,
            "--dataset",
            args.dataset,
            "--cache",
            cache,
            "--claims",
            str(args.claims),
        ]
        done = subprocess.run(cmd + list(extra), check=True, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    if args.builds_from:
        earlier = json.loads(Path(args.builds_from).read_text())
        builds, cold = earlier["builds"], earlier["cold_cache"]
    else:
        builds, cold = (
            [child("--step", "build", "--retriever", r) for r in ("store", "bm25", "pages", "dense")],
            None,
        )
    latency = child("--step", "latency")
    from eval.run_env import machine, machine_line  # after the timed children

    result = {
        "dataset": args.dataset,
        "cache": cache,
        "cold_cache": (not args.cache) if cold is None else cold,
        "builds": builds,
        **latency,
        "machine": machine(),
        "command": " ".join(["python", "benchmarks/retrieval_speed.py"] + (argv or sys.argv[1:])),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"retrieval_speed_{args.dataset}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# Retrieval speed on {args.dataset}: {builds[0]['sentences']} sentences",
        "",
        f"Command: `{result['command']}`; {machine_line(result['machine'])}; "
        f"cold cache: {result['cold_cache']}.",
        "",
        "| build step | seconds | peak RSS (MB) |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {b['step']} | {b['seconds']:.1f} | {b['peak_rss_mb']:.0f} |" for b in builds]
    lines += [
        "",
        f"Latency per claim over {latency['claims']} claims (one query at a time unless noted):",
        "",
        "| retriever | median ms | p95 ms | mean ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, s in latency["latency"].items():
        med, p95 = s.get("median_ms", float("nan")), s.get("p95_ms", float("nan"))
        lines.append(f"| {name} | {med:.1f} | {p95:.1f} | {s['mean_ms']:.1f} |")
    (OUT / f"retrieval_speed_{args.dataset}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
