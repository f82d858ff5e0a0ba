"""Verification runs: predictions written incrementally, then scored with the official semantics.

``predictions.jsonl`` holds one record per claim in FEVER's submission format
(``id``, ``predicted_label``, ``predicted_evidence``) plus the explanation, the
label scores, the dataset-native label, the retrieved list and per-stage
timings.  A killed run resumes where it stopped; scoring reads only the file,
so a saved run can be re-scored without running any model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from eval.contrast_metrics import contrast_metrics, contrast_table
from eval.fever_score import (
    FeverPrediction,
    confusion_matrix,
    hover_score,
    macro_f1,
    per_class_scores,
    score_claims,
)
from eval.garag_metrics import garag_metrics
from eval.retrieval_metrics import retrieval_breakdown
from eval.run_env import tree_hashes
from eval.run_hash import run_config_hash
from eval.significance import bootstrap_macro_f1
from garag.artifacts import settings_hash, write_json_atomic, write_text_atomic
from garag.claims import is_claim_id, is_line_number
from garag.config import Config
from garag.datasets import Dataset, dataset_from_config
from garag.errors import ErrorPolicy, InputError
from garag.jsonl import ResumableJsonl, read_records
from garag.runs import check_identity, claims_fingerprint, output_dir, run_lock
from garag.types import Claim, SentenceId
from pipeline.retrieval import corpus_fingerprint
from pipeline.verification import ClaimResult, VerificationPipeline, predicted_evidence

logger = logging.getLogger(__name__)

RETRIEVED_KEPT = 100
# The macro-F1 intervals of `garag evaluate`'s metrics: resamples and numpy seed (compare uses its own).
EVAL_RESAMPLES = 10_000
EVAL_SEED = 0


def result_record(result: ClaimResult, dataset: Dataset) -> dict:
    """The JSON record of one claim's result (FEVER submission fields first)."""
    v = result.verdict
    return {
        "id": result.claim.id,
        "predicted_label": v.label.value,
        "predicted_evidence": [s.to_json() for s in predicted_evidence(result)],
        "label": result.claim.label,
        "dataset_label": dataset.verdict_to_label.get(v.label.value, v.label.value),
        "claim": result.claim.text,
        "explanation": v.explanation,
        "scores": {lab.value: round(float(p), 6) for lab, p in v.scores.items()},
        "evidence_read": [e.sentence.to_json() for e in result.evidence],
        "retrieved": [h.sentence.to_json() for h in result.retrieval.fused[:RETRIEVED_KEPT]],
        "sources": {
            f"{h.sentence.page}\t{h.sentence.line}": list(h.sources) for h in result.retrieval.fused[:20]
        },
        "seconds": {k: round(x, 6) for k, x in result.seconds.items()},
        **({"program": result.program} if result.program is not None else {}),
        **({"graph": result.graph.to_json()} if result.graph is not None else {}),
    }


@dataclass(frozen=True)
class RunOutcome:
    """Where a prediction run wrote and what it skipped."""

    predictions: Path
    written: int
    resumed: int
    skipped: dict[str, int]
    claims_per_second: float
    llm: dict[str, int] | None = None  # LLM verdicts of this run: requests, cache hits, fallbacks


def validate_claims(claims: Sequence[Claim], policy: ErrorPolicy, source: str) -> list[Claim]:
    """Drop (and count) claims the pipeline cannot verify: empty or punctuation-only text."""
    kept = []
    for i, c in enumerate(claims, start=1):
        if not any(ch.isalnum() for ch in c.text):
            kind = "empty_claim" if not c.text.strip() else "punctuation_only_claim"
            policy.handle(
                InputError(source, None, f"claim {c.id!r} (#{i}) has no words: {c.text!r}", kind=kind)
            )
            continue
        kept.append(c)
    return kept


def run_identity(config: Config, pipe: VerificationPipeline, claims: Sequence[Claim], oracle: bool) -> dict:
    """What a prediction run is made from: settings, claims (ids and texts), corpus and model contents."""
    model = pipe.model_path or ""
    identity = {
        "config_hash": run_config_hash(config, two_way=pipe.dataset.two_way),
        "model": model,
        "model_files": settings_hash(tree_hashes(model)) if model and Path(model).exists() else None,
        "oracle": oracle,
        "dataset": pipe.dataset.name,
        "claims_file": str(pipe.dataset.claims_path),
        "claims": claims_fingerprint(claims),
        "corpus": corpus_fingerprint(pipe.dataset, config.paths.cache_dir),
    }
    mix = getattr(pipe, "mix_model_path", "")
    if mix:  # verifier.mix_weight's second verifier (absent otherwise: older runs keep their identity)
        identity["mix_model"] = mix
        identity["mix_model_files"] = settings_hash(tree_hashes(mix)) if Path(mix).exists() else None
    return identity


def _check_run_identity(
    out: Path, config: Config, identity: dict, force_new: bool, policy: ErrorPolicy
) -> None:
    """Record what produced a run; refuse to resume one made from anything else (or set it aside)."""
    path = out / "run.json"
    predictions = out / "predictions.jsonl"
    if predictions.is_file():
        check_identity(path, identity, force_new, [predictions], "predictions", "another --out")
    out.mkdir(parents=True, exist_ok=True)
    skipped = {"counts": dict(policy.counts), "examples": policy.examples}
    write_json_atomic(path, {**identity, "config": config.to_dict(), "skipped": skipped})


# (config, progress) -> an unbuilt pipeline (the app's trains the config's verifier first)
PipelineFactory = Callable[[Config, bool], Any]


def default_pipeline(config: Config, progress: bool) -> VerificationPipeline:
    """The pipeline a config describes (cheap; ``build()`` does the work)."""
    return VerificationPipeline(config, progress=progress)


def run_predictions(
    config: Config,
    out_dir: str | Path,
    pipeline: VerificationPipeline | None = None,
    oracle: bool = False,
    progress: bool = True,
    batch_size: int = 32,
    force_new: bool = False,
    pipeline_factory: PipelineFactory = default_pipeline,
) -> RunOutcome:
    """Predict every claim of the configured dataset into ``out_dir/predictions.jsonl`` (resumable).

    A bad claim (empty, punctuation only, repeated id, unknown label) stops the run with
    ``file:line: reason``, or with ``data.skip_bad_lines`` is skipped and counted (in
    ``run.json`` and the outcome).  Gold evidence naming a page missing from the corpus is
    counted as a warning; the run goes on.  One process writes a run directory at a time; a run
    made from other settings, claims, corpus or model is refused unless ``force_new``
    (then its predictions are set aside, not deleted).  ``pipeline_factory`` makes the pipeline
    when none is given, once the claims have passed.
    """
    out = output_dir(out_dir)
    dataset = pipeline.dataset if pipeline is not None else dataset_from_config(config.data)
    policy = ErrorPolicy(skip=config.data.skip_bad_lines)
    # claims first: a bad claims file fails before any index or model is loaded (or trained)
    claims = validate_claims(list(dataset.claims(policy)), policy, str(dataset.claims_path))
    if config.eval.limit:
        claims = claims[: config.eval.limit]
    pipe = pipeline or pipeline_factory(config, progress)
    if pipe.verifier is None:
        pipe.build()
    missing_pages = sorted(
        {s.page for c in claims for g in c.evidence for s in g if not pipe.store.has_page(s.page)}
    )
    if missing_pages:
        policy.counts["gold_page_missing_from_corpus"] = len(missing_pages)
        logger.warning(
            "%d gold evidence pages are not in the corpus (e.g. %s)", len(missing_pages), missing_pages[:3]
        )
    with run_lock(out):
        _check_run_identity(out, config, run_identity(config, pipe, claims, oracle), force_new, policy)
        return _predict_into(out, pipe, claims, oracle, progress, batch_size, policy)


def _predict_into(
    out: Path,
    pipe: VerificationPipeline,
    claims: Sequence[Claim],
    oracle: bool,
    progress: bool,
    batch_size: int,
    policy: ErrorPolicy,
) -> RunOutcome:
    writer = ResumableJsonl(out / "predictions.jsonl")
    todo = [c for c in claims if not writer.is_done(c.id)]
    resumed = len(claims) - len(todo)
    if resumed:
        logger.info("resuming: %d of %d claims already predicted", resumed, len(claims))
    started = time.perf_counter()
    bar = tqdm(
        total=len(claims),
        initial=resumed,
        desc=f"verify {pipe.dataset.name}",
        unit=" claims",
        disable=not progress,
    )
    with writer:
        for result in pipe.iter_results(todo, batch_size=batch_size, oracle=oracle):
            writer.write(result_record(result, pipe.dataset))
            bar.update(1)
    bar.close()
    seconds = time.perf_counter() - started
    return RunOutcome(
        out / "predictions.jsonl",
        len(todo),
        resumed,
        dict(policy.counts),
        len(todo) / seconds if todo and seconds > 0 else 0.0,
        _llm_summary(pipe),
    )


def _llm_summary(pipe: VerificationPipeline) -> dict[str, int] | None:
    """How the LLM stages fared: requests, cache hits, failures, claims decided by the LLM verifier's
    NLI fallback and, with ``verifier.llm_judge``, the judge's Yes / No / unusable answers (a judge
    reply cut at its few tokens counts among ``fallbacks`` yet is read from its first word)."""
    client = getattr(pipe, "llm_client", None)
    if client is None:
        return None
    total = client.stats.snapshot()["total"]
    keys = ("requests", "cache_hits", "errors", "timeouts", "invalid", "fallbacks", "verifier_fallbacks")
    out = {k: int(total.get(k, 0)) for k in keys}
    judge = getattr(pipe, "llm_judge", None)
    if judge is not None:
        out |= {f"judge_{k}": n for k, n in judge.counts.items()}
    return out


def _normalise(record: dict, dataset: Dataset, source: str) -> dict:
    """A garag record, or a record of FEVER's official submission format (``id``,
    ``predicted_label``, ``predicted_evidence``), with its label in the dataset's terms."""

    def bad(what: str) -> InputError:
        return InputError(
            source, None, f"prediction for claim {record.get('id')!r}: {what}", kind="bad_record"
        )

    if not is_claim_id(record.get("id")):
        raise bad("the id must be an integer or a string")
    label = record.get("dataset_label")
    if label is None:
        verdict = record.get("predicted_label")
        if not isinstance(verdict, str):
            raise bad("no 'predicted_label' (a FEVER label) or 'dataset_label'")
        label = dataset.verdict_to_label.get(verdict, verdict)
    if label not in dataset.labels:
        raise bad(f"label {label!r} is not one of {tuple(dataset.labels)}")
    evidence = []
    for pair in record.get("predicted_evidence") or []:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise bad(f"evidence {pair!r} is not [page, line]")
        if not is_line_number(pair[1]):
            raise bad(f"evidence {pair!r} has no line number >= 0")
        evidence.append(pair)
    retrieved = record.get("retrieved", evidence)
    return {**record, "dataset_label": label, "predicted_evidence": evidence, "retrieved": retrieved}


def _macro_f1_ci(
    gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str], n_resamples: int, seed: int
) -> dict:
    if n_resamples <= 0:
        return {}
    return {"macro_f1_ci": list(bootstrap_macro_f1(gold, predicted, labels, n_resamples, seed))}


def score_records(
    dataset: Dataset,
    records: Sequence[dict],
    ks: Sequence[int] = (5, 20, 100),
    source: str = "predictions",
    n_resamples: int = 0,
    seed: int = 0,
) -> dict:
    """Metrics of saved predictions against the dataset's gold claims.

    FEVER's official semantics apply to the dataset's own labels (FEVER: 3-way; HoVer:
    SUPPORTS -> SUPPORTED, REFUTES/NEI -> NOT_SUPPORTED, and every HoVer claim needs its
    single evidence set for the strict score, as no HoVer label is NEI).  Records are garag's
    or FEVER's official submission format (retrieval metrics then read the predicted evidence).
    With ``n_resamples`` > 0, macro-F1 overall and per hop count also gets its 95% percentile
    bootstrap interval (``macro_f1_ci``: [value, low, high]; claims resampled ``n_resamples``
    times with numpy seed ``seed``).

    Raises:
        InputError: a record without a usable label or with malformed evidence, naming ``source``.
    """
    gold = {c.id: c for c in dataset.claims(ErrorPolicy(skip=True))}
    by_id = {r["id"]: r for r in (_normalise(r, dataset, source) for r in records)}
    ids = [i for i in gold if i in by_id]
    if not ids:
        raise ValueError("no prediction matches a gold claim id")
    claims = [gold[i] for i in ids]
    recs = [by_id[i] for i in ids]
    labels = list(dataset.labels)
    predicted = [r["dataset_label"] for r in recs]
    gold_labels = [c.label for c in claims]
    preds = [
        FeverPrediction(r["dataset_label"], tuple(SentenceId(p, int(n)) for p, n in r["predicted_evidence"]))
        for r in recs
    ]
    fever = score_claims(claims, preds)
    retrieved = [[SentenceId(p, int(n)) for p, n in r["retrieved"]] for r in recs]
    breakdown = retrieval_breakdown(claims, retrieved, ks)
    seconds: dict[str, list[float]] = {}
    for r in recs:
        for stage, s in r.get("seconds", {}).items():
            seconds.setdefault(stage, []).append(s)
    per_group = {}
    for g, rep in breakdown.groups:
        if g is None:
            continue
        members = [i for i, c in enumerate(claims) if c.num_hops == g]
        sub = score_claims([claims[i] for i in members], [preds[i] for i in members])
        group_gold, group_pred = [gold_labels[i] for i in members], [predicted[i] for i in members]
        per_group[str(g)] = {
            "n": len(members),
            "accuracy": sub.accuracy,
            "fever_score": sub.strict,
            "macro_f1": macro_f1(group_gold, group_pred, labels),
            **_macro_f1_ci(group_gold, group_pred, labels, n_resamples, seed),
            "hover_score": hover_score([claims[i] for i in members], [preds[i] for i in members]),
            "retrieval": rep.to_dict(),
        }
    return {
        "dataset": dataset.name,
        "n": len(ids),
        "missing_predictions": len(gold) - len(ids),
        "label_accuracy": fever.accuracy,
        "fever_score": fever.strict,
        "evidence_precision": fever.precision,
        "evidence_recall": fever.recall,
        "evidence_f1": fever.f1,
        "macro_f1": macro_f1(gold_labels, predicted, labels),
        **_macro_f1_ci(gold_labels, predicted, labels, n_resamples, seed),
        **({"hover_score": hover_score(claims, preds)} if per_group else {}),
        "per_class": {
            s.label: {"precision": s.precision, "recall": s.recall, "f1": s.f1, "support": s.support}
            for s in per_class_scores(gold_labels, predicted, labels)
        },
        "confusion": {"labels": labels, "matrix": confusion_matrix(gold_labels, predicted, labels)},
        "retrieval": breakdown.overall.to_dict(),
        "groups": per_group,
        "seconds_per_claim": {k: sum(v) / len(v) for k, v in seconds.items()},
        "garag": garag_metrics(claims, recs),
        **({"contrast": contrast_metrics(claims, predicted)} if any(c.contrast for c in claims) else {}),
    }


def macro_f1_ci_text(m: Mapping, digits: int = 3) -> str:
    """The text " [low, high]" of a metrics dict's macro-F1 interval, or "" where it has none (runs
    scored before intervals, or without them)."""
    ci = m.get("macro_f1_ci")
    return f" [{ci[1]:.{digits}f}, {ci[2]:.{digits}f}]" if ci else ""


def _f1_head(m: Mapping) -> str:
    return "macro-F1 [95% CI]" if m.get("macro_f1_ci") else "macro-F1"


def metrics_table(name: str, m: dict) -> str:
    """A Markdown summary of ``score_records`` output."""
    lines = [
        f"### {name}: {m['dataset']}, {m['n']} claims",
        "",
        f"| label acc | FEVER score | {_f1_head(m)} | evidence P | evidence R | evidence F1 | R@5 | R@20 |",
        "|---|---|---|---|---|---|---|---|",
        f"| {m['label_accuracy']:.4f} | {m['fever_score']:.4f} | "
        f"{m['macro_f1']:.4f}{macro_f1_ci_text(m, 4)} | "
        f"{m['evidence_precision']:.4f} | {m['evidence_recall']:.4f} | {m['evidence_f1']:.4f} | "
        f"{m['retrieval'].get('recall@5') or 0:.3f} | {m['retrieval'].get('recall@20') or 0:.3f} |",
        "",
        "| class | precision | recall | F1 | support |",
        "|---|---|---|---|---|",
    ]
    for lab, s in m["per_class"].items():
        lines.append(f"| {lab} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | {s['support']} |")
    labels = m["confusion"]["labels"]
    lines += [
        "",
        "Confusion (rows gold, columns predicted):",
        "",
        "| gold \\ pred | " + " | ".join(labels) + " |",
        "|---" * (len(labels) + 1) + "|",
    ]
    for lab, row in zip(labels, m["confusion"]["matrix"], strict=True):
        lines.append(f"| {lab} | " + " | ".join(str(x) for x in row) + " |")
    if m["groups"]:
        lines += [
            "",
            f"| hops | n | accuracy | {_f1_head(m)} | HoVer score | FEVER score | R@5 | R@20 |",
            "|---|---|---|---|---|---|---|---|",
            f"| all | {m['n']} | {m['label_accuracy']:.3f} | {m['macro_f1']:.3f}{macro_f1_ci_text(m)} | "
            f"{m.get('hover_score', 0.0):.3f} | {m['fever_score']:.3f} | "
            f"{m['retrieval'].get('recall@5') or 0:.3f} | {m['retrieval'].get('recall@20') or 0:.3f} |",
        ]
        for g, s in m["groups"].items():
            lines.append(
                f"| {g} | {s['n']} | {s['accuracy']:.3f} | {s['macro_f1']:.3f}{macro_f1_ci_text(s)} | "
                f"{s.get('hover_score', 0.0):.3f} | {s['fever_score']:.3f} | "
                f"{s['retrieval'].get('recall@5') or 0:.3f} | {s['retrieval'].get('recall@20') or 0:.3f} |"
            )
    if m.get("contrast"):
        lines += [
            "",
            "Contrast set (changes that keep every name):",
            "",
            contrast_table(m["contrast"]).rstrip(),
        ]
    g = m.get("garag") or {}
    shown = {k: v for k, v in g.items() if v is not None}
    if shown:
        lines += [
            "",
            "GA-RAG metrics: " + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in shown.items()),
        ]
    secs = m.get("seconds_per_claim", {})
    if secs:
        lines += ["", "Seconds per claim: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in secs.items())]
    return "\n".join(lines) + "\n"


def write_metrics(out_dir: Path, name: str, metrics: dict) -> str:
    """Write ``metrics.json`` and ``metrics.md``; return the Markdown."""
    write_json_atomic(out_dir / "metrics.json", metrics)
    md = metrics_table(name, metrics)
    write_text_atomic(out_dir / "metrics.md", md)
    return md


def records_from_file(path: Path, policy: ErrorPolicy | None = None) -> list[dict]:
    """A predictions file, read only: a bad line is an error naming it, or skipped per ``policy``."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no predictions file")
    return read_records(path, policy=policy)


@dataclass(frozen=True)
class EvaluationOutcome:
    """What ``evaluate`` did: the metrics table, where it was written, claims skipped while predicting."""

    table: str
    out_dir: Path
    skipped: dict[str, int]


def evaluate(
    config: Config,
    out: Path,
    predictions: Path | None = None,
    oracle: bool = False,
    progress: bool = True,
    force_new: bool = False,
    pipeline_factory: PipelineFactory = default_pipeline,
) -> EvaluationOutcome:
    """Predict into ``out`` (resuming) and score, or only score a saved ``predictions`` file.

    Metrics go to ``metrics.json`` / ``metrics.md`` beside the predictions.
    """
    dataset = dataset_from_config(config.data)
    skipped: dict[str, int] = {}
    if predictions is not None:
        path, out = predictions, predictions.parent
    else:
        outcome = run_predictions(
            config,
            out,
            oracle=oracle,
            progress=progress,
            force_new=force_new,
            pipeline_factory=pipeline_factory,
        )
        path, skipped = outcome.predictions, outcome.skipped
    read_policy = ErrorPolicy(skip=config.data.skip_bad_lines)
    metrics = score_records(
        dataset, records_from_file(path, read_policy), config.eval.ks, str(path), EVAL_RESAMPLES, EVAL_SEED
    )
    if read_policy.skipped:
        metrics["skipped_prediction_lines"] = dict(read_policy.counts)
    if skipped:
        metrics["skipped_claims"] = dict(skipped)
    table = write_metrics(out, "oracle evidence" if oracle else "open retrieval", metrics)
    return EvaluationOutcome(table, out, skipped)
