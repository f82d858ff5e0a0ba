"""How well the LLM judge's question separates HoVer's labels: P(Yes) against the verifier's score.

For every claim of a saved 2-way run (``garag evaluate --dataset hover ... --out DIR``), the local
Qwen2.5-Coder-1.5B reads the judge prompt (``prompts/judge.yaml``, in Qwen's chat format) with the
sentences that claim's verdict read, and this script takes the model's next-token probability of
"Yes" against "No" (either case).  It writes one line per claim and prints the ROC AUC of P(Yes)
and of the run's SUPPORTS score for the gold label, by hop count, plus the macro-F1 of
"the entity check passes and P(Yes) >= t" for a few ``t`` (the pipeline's judge, which takes the
model's greedy answer, is close to t = 0.5).  Needs the ``llm`` extra and the assembled model
(``garag`` assembles it on first use of an LLM stage).

    python benchmarks/llm_judge_probe.py --run RUN_DIR --checked RUN_DIR_AT_THRESHOLD_0 \\
        --model <cache>/llm-models/qwen2.5-coder-1.5b-instruct-q4.gguf --out probe.jsonl

``--prompt-dir DIR`` reads ``DIR/judge.yaml`` instead (the variants tried are in
``benchmarks/judge_prompts/``).

``--checked``: a run of the same config with ``verifier.two_way_threshold=0``, whose SUPPORTS
verdicts are the claims that pass the entity check.  Both runs are read and refused as
``benchmarks/two_way_grid.py`` reads them (``load_run``: whole tune-part runs only, neither with the
judge on nor ``reasoning.combine: and``), and the sentences come from the run's own sentence store.
The output is resumable (claims already in ``--out`` are kept; an ``--out`` written with another
prompt file is refused).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.two_way_grid import HOPS, load_run, sentences_read  # noqa: E402
from prompts import load_prompt  # noqa: E402
from verifier.llm_judge import evidence_lines  # noqa: E402

THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7)


def chatml(messages) -> str:  # noqa: ANN001 - ChatMessage list
    """Qwen2.5's chat format, ending where the assistant's reply begins."""
    turns = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def yes_tokens(llm) -> dict[str, int]:  # noqa: ANN001 - a llama_cpp.Llama
    """The first token of each of Yes, yes, No and no."""
    return {w: llm.tokenize(w.encode(), add_bos=False)[0] for w in ("Yes", "yes", "No", "no")}


def p_yes(llm, token: dict[str, int], messages) -> float:  # noqa: ANN001 - Llama, ChatMessage list
    """The model's probability of Yes against No (either case) as the reply's first token, the
    prompt read alone."""
    import numpy as np
    from llama_cpp import llama_get_logits_ith

    llm.reset()
    llm.eval(llm.tokenize(chatml(messages).encode(), add_bos=False, special=True))
    logits = np.ctypeslib.as_array(llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    top = max(float(logits[t]) for t in token.values())
    p = {w: math.exp(float(logits[t]) - top) for w, t in token.items()}
    return (p["Yes"] + p["yes"]) / sum(p.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="a saved 2-way evaluate run (its predictions.jsonl)")
    ap.add_argument("--checked", required=True, help="the same config's run at two_way_threshold 0")
    ap.add_argument("--model", required=True, help="the GGUF file")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--prompt-dir", help="read judge.yaml from here instead of prompts/ (to compare prompts)")
    args = ap.parse_args()
    from llama_cpp import Llama
    from sklearn.metrics import f1_score, roc_auc_score

    _, dataset, store, rows, _ = load_run(Path(args.run), "--run")
    checked = load_run(Path(args.checked), "--checked")[3]
    passed = {r["id"]: r["predicted_label"] == "SUPPORTS" for r in checked}
    hops = {c.id: str(c.num_hops) for c in dataset.claims()}
    out = Path(args.out)
    prompt = load_prompt("judge", args.prompt_dir)
    done = {}
    if out.is_file():
        done = {d["id"]: d for d in map(json.loads, out.open(encoding="utf-8"))}
        other = {d.get("prompt_sha256") for d in done.values()} - {prompt.sha256}
        if other:  # resuming with another prompt would mix two prompts' answers in one table
            raise SystemExit(f"{out}: written with another judge prompt (or before prompts were recorded)")
    llm = Llama(model_path=args.model, n_ctx=4096, n_threads=args.threads or None, verbose=False)
    token = yes_tokens(llm)
    with out.open("a", encoding="utf-8") as f:
        for r in rows:
            if r["id"] in done:
                continue
            ev = sentences_read(store, r)
            messages = prompt.render(claim=" ".join(r["claim"].split()), evidence=evidence_lines(ev))
            d = {
                "id": r["id"],
                "p_yes": p_yes(llm, token, messages),
                "label": r["label"],
                "supports": r["scores"]["SUPPORTS"],
                "prompt_sha256": prompt.sha256,
            }
            done[d["id"]] = d
            f.write(json.dumps(d) + "\n")
            f.flush()
    columns = " | ".join(f"check + P(Yes) >= {t}" for t in THRESHOLDS)
    print(f"| hops | n | AUC P(Yes) | AUC SUPPORTS score | {columns} |")
    print("|" + " --- |" * (4 + len(THRESHOLDS)))
    for h in (*HOPS, None):
        sel = [done[r["id"]] | {"pass": passed[r["id"]]} for r in rows if h is None or hops.get(r["id"]) == h]
        gold = [d["label"] == "SUPPORTED" for d in sel]
        f1s = []
        for t in THRESHOLDS:
            pred = [d["pass"] and d["p_yes"] >= t for d in sel]
            f1s.append(f1_score(gold, pred, average="macro"))
        auc = roc_auc_score(gold, [d["p_yes"] for d in sel])
        base = roc_auc_score(gold, [d["supports"] for d in sel])
        cells = " | ".join(f"{x:.3f}" for x in f1s)
        print(f"| {h or 'all'} | {len(sel)} | {auc:.3f} | {base:.3f} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
