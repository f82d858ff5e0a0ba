"""Write the exact training examples of garag's default and joint verifiers to gzipped JSONL.

The GPU machine that trains another backbone gets these files instead of the corpus and its
indexes (the hard negatives and distractors come from retrieval over the FEVER corpus).  Each
set's digest is compared with the trained MiniLM verifier's meta.json and the outcome printed
("same data as verifier-...: True"), so both backbones can be shown to learn from the same examples.

    python benchmarks/gpu_backbone/dump_examples.py --cache <cache> --out <dir>
    (another joint set: --joint-only --name comp3 --set train.compositional=3.0 writes comp3-*)
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from garag.artifacts import read_meta
from garag.config import load_config
from pipeline.train_verifier import _base_verifier_config, _digest, prepare_examples, verifier_artifact_dir


def dump(examples, path: Path) -> None:  # noqa: ANN001 - TrainExample list
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for ex in examples:
            ev = [[e.sentence.page, e.sentence.line, e.text, e.score] for e in ex.evidence]
            f.write(
                json.dumps({"claim": ex.claim, "label": ex.label.value, "id": ex.claim_id, "ev": ev}) + "\n"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True, help="garag cache holding the FEVER indexes and verifiers")
    ap.add_argument("--out", required=True)
    ap.add_argument("--joint-config", default="configs/graph.yaml+configs/joint.yaml")
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override in the joint config"
    )
    ap.add_argument("--name", default="joint", help="file name stem of the joint set (default joint)")
    ap.add_argument("--joint-only", action="store_true", help="skip the default verifier's examples")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = (
        [("joint", args.joint_config)]
        if args.joint_only
        else [("default", None), ("joint", args.joint_config)]
    )
    for name, path in sets:
        cfg = load_config(path, [f"paths.cache_dir={args.cache}", *(args.set if name == "joint" else [])])
        name = args.name if name == "joint" else name
        if name == "default":
            cfg = _base_verifier_config(cfg)
        started = time.time()
        train, val, _ = prepare_examples(cfg, progress=False)
        meta = read_meta(verifier_artifact_dir(cfg)) or {}
        same = meta.get("data", {}).get("train_sha256") == _digest(train)
        print(
            f"{name}: {len(train)} train, {len(val)} validation examples in {time.time() - started:.0f} s; "
            f"same data as {verifier_artifact_dir(cfg).name}: {same}"
        )
        dump(train, out / f"{name}-train.jsonl.gz")
        dump(val, out / f"{name}-val.jsonl.gz")
        settings = {"train": cfg.train.model_dump(), "verifier": cfg.verifier.model_dump()}
        (out / f"{name}-cfg.json").write_text(json.dumps(settings, indent=1, default=str))


if __name__ == "__main__":
    main()
