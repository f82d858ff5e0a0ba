"""Premises per second of candidate verifier backbones (issue 18: compare the offline backbones).

Each backbone reads the joint verifier's input, a HoVer claim with 8 corpus sentences as one
premise cut at 320 tokens, in batches of 16 on the CPU threads given; a classifier head of
3 labels is put on a backbone that has none (its weights do not change the time).

    python benchmarks/backbone_speed.py --backbone minilm-joint=<cache>/verifier-.../model \\
        --backbone mpnet=<dir>/all-mpnet-base-v2 [--claims 48] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent


def premises(claims: int) -> list[tuple[str, str]]:
    """The first ``claims`` HoVer claims, each with 8 sentences (over 40 characters) of the corpus."""
    sentences: list[str] = []
    for path in sorted((ROOT / "data" / "hover" / "wiki-pages").glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                for row in json.loads(line)["lines"].split("\n"):
                    parts = row.split("\t")
                    if len(parts) > 1 and len(parts[1]) > 40:
                        sentences.append(parts[1])
                if len(sentences) >= 8 * claims:
                    break
        if len(sentences) >= 8 * claims:
            break
    with (ROOT / "data" / "hover" / "claims.jsonl").open(encoding="utf-8") as f:
        texts = [json.loads(line)["claim"] for _, line in zip(range(claims), f, strict=False)]
    return [(c, " ".join(sentences[i * 8 : (i + 1) * 8])) for i, c in enumerate(texts)]


def measure(path: str, pairs: list[tuple[str, str]], batch: int) -> dict:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=3).eval()

    def run(chunk: list[tuple[str, str]]) -> None:
        enc = tok(
            [a for a, _ in chunk],
            [b for _, b in chunk],
            truncation=True,
            max_length=320,
            padding=True,
            return_tensors="pt",
        )
        model(**enc)

    with torch.inference_mode():
        run(pairs[:batch])  # warm-up
        started = time.perf_counter()
        for s in range(0, len(pairs), batch):
            run(pairs[s : s + batch])
        seconds = time.perf_counter() - started
    return {
        "premises_per_s": len(pairs) / seconds,
        "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", action="append", required=True, help="NAME=PATH (a model directory)")
    ap.add_argument("--claims", type=int, default=48)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    pairs = premises(args.claims)
    rows = []
    for spec in args.backbone:
        name, sep, path = spec.partition("=")
        if not sep or not Path(path).is_dir():
            ap.error(f"--backbone {spec!r}: expected NAME=PATH to a model directory")
        rows.append({"backbone": name, "path_name": Path(path).name, **measure(path, pairs, args.batch)})
    result = {
        "rows": rows,
        "claims": len(pairs),
        "threads": args.threads,
        "command": "python benchmarks/backbone_speed.py " + shlex.join(argv),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "backbone_speed.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"# Verifier backbones: premises per second ({args.threads} CPU threads)",
        "",
        f"Command: `{result['command']}`",
        "",
        "A HoVer claim with 8 corpus sentences as one premise, cut at 320 tokens, batches of "
        f"{args.batch}, {len(pairs)} premises.",
        "",
        "| backbone | parameters (M) | premises/s |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {r['backbone']} | {r['params_m']:.0f} | {r['premises_per_s']:.1f} |" for r in rows]
    (args.out / "backbone_speed.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
