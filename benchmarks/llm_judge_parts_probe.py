"""Does asking the LLM judge about each part of a claim separate HoVer's labels better than asking
about the whole claim?  (How ``verifier.llm_judge_parts`` was found and its threshold picked.)

For every claim of a saved 2-way tune run that the entity check passes (SUPPORTED in ``--checked``,
a run at ``verifier.two_way_threshold: 0``, with or without the judge), the local
Qwen2.5-Coder-1.5B reads the judge prompt (``prompts/judge.yaml``) with the sentences the run read,
once for the whole claim and once for each of its simple facts (the rule decomposer's sub-claims,
when there are two or more), each prompt read alone, and this script takes the model's
next-token probability of Yes against No (as ``benchmarks/llm_judge_probe.py``).  It prints the
ROC AUC among the checked claims of P(Yes) for the whole claim and of the least P(Yes) over the
claim and its parts, and the macro-F1 over all tune claims (a claim the check stops is
NOT_SUPPORTED) of three rules at a few thresholds ``t``: the whole claim's P(Yes) >= t; the
least P(Yes) >= t; the whole claim's >= 0.5 and every part's >= t (the rule the pipeline took).

    python benchmarks/llm_judge_parts_probe.py --run RUN_DIR --checked RUN_DIR_AT_THRESHOLD_0 \\
        --model <cache>/llm-models/qwen2.5-coder-1.5b-instruct-q4.gguf --out parts.jsonl

With ``--parts llm`` the parts are the Verify steps of the claim's LLM reasoning program instead
(``prompts/program.yaml``, the run's ``llm`` section, cached like the pipeline's programs; a
program the model does not give usably is the rule program, as in the pipeline), a Question
step's ``{answer_N}`` filled by ``reasoning.answer_from: entity`` (``EntityAnswerer``) from the
claim's sentences, ranked by the words they share with the question (unlike the pipeline's, the
answerer here does not prefer entities that name a corpus page, and a question it cannot answer
leaves "it" in the slot).  A claim whose program has
one Verify step is asked about as a whole only, as with the rule parts.

Each prompt is read alone here; the pipeline reads a claim and its parts together on one evidence
prefix, which moves P(Yes) by up to about 0.02 (batched products round differently), so a claim near
a threshold can be decided otherwise there.

The output is resumable (claims already in ``--out`` are kept; one written with another prompt
file or other parts is refused).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.llm_judge_probe import p_yes, yes_tokens  # noqa: E402
from benchmarks.two_way_grid import HOPS, load_run, read_run, sentences_read  # noqa: E402
from garag.text import detokenize  # noqa: E402
from garag.types import Evidence  # noqa: E402
from pipeline.decompose import RuleDecomposer  # noqa: E402
from pipeline.programs import fill_slots  # noqa: E402
from prompts import load_prompt  # noqa: E402
from verifier.llm_judge import evidence_lines, withheld  # noqa: E402

THRESHOLDS = (0.3, 0.4, 0.5, 0.6)


def llm_steps(cfg, rows: list[dict], store) -> dict[str, list[str]]:  # noqa: ANN001 - Config, store
    """Each row's LLM program's Verify steps, slots filled from the row's sentences (``--parts llm``)."""
    from garag.llm.client import LLMClient
    from pipeline.reasoning import EntityAnswerer, make_programmer

    config = cfg.model_copy(update={"reasoning": cfg.reasoning.replace(programs="llm")})
    client = LLMClient(config.llm, config.paths.cache_dir).load()
    programmer = make_programmer(config, client)
    programs = programmer.programs([r["claim"] for r in rows])
    print(f"programs: {programmer.counts}", file=sys.stderr)
    answerer = EntityAnswerer(config.decomposition.spacy_model)
    out = {}
    for r, program in zip(rows, programs, strict=True):
        ev = sentences_read(store, r)
        answers: dict[str, str] = {}
        steps = []
        for step in program.steps:
            text = fill_slots(step.text, answers)
            if step.kind == "question":
                asked = set(text.casefold().split())
                ranked = sorted(ev, key=lambda e: -len(asked & set(detokenize(e.text).casefold().split())))
                answers[step.var] = answerer.answers([text], [ranked])[0] or "it"
            else:
                steps.append(text)
        out[r["id"]] = steps
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="a saved 2-way tune run without the judge")
    ap.add_argument("--checked", required=True, help="a tune run at two_way_threshold 0 (judged or not)")
    ap.add_argument("--model", required=True, help="the GGUF file")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--parts",
        choices=("rule", "llm"),
        default="rule",
        help="the rule decomposer's sub-claims (the pipeline's parts) or the LLM program's Verify steps",
    )
    args = ap.parse_args()
    from llama_cpp import Llama
    from sklearn.metrics import f1_score, roc_auc_score

    cfg, dataset, store, rows, _ = load_run(Path(args.run), "--run")
    _, checked_cfg, checked = read_run(Path(args.checked), "--checked")
    if checked_cfg.verifier.two_way_threshold != 0 or checked_cfg.data.part != "tune":
        raise SystemExit(f"--checked {args.checked}: needs a tune run at verifier.two_way_threshold 0")
    # the judge (if on) comes after the check: a claim it withheld passed the check
    passed = {
        r["id"] for r in checked if r["predicted_label"] == "SUPPORTS" or withheld(r.get("explanation", ""))
    }
    hops = {c.id: str(c.num_hops) for c in dataset.claims()}
    gold = {r["id"]: r["label"] == "SUPPORTED" for r in rows}
    prompt = load_prompt("judge")
    out = Path(args.out)
    done: dict = {}
    if out.is_file():
        done = {d["id"]: d for d in map(json.loads, out.open(encoding="utf-8"))}
        if {d.get("prompt_sha256") for d in done.values()} - {prompt.sha256}:
            raise SystemExit(f"{out}: written with another judge prompt")
        if {d.get("parts_from", "rule") for d in done.values()} - {args.parts}:
            raise SystemExit(f"{out}: written with other parts than --parts {args.parts}")
    parts_of = RuleDecomposer(cfg.decomposition).load().subclaims
    steps = None
    if args.parts == "llm":
        steps = llm_steps(cfg, [r for r in rows if r["id"] in passed and r["id"] not in done], store)
    llm = Llama(model_path=args.model, n_ctx=4096, verbose=False)
    token = yes_tokens(llm)

    def ask(claim: str, evidence: list[Evidence]) -> float:
        return p_yes(
            llm, token, prompt.render(claim=" ".join(claim.split()), evidence=evidence_lines(evidence))
        )

    with out.open("a", encoding="utf-8") as f:
        for r in rows:
            if r["id"] not in passed or r["id"] in done:
                continue
            ev = sentences_read(store, r)
            parts = steps[r["id"]] if steps is not None else parts_of(r["claim"])
            parts = parts if len(parts) >= 2 else []
            d = {
                "id": r["id"],
                "label": r["label"],
                "hops": hops[r["id"]],
                "claim": r["claim"],
                "parts": parts,
                "whole": ask(r["claim"], ev),
                "part_p": [ask(c, ev) for c in parts],
                "prompt_sha256": prompt.sha256,
                "parts_from": args.parts,
            }
            done[d["id"]] = d
            f.write(json.dumps(d) + "\n")
            f.flush()

    def least(i: str) -> float:
        return min([done[i]["whole"], *done[i]["part_p"]])

    rules = {
        "whole >= t": lambda i, t: done[i]["whole"] >= t,
        "least >= t": lambda i, t: least(i) >= t,
        "whole >= 0.5, parts >= t": lambda i, t: (
            done[i]["whole"] >= 0.5 and all(p >= t for p in done[i]["part_p"])
        ),
    }
    asked = [r["id"] for r in rows if r["id"] in passed]
    print(
        f"{len(rows)} tune claims, {len(asked)} pass the check, {sum(bool(done[i]['part_p']) for i in asked)}"
        " with two or more parts"
    )
    labels = [gold[i] for i in asked]
    auc_whole = roc_auc_score(labels, [done[i]["whole"] for i in asked])
    auc_least = roc_auc_score(labels, [least(i) for i in asked])
    print(f"ROC AUC among them: whole {auc_whole:.3f}, least {auc_least:.3f}")
    print("| rule | " + " | ".join(f"t = {t}: all (2 / 3 / 4 hops)" for t in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for name, rule in rules.items():
        cells = []
        for t in THRESHOLDS:
            f1 = {}
            for h in (*HOPS, None):
                sel = [r["id"] for r in rows if h is None or hops[r["id"]] == h]
                pred = [i in passed and rule(i, t) for i in sel]
                f1[h] = f1_score([gold[i] for i in sel], pred, average="macro")
            cells.append(f"{f1[None]:.3f} ({' / '.join(f'{f1[h]:.3f}' for h in HOPS)})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
