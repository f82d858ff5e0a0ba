"""Cross-fitted teacher probabilities for distilling a backbone into garag's MiniLM verifier (GPU).

For the default (per-sentence) verifier's training examples (``dump_examples.py``'s
``default-{train,val,cfg}``): the train examples are split into ``K`` folds by claim id; for each
fold a teacher is trained from the backbone on the other folds (the default verifier's recipe, with
``TEACHER_LR`` and ``TEACHER_EPOCHS``; the held-out train claims of ``default-val`` for early
stopping) and scores its fold's examples.  So every example's soft target comes from a teacher that
never saw its claim.  Written with ``verifier.distill.write_teacher`` as OUT/teacher-default.jsonl.gz
(``train.distill`` reads it; a pair met twice gets the mean of its scores).

Then, with ``STUDENTS`` (``weight:temperature,...``) and a student backbone (``--student``), a
student is trained per setting on all the train examples with those soft targets (``0:1`` is the
control: the labels alone) and its validation accuracy reported, so the setting can be chosen on
held-out train claims before the 45-minute CPU training.  ``JOINT=1`` does the same cross-fitting
for the joint verifier's examples (``joint-*``; each fold's teacher continues from the same fold's
default teacher), written as OUT/teacher-joint.jsonl.gz.  Everything is written as it is done
(OUT/teacher-result.json), so a run stopped at its time limit keeps what it finished.

    K=3 STUDENTS=0:1,0.5:1,0.8:1,0.5:2 JOINT=1 python3 teacher_on_device.py DATA_DIR TEACHER_DIR WORK OUT \\
        --student MINILM_DIR      (--quick: 96 examples per fold, a smoke test)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from examples_io import load_examples  # noqa: E402

from garag.config import TrainConfig, VerifierConfig  # noqa: E402
from verifier.distill import example_key, read_teacher, soft_targets, write_teacher  # noqa: E402
from verifier.inputs import build_premise  # noqa: E402
from verifier.labels import LABEL_ORDER  # noqa: E402
from verifier.nli import NLIVerifier  # noqa: E402
from verifier.train import train_verifier  # noqa: E402

T0 = time.time()
RESULT: dict = {"cuda": torch.cuda.is_available()}


def log(*a) -> None:
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def save(out: Path) -> None:
    RESULT["elapsed_s"] = round(time.time() - T0, 1)
    tmp = out / "teacher-result.json.tmp"
    tmp.write_text(json.dumps(RESULT, indent=1, default=str))
    tmp.replace(out / "teacher-result.json")


def fold_of(claim_id: object, k: int) -> int:
    return int(hashlib.sha256(str(claim_id).encode()).hexdigest()[:8], 16) % k


def cross_fit(name, data, start_from, k, lr, epochs, work, out, quick, starts=None):
    """Train k teachers (fold f held out) and score each fold; return (rows, model dirs by fold)."""
    cfgs = json.loads((data / f"{name}-cfg.json").read_text())
    train = load_examples(data / f"{name}-train.jsonl.gz")
    val = load_examples(data / f"{name}-val.jsonl.gz", 64 if quick else None)
    folds = [fold_of(ex.claim_id, k) for ex in train]
    tc = {key: v for key, v in cfgs["train"].items() if key in TrainConfig.model_fields}
    # the teacher learns from the labels alone, whatever the dumped settings say
    tc.update(learning_rate=lr, epochs=epochs, base_model="(gpu)", distill="")
    if quick:
        tc.update(epochs=1, eval_every=0)
    tcfg = TrainConfig(**tc)
    vcfg = VerifierConfig(**{**cfgs["verifier"], "nei_bias": 0.0, "device": "auto"})
    sums: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    dirs = {}
    entries = RESULT.setdefault(f"{name}_folds", [])
    for f in range(k):
        part = [ex for ex, g in zip(train, folds, strict=True) if g != f]
        held = [ex for ex, g in zip(train, folds, strict=True) if g == f]
        if quick:
            part, held = part[:96], held[:96]
        t = time.time()
        base = str(starts[f]) if starts else str(start_from)
        res = train_verifier(part, val, tcfg, base, work / f"{name}-fold{f}", progress=False)
        secs = round(time.time() - t, 1)
        scorer = NLIVerifier(vcfg, str(res.model_dir)).load()
        probs = scorer.predict_pairs([build_premise(ex.evidence) for ex in held], [ex.claim for ex in held])
        for ex, p in zip(held, probs, strict=True):
            key = example_key(ex)
            acc = sums.setdefault(key, [0.0, 0.0, 0.0])
            for i in range(3):
                acc[i] += float(p[i])
            counts[key] = counts.get(key, 0) + 1
        right = sum(int(p.argmax()) == LABEL_ORDER.index(ex.label) for ex, p in zip(held, probs, strict=True))
        entries.append(
            {
                "fold": f,
                "train": len(part),
                "held_out": len(held),
                "held_out_accuracy": round(right / max(1, len(held)), 4),
                "best_val": res.best_val,
                "steps": res.steps,
                "seconds": secs,
            }
        )
        dirs[f] = res.model_dir
        log(
            f"{name} fold {f}: trained on {len(part)}, held-out accuracy {right / max(1, len(held)):.4f}, "
            f"val {res.best_val['accuracy']:.4f}, {secs} s"
        )
        save(out)
    rows = [(key, [v / counts[key] for v in acc]) for key, acc in sums.items()]
    n = write_teacher(out / f"teacher-{name}.jsonl.gz", rows)
    RESULT[f"teacher_{name}_rows"] = n
    save(out)
    log(f"teacher-{name}.jsonl.gz: {n} rows")
    return dirs


def students(data, student_dir, specs, work, out, quick):
    cfgs = json.loads((data / "default-cfg.json").read_text())
    train = load_examples(data / "default-train.jsonl.gz", 192 if quick else None)
    val = load_examples(data / "default-val.jsonl.gz", 64 if quick else None)
    teacher = read_teacher(out / "teacher-default.jsonl.gz")
    targets, missing = soft_targets(train, teacher)
    RESULT["student_targets_missing"] = missing
    tc = {key: v for key, v in cfgs["train"].items() if key in TrainConfig.model_fields}
    for spec in specs:
        weight, temp = (float(x) for x in spec.split(":"))
        tc.update(base_model="(gpu)", distill="teacher", distill_weight=weight, distill_temperature=temp)
        if quick:
            tc.update(epochs=1, eval_every=0)
        t = time.time()
        res = train_verifier(
            train,
            val,
            TrainConfig(**tc),
            str(student_dir),
            work / f"student-{weight}-{temp}",
            progress=False,
            soft_targets=targets,
        )
        entry = {
            "weight": weight,
            "temperature": temp,
            "best_val": res.best_val,
            "steps": res.steps,
            "seconds": round(time.time() - t, 1),
        }
        RESULT.setdefault("students", []).append(entry)
        BEST.append((res.best_val["accuracy"], entry, res.model_dir))
        log(
            f"student w {weight} T {temp}: val accuracy {res.best_val['accuracy']:.4f} "
            f"(macro-F1 {res.best_val['macro_f1']:.4f}), {entry['seconds']} s"
        )
        save(out)


BEST: list = []
CHUNK = 16_000_000  # files that come back from the machine: at most 16 MiB each


def keep_best(out: Path) -> None:
    """The best student's weights as float16 safetensors in chunks (OUT/student-fp16.safetensors.NNN)."""
    from safetensors.torch import load_file, save_file

    acc, entry, model_dir = max(BEST, key=lambda b: b[0])
    weights = {
        k: (v.half() if v.is_floating_point() else v)
        for k, v in load_file(str(model_dir / "model.safetensors")).items()
    }
    raw = out.parent / "student-fp16.safetensors"
    save_file(weights, str(raw), metadata={"format": "pt"})
    data = raw.read_bytes()
    for i in range(0, len(data), CHUNK):
        (out / f"student-fp16.safetensors.{i // CHUNK:03d}").write_bytes(data[i : i + CHUNK])
    RESULT["kept_student"] = {
        **entry,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "config": json.loads((model_dir / "config.json").read_text()),
    }
    save(out)
    log(f"kept the student w {entry['weight']} T {entry['temperature']} ({len(data)} bytes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("teacher", type=Path, help="the teacher's backbone folder")
    ap.add_argument("work", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--student", type=Path, help="the student's backbone folder (for STUDENTS)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    args.out.mkdir(parents=True, exist_ok=True)
    k = int(os.environ.get("K", "3"))
    RESULT.update(k=k, device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    lr = float(os.environ.get("TEACHER_LR", "5e-5"))
    epochs = int(os.environ.get("TEACHER_EPOCHS", "3"))
    dirs = cross_fit("default", args.data, args.teacher, k, lr, epochs, args.work, args.out, args.quick)
    specs = [s for s in os.environ.get("STUDENTS", "").split(",") if s]
    if specs:
        if args.student is None:
            sys.exit("teacher_on_device: STUDENTS needs --student")
        students(args.data, args.student, specs, args.work, args.out, args.quick)
        if os.environ.get("KEEP_BEST", "0") == "1":
            keep_best(args.out)
    if os.environ.get("JOINT", "0") == "1":
        cross_fit("joint", args.data, None, k, 3e-5, 2, args.work, args.out, args.quick, starts=dirs)
    RESULT["done"] = True
    save(args.out)
    log("done")


if __name__ == "__main__":
    main()
