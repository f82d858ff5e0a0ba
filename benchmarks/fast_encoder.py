"""Fast CPU sentence encoders against MiniLM: encoding throughput per core, and retrieval recall.

Encoders (each a ``dense.model`` name, so the corpus and the queries use the same one):
``minilm`` (all-MiniLM-L6-v2, the default), ``model2vec-minilm`` (a static model distilled offline from
it, PCA to 256 dimensions), ``model2vec-minilm-128`` / ``-384`` (other PCA sizes) and ``wordllama``
(the 256-d table the wordllama wheel ships).

Parts (``--parts``):

* distill: the one-off cost of each distilled model (its first use distils it into the cache dir);
  skipped (and reported as reused) when the cache already holds it.
* throughput: each encoder in its own process at 1 and 2 threads (``OMP/MKL/RAYON_NUM_THREADS`` and
  ``torch.set_num_threads``), on a seeded sample of real corpus sentences (FEVER + HoVer pages, as the
  dense index embeds them: ``"Title: sentence"``); sentences per second of wall time and per core
  from the process's CPU time (``getrusage``: user + system of all its threads).  MiniLM encodes
  ``--minilm-sample`` sentences, the static encoders every sentence of the corpus.
* recall: ``garag evaluate-retrieval`` (``eval.retrieval_eval.evaluate_retrieval``) on the **tune**
  parts, FEVER with configs/baseline.yaml and HoVer with configs/graph.yaml, with each encoder as
  ``dense.model``: recall@5 and @20 of the fused list and of the dense retriever alone.

Results are merged into ``benchmarks/results/fast_encoder.json`` (a part run again replaces its own
numbers) and ``fast_encoder.md`` is written from it.

    python benchmarks/fast_encoder.py [--cache /work/gc] [--parts distill,throughput,recall]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results"
ENCODERS = ("minilm", "model2vec-minilm", "model2vec-minilm-128", "model2vec-minilm-384", "wordllama")
DISTILLED = tuple(e for e in ENCODERS if e.startswith("model2vec-"))
RECALL_RUNS = (("fever", "configs/baseline.yaml"), ("hover", "configs/graph.yaml"))
SEED = 54


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike getrusage's, not inherited from the parent at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def corpus_texts() -> list[str]:
    """Every sentence of the embedded FEVER and HoVer corpora as the dense index embeds it."""
    from garag.datasets import fever, hover
    from garag.wiki import iter_pages
    from retrievers.dense import sentence_text

    return [
        sentence_text(p.id, t, True)
        for data in (fever(), hover())
        for p in iter_pages(data.corpus_path)
        for _, t, _ in p.sentences()
    ]


# ---------------------------------------------------------------------------------------- parts
def part_distill(cache: Path) -> dict:
    from retrievers.embeddings import SentenceEncoder

    out = {}
    for name in DISTILLED:
        enc = SentenceEncoder(name, "cpu", cache_dir=cache)
        made = not (Path(enc.model) / "config.json").is_file()
        t, cpu = time.perf_counter(), _cpu()
        identity = enc.identity  # distils when the cache lacks it
        out[name] = {
            "made_now": made,
            "wall_s": round(time.perf_counter() - t, 2) if made else None,
            "cpu_s": round(_cpu() - cpu, 2) if made else None,
            "identity": identity,
            "dir": enc.model,
        }
        print(f"distill {name}: {out[name]}", flush=True)
    return out


def throughput_worker(encoder: str, threads: int, n: int, cache: str) -> dict:
    """Run in a child process whose thread variables the parent set."""
    import torch

    from retrievers.embeddings import SentenceEncoder

    torch.set_num_threads(threads)
    texts = corpus_texts()
    random.Random(SEED).shuffle(texts)
    texts = texts[:n] if n else texts
    enc = SentenceEncoder(encoder, "cpu", batch_size=128, cache_dir=cache).load()
    enc.encode(texts[:256])  # warm up (first-call allocations, lazy init)
    t, cpu = time.perf_counter(), _cpu()
    vecs = enc.encode(texts)
    wall, cpu = time.perf_counter() - t, _cpu() - cpu
    return {
        "encoder": encoder,
        "threads": threads,
        "sentences": len(texts),
        "dim": int(vecs.shape[1]),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "sentences_per_s": round(len(texts) / wall, 1),
        "sentences_per_core_s": round(len(texts) / cpu, 1),
        "rss_peak_mb": round(_peak_rss_mb(), 1),
    }


def part_throughput(args: argparse.Namespace) -> list[dict]:
    rows = []
    for encoder in args.encoders:
        for threads in args.threads:
            env = dict(os.environ, PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="true")
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
                env[var] = str(threads)
            n = args.minilm_sample if encoder == "minilm" else 0
            cmd = [sys.executable, __file__, "--worker", encoder, str(threads), str(n), "--cache", args.cache]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode:
                raise SystemExit(f"throughput {encoder} x{threads}: {proc.stderr.strip().splitlines()[-1]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"throughput {row}", flush=True)
            rows.append(row)
    return rows


def part_recall(args: argparse.Namespace) -> list[dict]:
    from eval.retrieval_eval import evaluate_retrieval
    from garag.config import load_config

    rows = []
    for encoder in args.encoders:
        for dataset, config_file in RECALL_RUNS:
            overrides = [
                f"data.dataset={dataset}",
                "data.part=tune",
                f"paths.cache_dir={args.cache}",
                f"dense.model={encoder}",
            ]
            config = load_config(str(REPO / config_file), overrides)
            t = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                result = evaluate_retrieval(config, out_dir=tmp, progress=False)
            row = {
                "encoder": encoder,
                "dataset": dataset,
                "config": config_file,
                "claims": result.reports["fused"].overall.n_claims,
                "seconds": round(time.perf_counter() - t, 1),
            }
            for system in ("fused", "dense"):
                recall = dict(result.reports[system].overall.recall_at_k)
                row[f"{system}_r5"], row[f"{system}_r20"] = recall[5], recall[20]
            print(f"recall {row}", flush=True)
            rows.append(row)
    return rows


# ------------------------------------------------------------------------------------- report
def markdown(res: dict) -> str:
    lines = [
        "# Fast CPU sentence encoders (issue 54, item 1)",
        "",
        f"Machine: {res.get('machine', '')}. Commands, by part:",
        "",
        *[f"* {part}: `{cmd}`" for part, cmd in res.get("commands", {}).items()],
        "",
    ]
    if "distill" in res:
        lines += ["## Distillation (once per source model and size, kept in the cache dir)", ""]
        lines += ["| model | made in this run | wall s | CPU s |", "|---|---|---:|---:|"]
        for name, d in res["distill"].items():
            made = "yes" if d["made_now"] else "no (reused)"
            lines.append(f"| {name} | {made} | {d['wall_s']} | {d['cpu_s']} |")
        lines.append("")
    if "throughput" in res:
        lines += [
            '## Encoding throughput (real corpus sentences, `"Title: sentence"`)',
            "",
            "Per core = sentences / process CPU seconds (all threads); the machine's 2 cores are shared "
            "with other jobs, so wall-clock numbers are noisier than the per-core ones.",
            "",
            "| encoder | dim | threads | sentences | wall s | sentences/s | sentences/s/core | x MiniLM "
            "per core | peak RSS MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        rows = res["throughput"]
        base = {r["threads"]: r["sentences_per_core_s"] for r in rows if r["encoder"] == "minilm"}
        for r in res["throughput"]:
            ratio = r["sentences_per_core_s"] / base[r["threads"]] if r["threads"] in base else float("nan")
            lines.append(
                f"| {r['encoder']} | {r['dim']} | {r['threads']} | {r['sentences']} | {r['wall_s']} | "
                f"{r['sentences_per_s']:.0f} | {r['sentences_per_core_s']:.0f} | {ratio:.0f} | "
                f"{r['rss_peak_mb']:.0f} |"
            )
        lines.append("")
    if "recall" in res:
        lines += [
            "## Recall on the tune parts (FEVER: configs/baseline.yaml, HoVer: configs/graph.yaml)",
            "",
            "Recall@k of complete gold evidence sets (eval/retrieval_metrics.py); Δ = points (x100) against "
            "MiniLM on the same dataset.",
            "",
            "| dataset | encoder | claims | fused R@5 | fused R@20 | Δ fused R@20 | dense R@5 | dense R@20 "
            "| Δ dense R@20 |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        base = {r["dataset"]: r for r in res["recall"] if r["encoder"] == "minilm"}
        for r in sorted(res["recall"], key=lambda r: r["dataset"]):
            b = base.get(r["dataset"])
            dfused = f"{100 * (r['fused_r20'] - b['fused_r20']):+.1f}" if b else "n/a"
            ddense = f"{100 * (r['dense_r20'] - b['dense_r20']):+.1f}" if b else "n/a"
            lines.append(
                f"| {r['dataset']} | {r['encoder']} | {r['claims']} | {r['fused_r5']:.3f} | "
                f"{r['fused_r20']:.3f} | {dfused} | {r['dense_r5']:.3f} | {r['dense_r20']:.3f} | {ddense} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default="cache", help="artifact cache (MiniLM vectors are reused from it)")
    ap.add_argument("--parts", default="distill,throughput,recall", help="'' rewrites the .md only")
    ap.add_argument("--encoders", nargs="+", default=list(ENCODERS))
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--minilm-sample", type=int, default=2000, help="sentences MiniLM encodes")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--worker", nargs=3, metavar=("ENCODER", "THREADS", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        encoder, threads, n = args.worker
        print(json.dumps(throughput_worker(encoder, int(threads), int(n), args.cache)))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - {"distill", "throughput", "recall"}
    if unknown:
        raise SystemExit(f"--parts: unknown part(s) {sorted(unknown)} (distill, throughput, recall)")
    out = Path(args.out)
    path = out / "fast_encoder.json"
    res = json.loads(path.read_text()) if path.is_file() else {}
    given = argv if argv is not None else sys.argv[1:]
    command = "python benchmarks/fast_encoder.py " + " ".join(given)
    res.pop("command", None)
    res.setdefault("commands", {}).update({part: command for part in parts})
    res["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared)"
    if "distill" in parts:
        res["distill"] = part_distill(Path(args.cache))
    if "throughput" in parts:
        res["throughput"] = part_throughput(args)
    if "recall" in parts:
        res["recall"] = part_recall(args)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    text = markdown(res)
    (out / "fast_encoder.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
