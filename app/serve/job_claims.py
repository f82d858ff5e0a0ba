"""Jobs of kind "claims": verify a file of claims through the service's batcher, a batch at a time, and
score them against their gold labels with ``garag evaluate``'s metrics.

The claims go through :meth:`Service.submit_claims`, the batcher that serves interactive requests, so
those interleave with a job's batches and the pipeline keeps its one user thread.  Each result is the
record ``garag predict`` writes (``eval.verification_eval.result_record``).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from eval.verification_eval import EVAL_RESAMPLES, EVAL_SEED, score_records
from garag.claims import FEVER_LABELS
from garag.datasets import Dataset, fever, hover
from garag.types import Claim, SentenceId

from .batcher import QueueFull
from .csv_out import csv_lines
from .job_runner import JobCancelled, JobContext
from .jobs import Result

KIND = "claims"
DOWNLOADS = {
    "jsonl": ("application/x-ndjson", "jsonl"),  # garag's records, as `garag predict` writes them
    "fever": ("application/x-ndjson", "fever.jsonl"),  # FEVER's official submission format
    "csv": ("text/csv; charset=utf-8", "csv"),
}
FEVER_FIELDS = ("id", "predicted_label", "predicted_evidence")


def claim_item(c: Claim) -> dict:
    """A claim as a job item (JSON)."""
    return {
        "id": c.id,
        "claim": c.text,
        "label": c.label,
        "evidence": [[s.to_json() for s in group] for group in c.evidence],
        **({"num_hops": c.num_hops} if c.num_hops is not None else {}),
    }


def item_claim(item: dict) -> Claim:
    evidence = tuple(tuple(SentenceId(p, int(n)) for p, n in group) for group in item.get("evidence", []))
    return Claim(item["id"], item["claim"], item.get("label"), evidence, item.get("num_hops"))


def scoring_dataset(labels: Iterable[str] | None, served: Dataset, gold: list[Claim], source: str) -> Dataset:
    """The dataset a job's claims are scored as: the config's own where its labels are the file's,
    else FEVER's or HoVer's (by the file's labels), with the job's labelled claims as its claims."""
    labels = tuple(labels or ())
    base = served if served.labels == labels or not labels else fever() if labels == FEVER_LABELS else hover()
    return dataclasses.replace(
        base, claims_path=Path(source), part="all", reader=lambda _path, _policy=None: iter(gold)
    )


def _submit(ctx: JobContext, claims: list[Claim], k: int | None) -> cf.Future:
    """Queue a batch; while the queue is full of interactive requests, wait (cancel and stop still act)."""
    while True:
        try:
            return ctx.service.submit_claims(ctx.job.config, claims, k)
        except QueueFull as e:
            deadline = time.monotonic() + min(e.retry_after, 5)
            while time.monotonic() < deadline:
                ctx.check()
                time.sleep(0.1)


def _wait(ctx: JobContext, future: cf.Future) -> bool:
    """Wait for a batch; on cancel, drop it if it has not started.  True when cancelled."""
    while not future.done():
        try:
            future.exception(timeout=0.25)
        except cf.TimeoutError:
            if ctx.cancelled():
                future.cancel()  # a batch running finishes; its results are kept
                cf.wait([future])
                return True
        except cf.CancelledError:
            return True
    return False


def run_claims(
    ctx: JobContext, chunk: int = 32, on_done: Callable[[str, int], None] | None = None
) -> dict | None:
    """Verify a job's claims without a result, ``chunk`` at a time (one pipeline batch each, as
    ``garag predict`` runs them), writing each batch's results in one transaction; then its metrics
    where claims have gold labels."""
    job, store = ctx.job, ctx.store
    served = ctx.service.served[job.config]
    source = job.params.get("filename") or f"job {job.id}"
    to_label = scoring_dataset(job.params.get("labels"), served.pipe.dataset, [], source).verdict_to_label
    todo = store.pending(job.id)
    k = job.params.get("k")
    parts = iter([todo[i : i + chunk] for i in range(0, len(todo), chunk)])

    def submit(part: list[tuple[int, dict]]) -> tuple[list[tuple[int, Claim]], float, cf.Future]:
        claims = [(idx, item_claim(item)) for idx, item in part]
        return claims, time.perf_counter(), _submit(ctx, [c for _, c in claims], k)

    def write(claims: list[tuple[int, Claim]], began: float, future: cf.Future) -> None:
        records = future.result()  # the pipeline's error fails the job
        results = []
        for (idx, claim), record in zip(claims, records, strict=True):
            record["dataset_label"] = to_label.get(record["predicted_label"], record["predicted_label"])
            correct = None if claim.label is None else record["dataset_label"] == claim.label
            results.append(Result(idx, record["predicted_label"], claim.label, correct, record))
        versions = [r["index_version"] for r in records]
        store.add_results(job.id, results, time.perf_counter() - began, versions)
        if on_done is not None:
            on_done(job.config, len(results))

    # one batch queued ahead of the one awaited: the pipeline never waits for this thread's writes
    first = next(parts, None)
    current = submit(first) if first is not None else None
    while current is not None:
        ahead = None
        try:
            ctx.check()
            part = next(parts, None)
            ahead = submit(part) if part is not None else None
            cancelled = _wait(ctx, current[2])
        except BaseException:
            if ahead is not None:
                ahead[2].cancel()  # not started: dropped; the job resumes from it
            raise
        if cancelled and ahead is not None and not ahead[2].cancel():
            cf.wait([ahead[2]])  # it had started: its results are kept too
            write(*ahead)
            ahead = None
        if not current[2].cancelled():
            write(*current)
        if cancelled or current[2].cancelled():
            raise JobCancelled
        current = ahead
    ctx.check()
    return job_metrics(ctx) if job.params.get("labels") else None


def job_metrics(ctx: JobContext) -> dict:
    """``garag evaluate``'s metrics of a job's results (its claims with a gold label)."""
    job, store = ctx.job, ctx.store
    served = ctx.service.served[job.config]
    gold = [c for c in map(item_claim, store.items(job.id)) if c.label is not None]
    source = job.params.get("filename") or f"job {job.id}"
    dataset = scoring_dataset(job.params.get("labels"), served.pipe.dataset, gold, source)
    records = list(store.iter_records(job.id))
    return score_records(dataset, records, served.config.eval.ks, source, EVAL_RESAMPLES, EVAL_SEED)


def download_lines(fmt: str, records: Iterable[dict]) -> Iterator[str]:
    """The text of a download, a record at a time: garag's JSONL, FEVER's submission JSONL or CSV."""
    if fmt == "jsonl":
        for r in records:
            yield json.dumps(r, ensure_ascii=False) + "\n"
        return
    if fmt == "fever":
        for r in records:
            yield json.dumps({k: r[k] for k in FEVER_FIELDS}, ensure_ascii=False) + "\n"
        return
    labels = list(FEVER_LABELS)
    head = ["id", "claim", "gold_label", "predicted_label", "dataset_label", "correct",
            *(f"score {lab}" for lab in labels), "predicted_evidence", "explanation"]  # fmt: skip

    def row(r: dict) -> list:
        gold = r.get("label")
        return [
            r["id"], r["claim"], gold or "", r["predicted_label"], r["dataset_label"],
            "" if gold is None else str(r["dataset_label"] == gold).lower(),
            *(r.get("scores", {}).get(lab, "") for lab in labels),
            "; ".join(f"{p} ({n})" for p, n in r["predicted_evidence"]), r.get("explanation", ""),
        ]  # fmt: skip

    yield from csv_lines(itertools.chain([head], map(row, records)))
