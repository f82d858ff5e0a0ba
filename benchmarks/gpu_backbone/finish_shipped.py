"""Finish a verifier that came back from a lent GPU (``transport.py unpack-delta``) as garag's own.

``garag train-verifier`` ends a training with the NEI calibration on the held-out train claims and,
for a per-sentence verifier, the claim-level aggregator fitted on their retrieved top 5.  A model
trained on the device and rebuilt here gets both the same way, on these weights:

    python benchmarks/gpu_backbone/finish_shipped.py FOLDER --val DATA_DIR/default-val.jsonl.gz \\
        --config configs/baseline.yaml+configs/mpnet.yaml --set paths.cache_dir=<cache>

``--config`` is a config the model will run with, since the calibration scores the validation
examples with its ``verifier.top_k`` and ``max_length``: for a joint (concat-mode) verifier one of
the joint configs (``configs/baseline.yaml+configs/joint-mpnet.yaml``) and its stage-2 validation file.  The
claim aggregator is fitted only where the config's verifier is per-sentence (a joint verifier has
none).  Then ``--set verifier.model=FOLDER`` (or ``verifier.mix_model``) runs any config with it.
The aggregator retrieves the validation claims with the config's cache (about 9 minutes for
all-mpnet-base-v2 on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from examples_io import load_examples  # noqa: E402

from garag.config import load_config  # noqa: E402
from pipeline.train_verifier import calibrate_trained, fit_claim_aggregator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="the rebuilt model (model.safetensors, config, tokenizer)")
    ap.add_argument("--val", type=Path, required=True, help="dump_examples.py's validation file")
    ap.add_argument("--config", default="configs/baseline.yaml")
    ap.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    args = ap.parse_args()
    if not (args.folder / "model.safetensors").is_file():
        raise SystemExit(f"{args.folder}: no model.safetensors (rebuild it with transport.py unpack-delta)")
    if not args.val.is_file():
        raise SystemExit(f"{args.val}: no such validation file (dump_examples.py writes it)")
    try:
        config = load_config(args.config, overrides=args.overrides)
    except (OSError, ValueError) as exc:
        raise SystemExit(str(exc)) from None
    val = load_examples(args.val)
    print("calibration", calibrate_trained(config, args.folder, val), flush=True)
    if config.verifier.mode == "per_sentence":
        print("aggregator", fit_claim_aggregator(config, args.folder, progress=False), flush=True)


if __name__ == "__main__":
    main()
