"""Train a backbone as garag's verifier on a GPU machine, with garag's own loop, and score recorded pairs.

Stage 1 takes the default per-sentence verifier's examples and settings; stage 2 the joint
verifier's (configs/graph-joint.yaml's train section), continuing from stage 1 as
``train.base_model: garag`` does (a variant ending in ``:raw`` starts from the backbone instead).
Each stage tries the ``lr:epochs`` variants of $V1 / $V2 and keeps the best validation accuracy
on its held-out train claims, then calibrates the NEI bias as ``garag train-verifier`` does.
Last, every pair in DATA_DIR/pairs-{joint,default}.jsonl.gz (pairs.py record) is scored with no
NEI bias (the replay applies the calibrated one).  Results go to OUT/result.json and
OUT/probs-*.jsonl.gz (stage 2's scores always in probs-joint.jsonl.gz, tagged mpnet-$STAGE2).

    V1=2e-5:3,5e-5:3 V2=3e-5:1,3e-5:2,3e-5:2:raw python train_on_device.py DATA_DIR MODEL_DIR WORK OUT
    ($STAGE2 names stage 2's files, default "joint"; SCORE_DEFAULT=0 skips the per-sentence pairs)
    (DATA_DIR: dump_examples.py's files and the pairs; --quick: 64 examples, 50 pairs, a smoke test)
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

from garag.config import TrainConfig, VerifierConfig  # noqa: E402
from garag.types import Evidence, Label, SentenceId  # noqa: E402
from verifier.base import TrainExample  # noqa: E402
from verifier.calibration import calibrate_nei_bias  # noqa: E402
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


def load(path, limit=None):
    exs = []
    for line in gzip.open(path, "rt", encoding="utf-8"):
        r = json.loads(line)
        ev = tuple(Evidence(SentenceId(p, int(n)), t, float(s)) for p, n, t, s in r["ev"])
        exs.append(TrainExample(r["claim"], ev, Label(r["label"]), r["id"]))
        if limit and len(exs) >= limit:
            break
    return exs


def stage(name, base_model, variants):
    cfgs = json.loads((data / f"{name}-cfg.json").read_text())
    lim = (64, 32) if quick else (None, None)
    tr, va = load(data / f"{name}-train.jsonl.gz", lim[0]), load(data / f"{name}-val.jsonl.gz", lim[1])
    log(name, "train", len(tr), "val", len(va))
    best = None
    for lr, epochs, raw in variants:
        tc = dict(cfgs["train"])
        tc.update(learning_rate=lr, epochs=epochs, base_model="(gpu)")
        if quick:
            tc.update(epochs=1, eval_every=0)
        tcfg = TrainConfig(**tc)
        t = time.time()
        start_from = base if raw else base_model
        tag = f"{name}-lr{lr}-e{epochs}" + ("-raw" if raw else "")
        res = train_verifier(tr, va, tcfg, str(start_from), work / tag, progress=False)
        secs = round(time.time() - t, 1)
        vcfg = VerifierConfig(**{**cfgs["verifier"], "nei_bias": 0.0, "device": "auto"})
        scorer = NLIVerifier(vcfg, str(res.model_dir)).load()
        cal = calibrate_nei_bias(res.model_dir, va, scorer.predict_pairs, vcfg.top_k)
        entry = {
            "lr": lr,
            "epochs": epochs,
            "from_raw_backbone": raw,
            "best_val": res.best_val,
            "history": res.history,
            "steps": res.steps,
            "train_seconds": secs,
            "calibration": cal,
            "scorer_device": scorer.device,
        }
        result.setdefault(name, []).append(entry)
        acc = res.best_val["accuracy"]
        variant = f"{name} lr {lr} epochs {epochs}{' raw' if raw else ''}"
        log(f"{variant}: val acc {acc}, {res.steps} steps, {secs} s, {cal}")
        save()
        if best is None or res.best_val["accuracy"] > best[0]["best_val"]["accuracy"]:
            best = (entry, res.model_dir, scorer)
    result[f"{name}_chosen"] = [best[0]["lr"], best[0]["epochs"], best[0]["from_raw_backbone"]]
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


def variants(spec):  # "lr:epochs[:raw],..."; raw = start from the backbone, not from stage 1
    out = []
    for v in spec.split(","):
        f = v.split(":")
        out.append((float(f[0]), int(f[1]), len(f) > 2 and f[2] == "raw"))
    return out


v1 = variants(os.environ.get("V1", "2e-5:3,5e-5:3"))
v2 = variants(os.environ.get("V2", "3e-5:1,3e-5:2,3e-5:2:raw"))
stage2 = os.environ.get("STAGE2", "joint")  # the name of stage 2's files (e.g. jointall)
e1, dir1, sc1 = stage("default", base, v1)
e2, dir2, sc2 = stage(stage2, dir1, v2)
score("joint", sc2, f"mpnet-{stage2}")
if os.environ.get("SCORE_DEFAULT", "1") == "1":
    score("default", sc1, "mpnet-default")
(out / "done").write_text("ok")
log("done")
