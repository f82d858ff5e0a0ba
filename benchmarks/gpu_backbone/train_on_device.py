"""Train a backbone as garag's verifier on a GPU machine, with garag's own loop, and score recorded pairs.

Stage 1 takes the default per-sentence verifier's examples and settings; stage 2 the joint
verifier's (configs/joint.yaml's train section), continuing from stage 1 as
``train.base_model: garag`` does (a variant ending in ``:raw`` starts from the backbone instead).
Each stage tries the ``lr:epochs`` variants of $V1 / $V2 and keeps the best validation accuracy
on its held-out train claims, then calibrates the NEI bias as ``garag train-verifier`` does.
Last, every pair in DATA_DIR/pairs-{joint,default}.jsonl.gz (pairs.py record) is scored with no
NEI bias (the replay applies the calibrated one).  Results go to OUT/result.json and
OUT/probs-*.jsonl.gz (stage 2's best variant in probs-joint.jsonl.gz, tagged mpnet-$STAGE2,
unless ALL2=1: below).  Only variants trained on stage 2's own examples compete for "best" (their
validation sets are the same); one on other examples is trained and kept under ALL2 alone.

    V1=2e-5:3,5e-5:3 V2=3e-5:1,3e-5:2,3e-5:2:raw python train_on_device.py DATA_DIR MODEL_DIR WORK OUT
    ($STAGE2 names stage 2's files, default "joint"; SCORE_DEFAULT=0 skips the per-sentence pairs)
    (DATA_DIR: dump_examples.py's files and the pairs; --quick: 64 examples, 50 pairs, a smoke test)

Every variant, not only the best: with ALL2=1 each stage-2 variant's scores are written too,
tagged ``mpnet-<variant>`` in OUT/probs-joint.jsonl.gz, and its validation probabilities in
OUT/val-joint.jsonl.gz (so ensembles and NEI biases can be worked out afterwards).  A variant
may name its seed and its examples: ``3e-5:2:s7:dhard`` trains with ``train.seed`` 7 on
DATA_DIR/hard-{train,val,cfg}.  SOUP=a+b+c (ALL2=1 only) averages the weights of those stage-2
variants, which must start from stage 1 and use stage 2's own examples (a uniform "model soup"),
into one more model, calibrated and scored as ``mpnet-soup`` as soon as its parts are trained.
Validation rows carry their position (``row``): claim ids repeat across examples.

Stage 1's model itself can come back: ``STAGES=1`` stops after stage 1, and ``SHIP=N`` packs its
weights as int8 changes from the backbone (``transport.py pack-delta``, chunks of 16,000,000
bytes in WORK/ship), checks the rebuilt model against the trained one on the validation examples
(largest probability difference, labels that differ: ``result.json``'s ``ship``), puts its small
files into OUT/small.tar and copies the first N chunks to OUT; a later call copies the rest
(``cp WORK/ship/delta-int8.00[N-] $OUT/``, while the machine is warm).  ``SHIP2=N`` does the same
for stage 2's chosen model (its own validation examples; WORK/ship2, OUT/small2.tar, chunks
``delta2-int8.*``), after both stages.
"""

import gzip
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True

from examples_io import load_examples  # noqa: E402

from garag.config import TrainConfig, VerifierConfig  # noqa: E402
from verifier.calibration import calibrate_nei_bias  # noqa: E402
from verifier.inputs import build_premise  # noqa: E402
from verifier.labels import LABEL_ORDER  # noqa: E402
from verifier.nli import NLIVerifier  # noqa: E402
from verifier.train import train_verifier  # noqa: E402

data, base, work, out = (Path(a) for a in sys.argv[1:5])
quick = "--quick" in sys.argv
work.mkdir(parents=True, exist_ok=True)
out.mkdir(parents=True, exist_ok=True)
T0 = time.time()
result = {
    "torch": torch.__version__,
    "cuda": torch.cuda.is_available(),
    "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
}
import transformers  # noqa: E402

result["transformers"] = transformers.__version__


def save():
    result["elapsed_s"] = round(time.time() - T0, 1)
    tmp = out / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=1, default=str))
    tmp.replace(out / "result.json")


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def stage(name, base_model, variants, keep=None):
    """Train each variant; return the best of those on ``name``'s own examples (entry, model dir,
    scorer).  ``keep(tag, dir, scorer, va, cfgs)`` is called for every variant (ALL2)."""
    best = None
    for lr, epochs, raw, seed, data_name in variants:
        files = data_name or name
        cfgs = json.loads((data / f"{files}-cfg.json").read_text())
        lim = (64, 32) if quick else (None, None)
        tr = load_examples(data / f"{files}-train.jsonl.gz", lim[0])
        va = load_examples(data / f"{files}-val.jsonl.gz", lim[1])
        log(name, files, "train", len(tr), "val", len(va))
        # settings of a garag branch this one lacks (e.g. a data-building option) only shaped the examples
        tc = {k: v for k, v in cfgs["train"].items() if k in TrainConfig.model_fields}
        dropped = sorted(set(cfgs["train"]) - set(tc))
        if dropped:
            log(f"{files}-cfg.json: train settings unknown to this garag, not passed on: {dropped}")
        tc.update(learning_rate=lr, epochs=epochs, base_model="(gpu)")
        if seed is not None:
            tc.update(seed=seed)
        if quick:
            tc.update(epochs=1, eval_every=0)
        tcfg = TrainConfig(**tc)
        t = time.time()
        start_from = base if raw else base_model
        tag = (
            f"{files}-lr{lr}-e{epochs}" + ("-raw" if raw else "") + (f"-s{seed}" if seed is not None else "")
        )
        res = train_verifier(tr, va, tcfg, str(start_from), work / tag, progress=False)
        secs = round(time.time() - t, 1)
        vcfg = VerifierConfig(**{**cfgs["verifier"], "nei_bias": 0.0, "device": "auto"})
        scorer = NLIVerifier(vcfg, str(res.model_dir)).load()
        cal = calibrate_nei_bias(res.model_dir, va, scorer.predict_pairs, vcfg.top_k)
        entry = {
            "tag": tag,
            "lr": lr,
            "epochs": epochs,
            "from_raw_backbone": raw,
            "seed": tcfg.seed,
            "data": files,
            "best_val": res.best_val,
            "history": res.history,
            "steps": res.steps,
            "train_seconds": secs,
            "calibration": cal,
            "scorer_device": scorer.device,
        }
        result.setdefault(name, []).append(entry)
        acc = res.best_val["accuracy"]
        log(f"{name} {tag}: val acc {acc}, {res.steps} steps, {secs} s, {cal}")
        save()
        if keep is not None:
            keep(tag, res.model_dir, scorer, va, cfgs)
        if files != name:  # another validation set: its accuracy does not compare
            continue
        if best is None or res.best_val["accuracy"] > best[0]["best_val"]["accuracy"]:
            best = (entry, res.model_dir, scorer)
    if best is None:
        sys.exit(f"train_on_device: no {name} variant trained on {name}'s own examples")
    result[f"{name}_chosen"] = [best[0]["lr"], best[0]["epochs"], best[0]["from_raw_backbone"]]
    result[f"{name}_chosen_tag"] = best[0]["tag"]
    save()
    return best


def score(name, scorer, tag):
    src = data / f"pairs-{name}.jsonl.gz"
    if not src.is_file():
        log("no pairs for", name)
        return
    rows = [json.loads(x) for x in gzip.open(src, "rt", encoding="utf-8")]
    if quick:
        rows = rows[:50]
    t = time.time()
    probs = scorer.predict_pairs([r["p"] for r in rows], [r["c"] for r in rows])
    secs = time.time() - t
    with gzip.open(out / f"probs-{name}.jsonl.gz", "wt", encoding="utf-8") as f:
        for r, p in zip(rows, probs, strict=True):
            f.write(
                json.dumps({"m": tag, "p": r["p"], "c": r["c"], "probs": [round(float(x), 6) for x in p]})
                + "\n"
            )
    result[f"scored_{name}"] = {"pairs": len(rows), "seconds": round(secs, 1)}
    log("scored", name, len(rows), "pairs in", round(secs, 1), "s")
    save()


def variants(spec):  # "lr:epochs[:raw][:sSEED][:dDATA],..."; raw = start from the backbone, not stage 1
    out = []
    for v in spec.split(","):
        f = v.split(":")
        raw, seed, data_name = False, None, None
        for x in f[2:]:
            if x == "raw" and not raw:
                raw = True
            elif x[:1] == "s" and x[1:].isdigit() and seed is None:
                seed = int(x[1:])
            elif x[:1] == "d" and len(x) > 1 and data_name is None:
                data_name = x[1:]
            else:
                sys.exit(f"train_on_device: variant {v!r}: flag {x!r} is unknown, empty or repeated")
        out.append((float(f[0]), int(f[1]), raw, seed, data_name))
    return out


ALL_PROBS, ALL_VAL = [], []


def write_gz(path, rows):
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    tmp.replace(path)


def keep_variant(tag, model_dir, scorer, va, cfgs):
    """Score the joint pairs and the validation examples with this variant (no NEI bias)."""
    src = data / "pairs-joint.jsonl.gz"
    rows = [json.loads(x) for x in gzip.open(src, "rt", encoding="utf-8")] if src.is_file() else []
    if not rows:
        log("no pairs for joint: only the validation probabilities of", tag, "are kept")
    if quick:
        rows = rows[:50]
    probs = scorer.predict_pairs([r["p"] for r in rows], [r["c"] for r in rows]) if rows else []
    for r, p in zip(rows, probs, strict=True):
        ALL_PROBS.append(
            {"m": f"mpnet-{tag}", "p": r["p"], "c": r["c"], "probs": [round(float(x), 6) for x in p]}
        )
    top_k = cfgs["verifier"]["top_k"]
    vp = scorer.predict_pairs([build_premise(ex.evidence, top_k) for ex in va], [ex.claim for ex in va])
    for i, (ex, p) in enumerate(zip(va, vp, strict=True)):
        ALL_VAL.append(
            {
                "row": i,
                "m": f"mpnet-{tag}",
                "id": ex.claim_id,
                "label": ex.label.value,
                "probs": [round(float(x), 6) for x in p],
            }
        )
    write_gz(out / "probs-joint.jsonl.gz", ALL_PROBS)
    write_gz(out / "val-joint.jsonl.gz", ALL_VAL)
    MODEL_DIRS[tag] = model_dir
    log("kept", tag, len(rows), "pairs,", len(va), "validation examples")
    if SOUP_TAGS and tag != "soup" and "soup" not in MODEL_DIRS and all(t in MODEL_DIRS for t in SOUP_TAGS):
        parts = [e for e in result.get(stage2, []) if e["tag"] in SOUP_TAGS]
        odd = [e["tag"] for e in parts if e["data"] != stage2 or e["from_raw_backbone"]]
        if odd:
            sys.exit(f"train_on_device: SOUP parts must start from stage 1 on {stage2}'s examples: {odd}")
        soup(SOUP_TAGS, model_dir, va, cfgs)  # as soon as its parts exist (they share the validation set)


def soup(tags, like_dir, va, cfgs):
    """Uniform weight average of the named stage-2 variants, calibrated and scored as mpnet-soup."""
    import shutil

    from safetensors.torch import load_file, save_file

    dirs = [MODEL_DIRS[t] for t in tags]
    states = [load_file(str(Path(d) / "model.safetensors")) for d in dirs]
    avg = {}
    for k, t0 in states[0].items():
        avg[k] = (
            (sum(s[k].float() for s in states) / len(states)).to(t0.dtype) if t0.is_floating_point() else t0
        )
    target = work / "soup"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(like_dir, target)
    save_file(avg, str(target / "model.safetensors"), metadata={"format": "pt"})
    vcfg = VerifierConfig(**{**cfgs["verifier"], "nei_bias": 0.0, "device": "auto"})
    scorer = NLIVerifier(vcfg, str(target)).load()
    cal = calibrate_nei_bias(target, va, scorer.predict_pairs, vcfg.top_k)
    gold = [ex.label for ex in va]
    vp = scorer.predict_pairs([build_premise(ex.evidence, vcfg.top_k) for ex in va], [ex.claim for ex in va])
    acc = float(sum(LABEL_ORDER[int(i)] is g for i, g in zip(vp.argmax(1), gold, strict=True)) / len(gold))
    result["soup"] = {"of": tags, "calibration": cal, "val_accuracy_without_bias": acc}
    log("soup of", tags, "val acc", acc, cal)
    save()
    keep_variant("soup", target, scorer, va, cfgs)


MODEL_DIRS = {}
SOUP_TAGS = [t for t in os.environ.get("SOUP", "").split("+") if t]
v1 = variants(os.environ.get("V1", "2e-5:3,5e-5:3"))
v2 = variants(os.environ.get("V2", "3e-5:1,3e-5:2,3e-5:2:raw"))
stage2 = os.environ.get("STAGE2", "joint")  # the name of stage 2's files (e.g. jointall)
all2 = os.environ.get("ALL2", "0") == "1"
if SOUP_TAGS and not all2:
    sys.exit("train_on_device: SOUP needs ALL2=1 (the soup's parts are the variants ALL2 keeps)")


def ship(model_dir, scorer, first, files="default", suffix=""):
    """A stage's weights as int8 changes from the backbone; the first chunks and small files to OUT.

    ``files`` names the stage's examples (its validation set checks the rebuilt model); ``suffix``
    keeps stage 2's folder, chunks and small files apart from stage 1's."""
    import shutil
    import tarfile

    import numpy as np
    from transport import pack_delta, unpack_delta

    t = time.time()
    work_ship = work / f"ship{suffix}"
    shutil.rmtree(work_ship, ignore_errors=True)
    chunks = pack_delta(base, Path(model_dir), work_ship, 16_000_000, prefix=f"delta{suffix}-int8")
    # the rebuilt model, rebuilt as the caller will rebuild it, against the trained one
    rebuilt_dir = work / f"rebuilt{suffix}"
    shutil.rmtree(rebuilt_dir, ignore_errors=True)
    unpack_delta(chunks, base, Path(model_dir), rebuilt_dir)
    cfgs = json.loads((data / f"{files}-cfg.json").read_text())
    va = load_examples(data / f"{files}-val.jsonl.gz", 32 if quick else None)
    vcfg = VerifierConfig(**{**cfgs["verifier"], "nei_bias": 0.0, "device": "auto"})
    premises = [build_premise(ex.evidence, vcfg.top_k) for ex in va]
    claims = [ex.claim for ex in va]
    a = scorer.predict_pairs(premises, claims)
    b = NLIVerifier(vcfg, str(rebuilt_dir)).load().predict_pairs(premises, claims)
    a, b = np.asarray(a), np.asarray(b)
    small = [f for f in sorted(Path(model_dir).iterdir()) if f.is_file() and f.name != "model.safetensors"]
    with tarfile.open(out / f"small{suffix}.tar", "w") as tar:
        for f in small:
            tar.add(f, arcname=f.name)
    for c in chunks[:first]:
        shutil.copy(c, out / c.name)
    result[f"ship{suffix}"] = {
        "chunks": [{"name": c.name, "bytes": c.stat().st_size} for c in chunks],
        "sent_now": [c.name for c in chunks[:first]],
        "small_files": [f.name for f in small],
        "val_pairs": len(va),
        "max_abs_prob_diff": float(np.abs(a - b).max()),
        "mean_abs_prob_diff": float(np.abs(a - b).mean()),
        "labels_differing": int((a.argmax(1) != b.argmax(1)).sum()),
        "seconds": round(time.time() - t, 1),
    }
    log(f"ship{suffix}", result[f"ship{suffix}"])
    save()


e1, dir1, sc1 = stage("default", base, v1)
if os.environ.get("SCORE_DEFAULT", "1") == "1":
    score("default", sc1, "mpnet-default")
if os.environ.get("SHIP"):
    ship(dir1, sc1, int(os.environ["SHIP"]))
if os.environ.get("STAGES", "2") == "1":
    (out / "done").write_text("ok")
    log("done (stage 1 only)")
    sys.exit(0)
e2, dir2, sc2 = stage(stage2, dir1, v2, keep=keep_variant if all2 else None)
if not all2:
    score("joint", sc2, f"mpnet-{stage2}")
elif SOUP_TAGS and "soup" not in MODEL_DIRS:
    sys.exit(f"train_on_device: no soup made: SOUP names {SOUP_TAGS}, the variants were {sorted(MODEL_DIRS)}")
if os.environ.get("SHIP2"):
    ship(dir2, sc2, int(os.environ["SHIP2"]), stage2, "2")
(out / "done").write_text("ok")
log("done")
