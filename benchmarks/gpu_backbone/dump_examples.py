"""Write the exact training examples of garag's default and joint verifiers to gzipped JSONL.

The GPU machine that trains another backbone gets these files instead of the corpus and its
indexes (the hard negatives and distractors come from retrieval over the FEVER corpus).  Each
set's digest is compared with the trained MiniLM verifier's meta.json and the outcome printed
("same data as verifier-...: True"), so both backbones can be shown to learn from the same examples.

    python benchmarks/gpu_backbone/dump_examples.py --cache <cache> --out <dir>
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
    ap.add_argument("--joint-config", default="configs/graph-joint.yaml")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, path in (("default", None), ("joint", args.joint_config)):
        cfg = load_config(path, [f"paths.cache_dir={args.cache}"])
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
