"""Metrics of a saved comparison run: per system, paired, slices, attribution, explanations, cost.

Reads only the run's files (and the sentence store, when present, to check that
cited sentences exist); runs no model.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from eval.fever_score import FeverPrediction, claim_to_actual, hover_correct, is_strictly_correct
from eval.garag_metrics import garag_metrics
from eval.run_env import read_env
from eval.significance import bootstrap_mean_ci, paired_comparison, paired_macro_f1
from eval.slices import (
    GRAPH_RETRIEVER,
    attribute_gold,
    cost_summary,
    explanation_checks,
    hit_rate_curve,
    only_one_right,
    slice_table,
    solved_only_by,
)
from eval.verification_eval import score_records
from garag.config import Config
from garag.datasets import Dataset
from garag.jsonl import read_records
from garag.types import Claim, SentenceId

logger = logging.getLogger(__name__)

MAX_EVIDENCE = 5
EXAMPLES_PER_PAIR = 4


def label_correct(claim: Claim, record: Mapping) -> bool:
    """The dataset-native predicted label equals the gold label (case-insensitive, as FEVER's scorer)."""
    return str(record["dataset_label"]).upper() == str(claim.label).upper()


def strict_correct(claim: Claim, record: Mapping) -> bool:
    """FEVER's strict criterion on the first five predicted sentences."""
    merged = claim_to_actual(claim) | {
        "predicted_label": record["dataset_label"],
        "predicted_evidence": [[p, int(n)] for p, n in record["predicted_evidence"]],
    }
    return is_strictly_correct(merged, MAX_EVIDENCE)


def hover_record_correct(claim: Claim, record: Mapping) -> bool:
    """HoVer's criterion (:func:`eval.fever_score.hover_correct`) on the first five predicted sentences."""
    evidence = tuple(SentenceId(p, int(n)) for p, n in record["predicted_evidence"])
    return hover_correct(claim, FeverPrediction(str(record["dataset_label"]), evidence), MAX_EVIDENCE)


def _filtered(dataset: Dataset, ids: set[str]) -> Dataset:
    reader = dataset.reader

    def read(path, policy=None):
        return (c for c in reader(path, policy) if json.dumps(c.id) in ids)

    return dataclasses.replace(dataset, reader=read)


def _open_store(env: Mapping, name: str, config: Config):
    from garag.store import SentenceStore

    store_dir = env.get("models", {}).get(name, {}).get("artifacts", {}).get("store")
    db = Path(config.paths.cache_dir) / str(store_dir) / "sentences.db" if store_dir else None
    return SentenceStore(db) if db is not None and db.is_file() else None


def _records(pred_dir: Path, name: str) -> list[dict]:
    path = pred_dir / f"{name}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no predictions for system {name!r}")
    return read_records(path)


def _faithful(pred_dir: Path, name: str) -> dict | None:
    path = pred_dir / f"{name}.faithful.jsonl"
    if not path.is_file():
        return None
    return {json.dumps(r["id"]): r["faithful"] for r in read_records(path)}


def _wall_seconds(pred_dir: Path, name: str, n: int) -> float | None:
    path = pred_dir / f"{name}.timing.json"
    if not path.is_file():
        return None
    t = json.loads(path.read_text(encoding="utf-8"))
    return t["seconds"] * n / t["claims"] if t.get("claims") else None


def _example(claim: Claim, records: Mapping[str, Mapping]) -> dict:
    systems = {}
    for name, r in records.items():
        texts = r.get("evidence_text", [])
        systems[name] = {
            "label": r["dataset_label"],
            "explanation": r.get("explanation", ""),
            "evidence": [
                [p, n, texts[i] if i < len(texts) else ""] for i, (p, n) in enumerate(r["evidence_read"])
            ],
            "predicted_evidence": r["predicted_evidence"],
        }
    return {
        "id": claim.id,
        "claim": claim.text,
        "gold": claim.label,
        "gold_evidence": [[s.to_json() for s in g] for g in claim.evidence],
        "systems": systems,
    }


def _system_metrics(
    run_dir: Path, name: str, config: Config, data: Dataset, claims: Sequence[Claim], recs: Sequence[dict],
    seed: int, n_resamples: int, correct: Sequence[bool], strict: Sequence[bool], env: Mapping,
) -> dict:  # fmt: skip
    pred_dir = run_dir / "predictions"
    m = score_records(
        _filtered(data, {json.dumps(c.id) for c in claims}), recs, config.eval.ks,
        n_resamples=n_resamples, seed=seed,
    )  # fmt: skip
    m["ci"] = {
        "accuracy": list(bootstrap_mean_ci(correct, n_resamples, seed)),
        "fever_score": list(bootstrap_mean_ci(strict, n_resamples, seed)),
    }
    m["attribution"] = attribute_gold(claims, recs)
    m["graph_only_claims"] = solved_only_by(claims, recs, GRAPH_RETRIEVER)
    m["hit_rate_curve"] = hit_rate_curve(claims, recs)
    store = _open_store(env, name, config)
    faithful = _faithful(pred_dir, name)
    judge = (lambda r, ids: bool(faithful.get(json.dumps(r["id"])))) if faithful is not None else None
    exists = (lambda s: store.get(s) is not None) if store is not None else (lambda s: True)
    m["explanations"] = explanation_checks(recs, exists, judge)
    m["explanations"]["existence_checked"] = store is not None
    m["garag"] = garag_metrics(claims, recs, m["explanations"] if store is not None else None)
    m["cost"] = cost_summary(recs, _wall_seconds(pred_dir, name, len(recs)))
    return m


def score_run(
    run_dir: Path,
    identity: Mapping,
    data: Dataset,
    gold: Sequence[Claim],
    configs: Mapping[str, Config],
    n_resamples: int = 10_000,
    env: Mapping | None = None,
) -> dict:
    """Every metric of a run, as one JSON-able dict (see ``eval.compare``); ``env``: the run's
    ``env.json`` (:func:`eval.run_env.read_env`, read here where not given).

    Raises:
        ValueError: no claim has every system's prediction, or ``env.json`` is not a JSON object.
    """
    env = read_env(run_dir) if env is None else env
    seed = int(identity.get("seed") or 0)
    names = [s["name"] for s in identity["systems"]]
    pred_dir = run_dir / "predictions"
    by_system = {n: {json.dumps(r["id"]): r for r in _records(pred_dir, n)} for n in names}
    claims = [c for c in gold if all(json.dumps(c.id) in by_system[n] for n in names)]
    if not claims:
        raise ValueError(f"{run_dir}: no claim has predictions from every system yet")
    recs = {n: [by_system[n][json.dumps(c.id)] for c in claims] for n in names}
    correct = {n: [label_correct(c, r) for c, r in zip(claims, recs[n], strict=True)] for n in names}
    strict = {n: [strict_correct(c, r) for c, r in zip(claims, recs[n], strict=True)] for n in names}
    multi_hop = any(c.num_hops is not None for c in claims)
    labels = list(data.labels)
    gold_labels = [c.label for c in claims]
    predicted = {n: [r["dataset_label"] for r in recs[n]] for n in names}

    def paired_f1(a: str, b: str, idx: Sequence[int]) -> dict:
        return paired_macro_f1(
            [gold_labels[i] for i in idx], [predicted[a][i] for i in idx], [predicted[b][i] for i in idx],
            labels, n_resamples, seed,
        )  # fmt: skip

    hover = {n: [hover_record_correct(c, r) for c, r in zip(claims, recs[n], strict=True)] for n in names}
    per_system = {
        n: _system_metrics(
            run_dir, n, configs[n], data, claims, recs[n], seed, n_resamples, correct[n], strict[n], env
        )
        for n in names
    }
    base = names[0]
    paired, examples = [], []
    for other in names[1:]:
        pair = {
            "a": base,
            "b": other,
            "accuracy": paired_comparison(correct[base], correct[other], n_resamples, seed),
            "fever_score": paired_comparison(strict[base], strict[other], n_resamples, seed),
            "macro_f1": paired_f1(base, other, range(len(claims))),
            "only_one_right": only_one_right([c.id for c in claims], strict[base], strict[other]),
            "hops": {},
        }
        if multi_hop:
            pair["hover_score"] = paired_comparison(hover[base], hover[other], n_resamples, seed)
        hops = sorted({c.num_hops for c in claims if c.num_hops is not None})
        for h in hops:
            idx = [i for i, c in enumerate(claims) if c.num_hops == h]
            pair["hops"][str(h)] = {
                "accuracy": paired_comparison(
                    [correct[base][i] for i in idx], [correct[other][i] for i in idx], n_resamples, seed
                ),
                "fever_score": paired_comparison(
                    [strict[base][i] for i in idx], [strict[other][i] for i in idx], n_resamples, seed
                ),
                "hover_score": paired_comparison(
                    [hover[base][i] for i in idx], [hover[other][i] for i in idx], n_resamples, seed
                ),
                "macro_f1": paired_f1(base, other, idx),
            }
        paired.append(pair)
        wins = set(json.dumps(i) for i in pair["only_one_right"]["only_b"][:2])
        wins |= set(json.dumps(i) for i in pair["only_one_right"]["only_a"][:1])
        chosen = [c for c in claims if json.dumps(c.id) in wins]
        chosen += [c for c in claims if c not in chosen][: max(0, EXAMPLES_PER_PAIR - len(chosen))]
        examples += [_example(c, {n: by_system[n][json.dumps(c.id)] for n in (base, other)}) for c in chosen]
    return {
        "run_id": run_dir.name,
        "dataset": data.name,
        "n_claims": len(identity["claim_ids"]),
        "n_scored": len(claims),
        "sample": identity.get("sample"),
        "seed": seed,
        "n_resamples": n_resamples,
        "systems": names,
        "per_system": per_system,
        "paired": paired,
        "slices": slice_table(claims, correct, strict),
        "examples": examples,
        "skipped_claims": _skipped(env),
    }


def _skipped(env: Mapping) -> dict:
    """Claims skipped while reading (``data.skip_bad_lines``), as recorded in ``env.json``."""
    return {"counts": env.get("skipped_claims", {}), "examples": env.get("skipped_examples", [])}


CSV_FIELDS = (
    "system", "n", "label_accuracy", "accuracy_ci_low", "accuracy_ci_high", "fever_score", "fever_ci_low",
    "fever_ci_high", "macro_f1", "evidence_precision", "evidence_recall", "evidence_f1", "recall@5",
    "recall@20", "hit_rate", "avg_sentences", "avg_pages", "seconds_per_claim", "claims_per_second",
    "vs", "accuracy_diff", "accuracy_diff_low", "accuracy_diff_high", "accuracy_mcnemar_p",
    "fever_diff", "fever_diff_low", "fever_diff_high", "fever_mcnemar_p",
    "macro_f1_ci_low", "macro_f1_ci_high", "macro_f1_diff", "macro_f1_diff_low", "macro_f1_diff_high",
)  # fmt: skip


def metrics_csv(metrics: Mapping) -> str:
    """One CSV row per system; the non-baseline rows carry the paired difference against the baseline."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    writer.writeheader()
    pairs = {p["b"]: p for p in metrics["paired"]}
    for name in metrics["systems"]:
        m = metrics["per_system"][name]
        r = m["retrieval"]
        row = {
            "system": name,
            "n": m["n"],
            "label_accuracy": m["label_accuracy"],
            "accuracy_ci_low": m["ci"]["accuracy"][1],
            "accuracy_ci_high": m["ci"]["accuracy"][2],
            "fever_score": m["fever_score"],
            "fever_ci_low": m["ci"]["fever_score"][1],
            "fever_ci_high": m["ci"]["fever_score"][2],
            "macro_f1": m["macro_f1"],
            "evidence_precision": m["evidence_precision"],
            "evidence_recall": m["evidence_recall"],
            "evidence_f1": m["evidence_f1"],
            "recall@5": r.get("recall@5"),
            "recall@20": r.get("recall@20"),
            "hit_rate": r.get("hit_rate"),
            "avg_sentences": r.get("avg_sentences"),
            "avg_pages": r.get("avg_pages"),
            "seconds_per_claim": m["cost"]["total"]["mean"],
            "claims_per_second": m["cost"]["claims_per_second"],
        }
        if m.get("macro_f1_ci"):
            row |= {"macro_f1_ci_low": m["macro_f1_ci"][1], "macro_f1_ci_high": m["macro_f1_ci"][2]}
        if name in pairs:
            p = pairs[name]
            acc, fs = p["accuracy"], p["fever_score"]
            row |= {
                "vs": p["a"],
                "accuracy_diff": acc["bootstrap"]["difference"],
                "accuracy_diff_low": acc["bootstrap"]["low"],
                "accuracy_diff_high": acc["bootstrap"]["high"],
                "accuracy_mcnemar_p": acc["mcnemar"]["p_value"],
                "fever_diff": fs["bootstrap"]["difference"],
                "fever_diff_low": fs["bootstrap"]["low"],
                "fever_diff_high": fs["bootstrap"]["high"],
                "fever_mcnemar_p": fs["mcnemar"]["p_value"],
            }
            if "macro_f1" in p:
                f1 = p["macro_f1"]["bootstrap"]
                row |= {"macro_f1_diff": f1["difference"], "macro_f1_diff_low": f1["low"],
                        "macro_f1_diff_high": f1["high"]}  # fmt: skip
        writer.writerow(row)
    return out.getvalue()
