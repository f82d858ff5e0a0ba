"""Retrieval evaluation run: every configured retriever and their fusion on a dataset's claims.

Writes ``metrics.json``, ``table.md``, ``table.csv`` and ``hits.jsonl`` (per claim,
the fused top hits with the retrievers that found them) into the output
directory, each atomically.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from eval.retrieval_metrics import RetrievalBreakdown, RetrievalReport, retrieval_breakdown
from garag.artifacts import write_json_atomic, write_text_atomic
from garag.config import Config
from garag.errors import ErrorPolicy
from garag.types import Claim, SentenceId
from pipeline.retrieval import RetrievalPipeline

logger = logging.getLogger(__name__)

BATCH = 64


@dataclass(frozen=True)
class RetrievalEvaluation:
    """Result of ``evaluate_retrieval``.

    Attributes:
        dataset: dataset name.
        reports: system name ("bm25", ..., "fused") -> overall and per-group reports.
        ms_per_claim: system name -> mean retrieval milliseconds per claim (batched).
        table_markdown: the summary tables as Markdown.
        out_dir: where the files were written.
    """

    dataset: str
    reports: dict[str, RetrievalBreakdown]
    ms_per_claim: dict[str, float]
    table_markdown: str
    out_dir: Path


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _row(name: str, r: RetrievalReport, ms: float | None) -> list[str]:
    return (
        [name]
        + [_fmt(v) for _, v in r.recall_at_k]
        + [_fmt(r.hit_rate), _fmt(r.page_recall), f"{r.avg_sentences:.1f}", f"{r.avg_pages:.1f}"]
        + ([f"{ms:.1f}"] if ms is not None else [])
    )


def format_tables(
    dataset: str, reports: dict[str, RetrievalBreakdown], ms: dict[str, float]
) -> tuple[str, str]:
    """Markdown and CSV tables: overall, then one block per group (e.g. hops)."""
    first = next(iter(reports.values()))
    ks = [k for k, _ in first.overall.recall_at_k]
    header = ["system"] + [f"R@{k}" for k in ks] + ["hit rate", "page recall", "avg sents", "avg pages"]
    md = [
        f"### {dataset}: {first.overall.n_claims} claims, {first.overall.n_verifiable} verifiable",
        "",
        "| " + " | ".join(header + ["ms/claim"]) + " |",
        "|" + "---|" * (len(header) + 1),
    ]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["group"] + header + ["ms_per_claim"])
    for name, b in reports.items():
        md.append("| " + " | ".join(_row(name, b.overall, ms.get(name))) + " |")
        writer.writerow(["all"] + _row(name, b.overall, ms.get(name)))
    groups = [g for g, _ in first.groups if g is not None]
    for g in groups:
        n = first.group(g)
        md += [
            "",
            f"#### group {g} ({n.n_claims} claims, {n.n_verifiable} verifiable)",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        for name, b in reports.items():
            md.append("| " + " | ".join(_row(name, b.group(g), None)) + " |")
            writer.writerow([g] + _row(name, b.group(g), None) + [""])
    return "\n".join(md) + "\n", out.getvalue()


def evaluate_retrieval(
    config: Config,
    out_dir: str | Path | None = None,
    progress: bool = True,
    pipeline: RetrievalPipeline | None = None,
) -> RetrievalEvaluation:
    """Run every configured retriever and the fusion over the dataset's claims and score them.

    Args:
        config: the run configuration (dataset, retrievers, fusion, ``eval.ks``, ``eval.limit``).
        out_dir: output directory; default ``<results_dir>/retrieval/<dataset>``.
        progress: show a progress bar.
        pipeline: an already built pipeline to reuse (else one is built from ``config``).
    """
    pipe = pipeline or RetrievalPipeline(config, progress=progress)
    if not pipe.retrievers:
        pipe.build()
    policy = ErrorPolicy(skip=config.data.skip_bad_lines)
    claims: list[Claim] = list(pipe.dataset.claims(policy))
    if config.eval.limit:
        claims = claims[: config.eval.limit]
    if not claims:
        raise ValueError(f"{pipe.dataset.claims_path}: no claims to evaluate")
    k = max(max(config.eval.ks), config.retrieval.k)
    names = list(pipe.retrievers) + ["fused"]
    ranked: dict[str, list[list[SentenceId]]] = {n: [] for n in names}
    seconds = {n: 0.0 for n in names}
    out = Path(out_dir or Path(config.paths.results_dir) / "retrieval" / pipe.dataset.name)
    out.mkdir(parents=True, exist_ok=True)
    hits_lines: list[str] = []
    bar = tqdm(total=len(claims), desc=f"retrieval {pipe.dataset.name}", unit=" claims", disable=not progress)
    started = time.perf_counter()
    for i in range(0, len(claims), BATCH):
        batch = claims[i : i + BATCH]
        results = pipe.retrieve_batch([c.text for c in batch], k)
        for claim, res in zip(batch, results, strict=True):
            for n in pipe.retrievers:
                ranked[n].append([h.sentence for h in res.per_retriever[n]])
                seconds[n] += res.seconds.get(n, 0.0)
            ranked["fused"].append([h.sentence for h in res.fused])
            seconds["fused"] += sum(res.seconds.values())
            hits_lines.append(
                json.dumps(
                    {
                        "id": claim.id,
                        "claim": claim.text,
                        "fused": [
                            [h.sentence.page, h.sentence.line, round(h.score, 6), list(h.sources)]
                            for h in res.fused[:20]
                        ],
                    },
                    ensure_ascii=False,
                )
            )
        bar.update(len(batch))
    bar.close()
    logger.info("retrieved %d claims in %.1fs", len(claims), time.perf_counter() - started)
    reports = {n: retrieval_breakdown(claims, ranked[n], config.eval.ks) for n in names}
    ms = {n: 1000 * seconds[n] / len(claims) for n in names}
    md, csv_text = format_tables(pipe.dataset.name, reports, ms)
    metrics = {
        "dataset": pipe.dataset.name,
        "claims_file": str(pipe.dataset.claims_path),
        "skipped_claims": dict(policy.counts),
        "systems": {
            n: {
                "overall": b.overall.to_dict(),
                "groups": {str(g): r.to_dict() for g, r in b.groups if g is not None},
                "ms_per_claim": ms[n],
            }
            for n, b in reports.items()
        },
        "config": config.to_dict(),
        "artifacts": {n: str(p) for n, p in pipe.artifacts.items()},
    }
    write_json_atomic(out / "metrics.json", metrics)
    write_text_atomic(out / "table.md", md)
    write_text_atomic(out / "table.csv", csv_text)
    write_text_atomic(out / "hits.jsonl", "\n".join(hits_lines) + "\n")
    return RetrievalEvaluation(pipe.dataset.name, reports, ms, md, out)
