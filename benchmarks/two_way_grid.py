"""Pick ``verifier.two_way_threshold`` for HoVer configs on the tune part, from saved tune runs.

On a 2-way dataset (HoVer) a claim is SUPPORTED when the verifier's SUPPORTS score reaches the
threshold and, with ``verifier.entity_check: two_way``, every entity the claim names is found in
the sentences the verdict rests on (verifier/entity_check.py).  Both steps come after the
verifier's scores, so one tune run per config is enough: this benchmark re-decides every saved
prediction of the run with each threshold of the grid through the pipeline's own decision
(``pipeline.verification.decide``: ``two_way``, then ``EntityCheck`` on the sentences the run
read), and scores it like ``garag evaluate``.

The pick, fixed before the grid was run: the highest macro-F1 over all hops of the tune part;
a tie goes to the higher threshold (the smaller change to the verifier's own decision).  The
"as run" row is the run's own labels, and the re-decision at the run's own threshold (none:
the likeliest label) must give them back (checked: a mismatch stops the benchmark).

Only tune-part runs are read: a run of the report part (or of all claims) is refused, so the
grid cannot see the claims its pick is reported on.

Several runs of one config (``--run NAME=DIR1,DIR2,...``: verifiers of one recipe trained with
different seeds) are averaged: each threshold's row is the mean of the runs' rows and the pick
maximises the mean macro-F1, a threshold for the recipe rather than for one trained model.

With the LLM judge (``--judged NAME=DIR``): DIR is a tune run of the same claims with
``verifier.llm_judge: two_way`` and ``verifier.two_way_threshold: 0``.  The judge comes after the
threshold and the entity check and reads only the claim and the sentences read, so at threshold 0
it was asked about every claim that any threshold of the grid calls SUPPORTED, and its answers hold
for every run of NAME that read the same sentences (checked claim by claim): a claim it said No to
is NOT_SUPPORTED at every threshold.  Its labels on the other claims must equal the re-decision at
0, SUPPORTED or not (checked).

With ``--note TEXT`` the report says where the runs' verifiers came from (a paragraph under its header).

Usage::

    garag evaluate --dataset hover --part tune --config configs/graph.yaml --out RUN_DIR
    .venv/bin/python benchmarks/two_way_grid.py --run graph=RUN_DIR [--run NAME=DIR[,DIR...] ...] \\
        [--judged NAME=JUDGED_DIR ...] [--out benchmarks/results/two_way_grid]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from eval.verification_eval import records_from_file, score_records
from garag.artifacts import write_json_atomic, write_text_atomic
from garag.config import Config, VerifierConfig, validate_config
from garag.datasets import dataset_from_config
from garag.types import Evidence, Label, SentenceId, Verdict
from pipeline.retrieval import build_sentence_store
from pipeline.verification import decide
from verifier.entity_check import EntityCheck
from verifier.llm_judge import UNUSABLE, withheld

ROOT = Path(__file__).resolve().parents[1]
GRID = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
HOPS = ("2", "3", "4")


def read_run(run_dir: Path, what: str = "run") -> tuple[dict, Config, list[dict]]:
    """``run.json``'s metadata, its config and the records of ``predictions.jsonl``; one line naming
    ``what`` (the option that gave the run) and the run where either is unreadable."""
    try:
        meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        return meta, validate_config(meta["config"]), records_from_file(run_dir / "predictions.jsonl")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{what} {run_dir}: not a readable evaluate run ({type(e).__name__}: {e})") from None


def load_run(run_dir: Path, what: str = "run") -> tuple:
    """The run's config, dataset, sentence store and records; refuses a run that is not of the tune part."""
    meta, cfg, records = read_run(run_dir, what)
    if cfg.data.part != "tune":
        part = cfg.data.part
        raise SystemExit(f"{what} {run_dir}/run.json: data.part is {part!r}; this grid reads tune runs only")
    if cfg.verifier.llm_judge != "never":
        raise SystemExit(
            f"{what} {run_dir}/run.json: verifier.llm_judge is {cfg.verifier.llm_judge!r}; this grid "
            "re-decides runs without the LLM judge (its answers are not saved with the run)"
        )
    if cfg.reasoning.programs != "none" and cfg.reasoning.combine == "and":
        # the check then also reads every step's evidence, which predictions.jsonl does not hold
        raise SystemExit(
            f"{what} {run_dir}/run.json: reasoning.combine is 'and'; this grid re-decides 'union' runs"
        )
    dataset = dataset_from_config(cfg.data)
    if not dataset.two_way:
        raise SystemExit(f"{what} {run_dir}/run.json: dataset {dataset.name!r} is not 2-way")
    tune = {c.id for c in dataset.claims()}
    have = {r["id"] for r in records}
    if have != tune or len(records) != len(tune):
        raise SystemExit(
            f"{what} {run_dir}/predictions.jsonl: {len(have & tune)} of the {len(tune)} tune claims, "
            f"{len(records)} records; the grid needs the whole tune part, once each"
        )
    store, _, _ = build_sentence_store(dataset, Path(cfg.paths.cache_dir), cfg.data.skip_bad_lines, False)
    return cfg, dataset, store, records, meta.get("oracle", False)


def sentences_read(store, record: dict) -> list[Evidence]:  # noqa: ANN001 - a sentence store
    """The sentences a saved record's verdict read (``evidence_read``), in its order; those the
    store lacks are left out."""
    found = (store.get(SentenceId(p, int(n))) for p, n in record["evidence_read"])
    return [Evidence(s.id, s.text) for s in found if s is not None]


def redecide(
    records: list[dict], evidence: list[list[Evidence]], settings: VerifierConfig, check: EntityCheck | None
):
    """The records with their labels decided again from their scores as the pipeline decides them
    (:func:`pipeline.verification.decide`) with ``settings`` (no threshold: the likeliest label)."""
    verdicts = []
    for r, ev in zip(records, evidence, strict=True):
        scores = {Label(k): float(p) for k, p in r["scores"].items()}
        verdicts.append(Verdict(max(scores, key=scores.get), "", tuple(e.sentence for e in ev), scores))
    claims = [r["claim"] for r in records]
    verdicts = decide(verdicts, claims, evidence, settings, check, two_way_data=True)
    out = []
    for r, v in zip(records, verdicts, strict=True):
        out.append({k: x for k, x in r.items() if k != "dataset_label"} | {"predicted_label": v.label.value})
    return out


def row(dataset, records: list[dict]) -> dict:
    """Accuracy and macro-F1, overall and per hop count."""
    m = score_records(dataset, records)
    return {
        "macro_f1": m["macro_f1"],
        "accuracy": m["label_accuracy"],
        "hops": {h: m["groups"][h]["macro_f1"] for h in HOPS if h in m["groups"]},
        "supported_share": sum(r["predicted_label"] == "SUPPORTS" for r in records) / len(records),
    }


def load_judged(run_dir: Path) -> tuple[dict[str, dict], float]:
    """A judged tune run at threshold 0: its records by claim id (see the module's text) and its
    ``verifier.llm_judge_parts`` (0: the greedy judge)."""
    _, cfg, records = read_run(run_dir, "--judged")
    v = cfg.verifier
    if cfg.data.part != "tune" or v.llm_judge != "two_way" or v.two_way_threshold != 0:
        raise SystemExit(
            f"{run_dir}/run.json: --judged needs a tune run with verifier.llm_judge two_way and "
            f"two_way_threshold 0 (it has part {cfg.data.part!r}, {v.llm_judge!r}, {v.two_way_threshold})"
        )
    unusable = [r["id"] for r in records if UNUSABLE in r.get("explanation", "")]
    if unusable:  # a run at another threshold would have asked again: the answer is not known
        raise SystemExit(f"--judged {run_dir}: the judge gave no usable answer for claims {unusable[:5]}")
    return {r["id"]: r for r in records}, v.llm_judge_parts


def apply_judged(records: list[dict], judged: dict[str, dict]) -> list[dict]:
    """The records with NOT_SUPPORTED where the judge said No: the likelier of REFUTES and NOT
    ENOUGH INFO by the record's own scores, as the pipeline's judge decides."""
    out = []
    for r in records:
        if withheld(judged[r["id"]].get("explanation", "")) and r["predicted_label"] == "SUPPORTS":
            scores = {Label(k): float(p) for k, p in r["scores"].items()}
            held = Verdict(Label.SUPPORTS, "", (), scores).likelier_unsupported()
            r = r | {"predicted_label": held.value}
        out.append(r)
    return out


def grid(run_dir: Path, judged_dir: Path | None = None) -> dict:
    """Every threshold's scores on one tune run, the run's own labels and the pick."""
    cfg, dataset, store, records, oracle = load_run(run_dir, "--run")
    evidence = [sentences_read(store, r) for r in records]
    check = None
    if cfg.verifier.entity_check != "never":
        check = EntityCheck(cfg.decomposition.spacy_model).load()
    own = cfg.verifier.two_way_threshold
    # the re-decision must give the run's own labels back
    again = redecide(records, evidence, cfg.verifier, check)
    diff = [
        r["id"] for r, a in zip(records, again, strict=True) if r["predicted_label"] != a["predicted_label"]
    ]
    if diff:
        raise SystemExit(f"{run_dir}: re-deciding at the run's threshold {own} changes claims {diff[:5]}")
    rows = {"as run": row(dataset, records)}
    judged, parts = None, None
    if judged_dir is not None:
        judged, parts = load_judged(judged_dir)
        at0 = redecide(records, evidence, cfg.verifier.replace(two_way_threshold=0.0), check)
        for r, a in zip(records, at0, strict=True):
            j = judged.get(r["id"])
            if j is None or [list(x) for x in j["evidence_read"]] != [list(x) for x in r["evidence_read"]]:
                raise SystemExit(
                    f"{judged_dir}: claim {r['id']} is missing or read other sentences than in {run_dir}"
                )
            said_no = withheld(j.get("explanation", ""))
            if not said_no and (j["predicted_label"] == "SUPPORTS") != (a["predicted_label"] == "SUPPORTS"):
                raise SystemExit(
                    f"{judged_dir}: claim {r['id']} is {j['predicted_label']} there and "
                    f"{a['predicted_label']} here at threshold 0 with no No from the judge: not one check"
                )
    for t in GRID:
        got = redecide(records, evidence, cfg.verifier.replace(two_way_threshold=t), check)
        rows[f"{t:g}"] = row(dataset, got if judged is None else apply_judged(got, judged))
    best = max(GRID, key=lambda t: (round(rows[f"{t:g}"]["macro_f1"], 9), t))
    return {
        "run": str(run_dir),
        "run_threshold": own,
        "entity_check": cfg.verifier.entity_check,
        "oracle": oracle,
        "claims": len(records),
        "rows": rows,
        "pick": best,
        "judged": str(judged_dir) if judged_dir is not None else None,
        "judged_parts": parts,
    }


def mean_grid(parts: list[dict]) -> dict:
    """One config's grid over several runs: every row the mean of the runs' rows, the pick on the mean."""
    first = parts[0]
    same = ("claims", "oracle", "entity_check", "judged", "judged_parts")
    if any(len({str(p[k]) for p in parts}) > 1 for k in same):
        raise SystemExit(
            f"{first['run']}: the runs averaged must agree on claims, gold evidence, entity check, judge"
        )

    def mean(key: str) -> dict:
        rows = [p["rows"][key] for p in parts]
        return {
            "macro_f1": sum(r["macro_f1"] for r in rows) / len(rows),
            "accuracy": sum(r["accuracy"] for r in rows) / len(rows),
            "hops": {h: sum(r["hops"][h] for r in rows) / len(rows) for h in HOPS if h in rows[0]["hops"]},
            "supported_share": sum(r["supported_share"] for r in rows) / len(rows),
            "macro_f1_per_run": [r["macro_f1"] for r in rows],
        }

    rows = {key: mean(key) for key in first["rows"]}
    best = max(GRID, key=lambda t: (round(rows[f"{t:g}"]["macro_f1"], 9), t))
    return {
        "run": ", ".join(p["run"] for p in parts),
        "runs_averaged": len(parts),
        "run_threshold": sorted({p["run_threshold"] for p in parts}),
        "entity_check": first["entity_check"],
        "oracle": first["oracle"],
        "claims": first["claims"],
        "judged": first["judged"],
        "judged_parts": first.get("judged_parts"),
        "rows": rows,
        "pick": best,
        "pick_per_run": [p["pick"] for p in parts],
    }


def table(results: dict[str, dict], command: str, note: str = "") -> str:
    lines = [
        "# Two-way threshold grid (HoVer tune part)",
        "",
        f"`{command}`",
        "",
        "Macro-F1 over all hops (2 / 3 / 4 hops) and the share of claims called SUPPORTED, per threshold on",
        'the SUPPORTS score, the entity check applied after it as in the pipeline.  "as run" is the',
        "run's own labels.  Pick: the best macro-F1 over all hops, a tie to the higher threshold.",
        "Each run: `garag evaluate --dataset hover --part tune --config configs/<name>.yaml --out DIR`",
        "(`--oracle` for gold evidence).",
        "",
    ]
    if note:
        lines += [note, ""]
    for name, res in results.items():
        lines += [
            f"## {name}: pick {res['pick']:g} (the run had {res['run_threshold']})",
            "",
            f"{res['claims']} tune claims, entity check `{res['entity_check']}`"
            + (", gold evidence" if res["oracle"] else "")
            + (
                f", the LLM judge's answers from `{res['judged']}` ("
                + (f"parts mode at {res['judged_parts']:g}; " if res.get("judged_parts") else "greedy; ")
                + 'not in the "as run" row)'
                if res.get("judged")
                else ""
            )
            + (
                f"; the mean of {res['runs_averaged']} runs (their own picks {res['pick_per_run']})"
                if "runs_averaged" in res
                else ""
            )
            + f"; run `{res['run']}`",
            "",
            "| threshold | macro-F1 | 2 / 3 / 4 hops | accuracy | SUPPORTED share |",
            "|---|---:|---|---:|---:|",
        ]
        for key, r in res["rows"].items():
            hops = " / ".join(f"{r['hops'].get(h, float('nan')):.3f}" for h in HOPS)
            mark = " **pick**" if key == f"{res['pick']:g}" else ""
            f1, acc, share = r["macro_f1"], r["accuracy"], r["supported_share"]
            lines.append(f"| {key}{mark} | {f1:.3f} | {hops} | {acc:.3f} | {share:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--run",
        action="append",
        required=True,
        help="NAME=DIR of a tune-part evaluate run (NAME=DIR1,DIR2,...: runs of one config, averaged)",
    )
    ap.add_argument(
        "--judged",
        action="append",
        default=[],
        help="NAME=DIR: a judged tune run at threshold 0 whose LLM judge answers apply to NAME's runs",
    )
    default_out = str(ROOT / "benchmarks" / "results" / "two_way_grid")
    ap.add_argument("--out", default=default_out, help="output stem (.md and .json)")
    ap.add_argument("--note", default="", help="a paragraph for the report: where the verifiers came from")
    args = ap.parse_args()
    judged_dirs = {}
    for spec in args.judged:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or name in judged_dirs:
            raise SystemExit(f"--judged {spec!r}: expected NAME=DIR, each NAME once")
        judged_dirs[name] = Path(path)
    unknown = set(judged_dirs) - {spec.partition("=")[0] for spec in args.run}
    if unknown:
        raise SystemExit(f"--judged {sorted(unknown)}: no --run of that name")
    results = {}
    for spec in args.run:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--run {spec!r}: expected NAME=DIR")
        if name in results:
            raise SystemExit(f"--run {spec!r}: the name {name!r} is given twice")
        dirs = path.split(",")
        if not all(dirs) or len(set(dirs)) != len(dirs):
            raise SystemExit(f"--run {spec!r}: an empty or repeated run directory")
        try:
            parts = [grid(Path(p), judged_dirs.get(name)) for p in dirs]
            results[name] = parts[0] if len(parts) == 1 else mean_grid(parts)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:  # one line naming the run
            raise SystemExit(f"{path}: not a readable evaluate run ({type(e).__name__}: {e})") from None
        print(f"{name}: pick {results[name]['pick']:g}", file=sys.stderr)
    command = shlex.join(["python", "benchmarks/two_way_grid.py", *sys.argv[1:]])
    try:
        write_json_atomic(Path(args.out + ".json"), {"command": command, "grid": list(GRID), "runs": results})
        write_text_atomic(Path(args.out + ".md"), table(results, command, args.note) + "\n")
    except OSError as e:
        raise SystemExit(f"--out {args.out}: cannot write ({e})") from None
    print(table(results, command, args.note))


if __name__ == "__main__":
    main()
