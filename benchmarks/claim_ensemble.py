"""Mix two runs' claim-level verdicts on a 3-way dataset (FEVER) and pick the mix on the tune part.

Run A and run B verified the same claims with different verifiers (e.g. MiniLM-L6 and
all-mpnet-base-v2, ``configs/baseline.yaml`` and
``configs/baseline.yaml+configs/mpnet.yaml``).  For each claim
the mixed scores are ``w * B + (1 - w) * A`` (the claim-level probabilities saved in each run's
predictions.jsonl ``scores``); the label is the likeliest, the predicted evidence B's.  The weight
is picked on the tune runs alone, over 0, 0.1, ..., 1, by the rule the NEI-bias trial of
benchmarks/results/mpnet_gpu.md fixed: the highest tune accuracy with every class's recall at
least run A's own (so no label falls below A's), a tie to the larger weight.  The pick is then
scored on the report runs, like ``garag evaluate``.

This reads saved runs only, to pick the weight; the pipeline mixes verifiers with
``verifier.mix_weight`` (verifier/mixed.py, ``configs/*-mix.yaml``).

    python benchmarks/claim_ensemble.py --tune A_TUNE_DIR B_TUNE_DIR --report A_REPORT_DIR B_REPORT_DIR \\
        [--out benchmarks/results/claim_ensemble]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from eval.verification_eval import records_from_file, score_records
from garag.artifacts import write_json_atomic, write_text_atomic
from garag.config import validate_config
from garag.datasets import dataset_from_config

GRID = tuple(round(0.1 * i, 1) for i in range(11))
LABELS = ("SUPPORTS", "NOT ENOUGH INFO", "REFUTES")


def load(run_dir: Path, part: str) -> tuple:
    """The dataset of ``part`` (from the run's config) and the run's records by claim id."""
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    cfg = validate_config(meta["config"])
    dataset = dataset_from_config(cfg.data.model_copy(update={"part": part}))
    if dataset.two_way:
        raise SystemExit(f"{run_dir}: dataset {dataset.name!r} is 2-way; this mix is for 3-way verdicts")
    for key, value in (("llm_judge", cfg.verifier.llm_judge), ("entity_check", cfg.verifier.entity_check)):
        if value == "always":  # they change labels, not scores: a mix of the scores would undo them
            raise SystemExit(f"{run_dir}/run.json: verifier.{key} is 'always', which this mix would undo")
    records = {r["id"]: r for r in records_from_file(run_dir / "predictions.jsonl")}
    return cfg, dataset, records


def pair(a_dir: Path, b_dir: Path, part: str) -> tuple:
    """Both runs' records of the part's claims, in one order; B's run must be of that part."""
    cfg_b, dataset, rec_b = load(b_dir, part)
    if cfg_b.data.part != part:
        raise SystemExit(f"{b_dir}/run.json: data.part is {cfg_b.data.part!r}, expected {part!r}")
    cfg_a, _, rec_a = load(a_dir, part)
    if cfg_a.data.dataset != cfg_b.data.dataset or cfg_a.data.claims != cfg_b.data.claims:
        raise SystemExit(f"{a_dir} and {b_dir}: runs of different claims")
    ids = [c.id for c in dataset.claims()]
    for name, recs in ((a_dir, rec_a), (b_dir, rec_b)):
        missing = [i for i in ids if i not in recs]
        if missing:
            raise SystemExit(
                f"{name}: {len(missing)} of the {len(ids)} {part} claims missing (e.g. {missing[0]})"
            )
    a = [rec_a[i] for i in ids]
    b = [rec_b[i] for i in ids]
    return dataset, a, b


def mixed(a: list[dict], b: list[dict], w: float) -> list[dict]:
    """B's records with the mixed label and scores."""
    pa = np.array([[r["scores"][k] for k in LABELS] for r in a], dtype=np.float64)
    pb = np.array([[r["scores"][k] for k in LABELS] for r in b], dtype=np.float64)
    p = w * pb + (1 - w) * pa
    out = []
    for r, row in zip(b, p, strict=True):
        label = LABELS[int(row.argmax())]
        scores = {k: round(float(x), 6) for k, x in zip(LABELS, row, strict=True)}
        out.append(
            {k: v for k, v in r.items() if k != "dataset_label"}
            | {"predicted_label": label, "scores": scores}
        )
    return out


def summary(dataset, records: list[dict]) -> dict:
    m = score_records(dataset, records)
    return {
        "accuracy": m["label_accuracy"],
        "fever_score": m["fever_score"],
        "recall": {k: m["per_class"][k]["recall"] for k in LABELS},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune", nargs=2, required=True, type=Path, metavar=("A_DIR", "B_DIR"))
    ap.add_argument("--report", nargs=2, required=True, type=Path, metavar=("A_DIR", "B_DIR"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "claim_ensemble"))
    args = ap.parse_args()
    try:
        dataset, a, b = pair(*args.tune, "tune")
        rows = {f"{w:g}": summary(dataset, mixed(a, b, w)) for w in GRID}
        floor = rows["0"]["recall"]
        allowed = [w for w in GRID if all(rows[f"{w:g}"]["recall"][k] >= floor[k] for k in LABELS)]
        pick = max(allowed, key=lambda w: (round(rows[f"{w:g}"]["accuracy"], 9), w))
        report_set, ra, rb = pair(*args.report, "report")
        report = {f"{w:g}": summary(report_set, mixed(ra, rb, w)) for w in sorted({0.0, pick, 1.0})}
    except (OSError, ValueError, KeyError, TypeError) as e:  # one line naming what could not be read
        raise SystemExit(f"claim_ensemble: cannot read the runs ({type(e).__name__}: {e})") from None
    command = shlex.join(["python", "benchmarks/claim_ensemble.py", *sys.argv[1:]])
    lines = [
        "# Two verifiers' claim-level verdicts mixed (weight picked on the tune part)",
        "",
        f"`{command}`",
        "",
        "Mixed scores: w * B + (1 - w) * A; pick: the highest tune accuracy with every recall at least A's",
        f"(A: `{args.tune[0]}`, B: `{args.tune[1]}`).",
        "",
        "| part | w | accuracy | FEVER score | recall S / NEI / R |",
        "|---|---:|---:|---:|---|",
    ]
    for part, table in (("tune", rows), ("report", report)):
        for w, r in table.items():
            mark = " **pick**" if float(w) == pick else ""
            rec = " / ".join(f"{r['recall'][k]:.3f}" for k in LABELS)
            lines.append(f"| {part} | {w}{mark} | {r['accuracy']:.4f} | {r['fever_score']:.4f} | {rec} |")
    text = "\n".join(lines) + "\n"
    try:
        write_json_atomic(
            Path(args.out + ".json"), {"command": command, "pick": pick, "tune": rows, "report": report}
        )
        write_text_atomic(Path(args.out + ".md"), text)
    except OSError as e:
        raise SystemExit(f"--out {args.out}: cannot write ({e})") from None
    print(text)


if __name__ == "__main__":
    main()
