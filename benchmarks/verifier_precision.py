"""``verifier.precision``: the NLI verifier at bfloat16 against float32, same pairs, same process.

For each ``--run NAME CONFIG [KEY=VALUE ...]`` (a config and its ``--set`` overrides), the benchmark
retrieves the first ``--claims`` claims of the tune part with the config's retrievers (baseline
retrieval, fused), builds the (premise, claim) pairs its verifier reads (``per_sentence``: each of
the top ``verifier.top_k`` sentences alone; ``concat``: the top ``top_k`` as one premise), and scores
them with the config's verifier at float32 and at bfloat16, alternating, ``--repeats`` times each.
It reports pairs per second (the best of the repeats, so a busy moment does not count against one
side) and how far bfloat16's probabilities are from float32's: the largest and the mean absolute
difference, and the pairs whose likeliest label differs.  A mix's second verifier is measured as a
run of its own (``verifier.model=<its folder>``).

    python benchmarks/verifier_precision.py --cache <cache> \\
        --run minilm configs/baseline.yaml \\
        --run mpnet configs/baseline.yaml+configs/mpnet.yaml verifier.model=<folder> \\
        --run mpnet-joint configs/baseline.yaml+configs/joint-mpnet.yaml verifier.model=<folder> \\
        [--claims 200] [--out benchmarks/results/verifier_precision]

Where bfloat16 is fast depends on the machine: on CPUs with AMX or AVX512-BF16 (this one) and on
GPUs; elsewhere it is slower than float32, and the report says which CPU flags it saw.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from garag.artifacts import write_json_atomic, write_text_atomic  # noqa: E402
from garag.config import load_config  # noqa: E402
from pipeline.retrieval import RetrievalPipeline  # noqa: E402
from pipeline.train_verifier import ensure_verifier  # noqa: E402
from pipeline.verification import hits_to_evidence  # noqa: E402
from verifier.inputs import build_premise  # noqa: E402
from verifier.nli import NLIVerifier, cpu_has_bf16  # noqa: E402


def pairs_for(config, claims: int) -> tuple[list[str], list[str]]:  # noqa: ANN001 - a garag Config
    """The (premise, claim) pairs the config's verifier reads for the first ``claims`` tune claims."""
    pipe = RetrievalPipeline(config, progress=False)
    pipe.build()
    chosen = list(pipe.dataset.claims())[:claims]
    results = pipe.retrieve_batch([c.text for c in chosen])
    top_k = config.verifier.top_k
    premises, texts = [], []
    for claim, res in zip(chosen, results, strict=True):
        evidence = hits_to_evidence(res.fused, pipe.store, top_k)
        if config.verifier.mode == "concat":
            premises.append(build_premise(evidence, top_k))
            texts.append(claim.text)
        else:
            premises += [build_premise([e]) for e in evidence]
            texts += [claim.text] * len(evidence)
    return premises, texts


def measure(name: str, config_path: str, overrides: list[str], cache: str, claims: int, repeats: int) -> dict:
    config = load_config(config_path, [*overrides, f"paths.cache_dir={cache}", "data.part=tune"])
    premises, texts = pairs_for(config, claims)
    model = str(ensure_verifier(config, progress=False))
    verifiers = {
        p: NLIVerifier(config.verifier.replace(precision=p, device="cpu"), model).load()
        for p in ("float32", "bfloat16")
    }
    verifiers["float32"].predict_pairs(premises[:8], texts[:8])  # warm-up, both
    verifiers["bfloat16"].predict_pairs(premises[:8], texts[:8])
    seconds: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    probs: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for p, verifier in verifiers.items():
            started = time.perf_counter()
            probs[p] = np.asarray(verifier.predict_pairs(premises, texts))
            seconds[p].append(time.perf_counter() - started)
    full, half = probs["float32"], probs["bfloat16"]
    row = {
        "config": config_path,
        "overrides": overrides,
        "model": model,
        "mode": config.verifier.mode,
        "max_length": config.verifier.max_length,
        "claims": claims,
        "pairs": len(premises),
        "seconds": seconds,
        "pairs_per_s": {p: len(premises) / min(s) for p, s in seconds.items()},
        "max_abs_prob_diff": float(np.abs(full - half).max()),
        "mean_abs_prob_diff": float(np.abs(full - half).mean()),
        "labels_differing": int((full.argmax(1) != half.argmax(1)).sum()),
    }
    row["speedup"] = row["pairs_per_s"]["bfloat16"] / row["pairs_per_s"]["float32"]
    print(
        f"{name}: {row['pairs']} pairs, float32 {row['pairs_per_s']['float32']:.1f}/s, bfloat16 "
        f"{row['pairs_per_s']['bfloat16']:.1f}/s (x{row['speedup']:.2f}); labels differing "
        f"{row['labels_differing']}, max diff {row['max_abs_prob_diff']:.4f}",
        flush=True,
    )
    return row


def report(rows: dict[str, dict], command: str, machine: dict) -> str:
    lines = [
        "# Verifier precision: bfloat16 against float32 (same pairs, same process)",
        "",
        f"`{command}`",
        "",
        f"Machine: {machine['processor'] or machine['machine']}, {machine['threads']} torch threads, "
        f"bfloat16 CPU instructions (AMX / AVX512-BF16): {machine['cpu_bf16']}.  Pairs: those the "
        "config's verifier reads for the first claims of FEVER's tune part; pairs/s: the best of the "
        "repeats.",
        "",
        "| run | mode, tokens | pairs | float32 pairs/s | bfloat16 pairs/s | speed-up | labels differing "
        "| largest / mean prob. difference |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['mode']}, {r['max_length']} | {r['pairs']} | {r['pairs_per_s']['float32']:.1f} | "
            f"{r['pairs_per_s']['bfloat16']:.1f} | {r['speedup']:.2f}x | {r['labels_differing']} | "
            f"{r['max_abs_prob_diff']:.4f} / {r['mean_abs_prob_diff']:.5f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="+", action="append", required=True, metavar="NAME CONFIG [KEY=VALUE]")
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "verifier_precision"))
    args = ap.parse_args(argv)
    import torch

    if args.claims < 1 or args.repeats < 1:
        raise SystemExit("--claims and --repeats must be at least 1")
    rows = {}
    for spec in args.run:
        if len(spec) < 2 or spec[0] in rows:
            raise SystemExit(f"--run {' '.join(spec)}: expected NAME CONFIG [KEY=VALUE ...], each NAME once")
        name, config_path, *overrides = spec
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise SystemExit(f"--run {name}: {bad[0]!r} is not KEY=VALUE")
        rows[name] = measure(name, config_path, overrides, args.cache, args.claims, args.repeats)
    machine = {
        "processor": platform.processor(),
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "cpu_bf16": cpu_has_bf16(),
        "torch": torch.__version__,
    }
    command = " ".join(["python", "benchmarks/verifier_precision.py", *(argv or sys.argv[1:])])
    write_json_atomic(Path(args.out + ".json"), {"command": command, "machine": machine, "runs": rows})
    write_text_atomic(Path(args.out + ".md"), report(rows, command, machine))
    print(f"written: {args.out}.md")


if __name__ == "__main__":
    main()
