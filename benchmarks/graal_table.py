"""GRAAL's Table 1 on garag's data, plus graph build and linker speed.

For Entity, Mention, Entity+Mention, GraphRetrieve (sentence frames) and GRAAL
(clause frames): average retrieved sentences and pages, hit rate (a complete
gold evidence set inside the retrieved set), GRAAL's "overall" (harmonic mean
of min(1, 100 / avg sentences) and hit rate) and time per claim, with entity
linking timed separately (it is shared by all modes).  On the FEVER subset's
verifiable claims, its cross-document slice (every complete gold set spans at
least two pages; few claims) and HoVer (overall and per number of hops).
BM25 and dense retrieval are scored at GRAAL's average number of sentences for
comparison.

Usage::

    nice -n 19 .venv/bin/python benchmarks/graal_table.py [--datasets fever hover] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from eval.retrieval_metrics import avg_retrieved_pages, avg_retrieved_sentences, fully_supported
from garag.artifacts import read_meta, write_json_atomic, write_text_atomic
from garag.config import load_config
from garag.types import Claim
from pipeline.retrieval import RetrievalPipeline

RESULTS = Path(__file__).resolve().parent / "results"
MODES = {
    "Entity": {"mode": "entity"},
    "Mention": {"mode": "mention"},
    "Entity+Mention": {"mode": "entity+mention"},
    "GraphRetrieve (sentence frames)": {"mode": "graal", "frames": "sentence", "neighbour_pages": 0},
    "GRAAL (clause frames)": {"mode": "graal", "frames": "clause", "neighbour_pages": 0},
    "GRAAL + 10 neighbour pages (garag)": {"mode": "graal", "frames": "clause", "neighbour_pages": 10},
}
PROJECTED_SENTENCES = 25_000_000


def _hit(claims: list[Claim], retrieved: list[set]) -> float:
    chosen = [fully_supported(c, r) for c, r in zip(claims, retrieved, strict=True) if c.verifiable]
    return sum(chosen) / len(chosen) if chosen else float("nan")


def _row(claims: list[Claim], retrieved: list[set], seconds: float) -> dict:
    avg = avg_retrieved_sentences(retrieved)
    hit = _hit(claims, retrieved)
    prec = min(1.0, 100.0 / avg) if avg > 0 else 1.0
    overall = 2 * prec * hit / (prec + hit) if prec + hit > 0 else 0.0
    return {
        "claims": len(claims),
        "avg_sentences": round(avg, 1),
        "avg_pages": round(avg_retrieved_pages(retrieved), 1),
        "hit_rate": round(hit, 4),
        "overall": round(overall, 4),
        "ms_per_claim": round(1000 * seconds / max(len(claims), 1), 2),
    }


def _slices(name: str, claims: list[Claim]) -> dict[str, list[int]]:
    idx = [i for i, c in enumerate(claims) if c.verifiable]
    out = {f"{name} (verifiable)": idx}
    if name == "fever":
        out["fever cross-document"] = [
            i for i in idx if all(len({s.page for s in g}) >= 2 for g in claims[i].evidence if g)
        ]
    else:
        for hops in sorted({claims[i].num_hops for i in idx if claims[i].num_hops}):
            out[f"hover {hops}-hop"] = [i for i in idx if claims[i].num_hops == hops]
    return out


def run(dataset: str, limit: int) -> dict:
    config = load_config(
        overrides=[f"data.dataset={dataset}", "retrieval.retrievers=[bm25,dense,graal]", "retrieval.k=2000"]
    )
    pipe = RetrievalPipeline(config, progress=False)
    pipe.build()
    graal = pipe.retrievers["graal"]
    claims = [c for c in pipe.dataset.claims() if c.verifiable]
    if limit:
        claims = claims[:limit]
    texts = [c.text for c in claims]
    graal.link_claims(texts[:2])  # load spaCy before timing
    started = time.perf_counter()
    linked = graal.link_claims(texts)
    link_seconds = time.perf_counter() - started
    linked_pages = [{m.entity for m in ms} for ms in linked]
    gold_in = [
        any(g and {s.page for s in g} <= lp for g in c.evidence)
        for c, lp in zip(claims, linked_pages, strict=True)
    ]
    gold_pages = [{s.page for g in c.evidence for s in g} for c in claims]
    page_share = sum(len(g & lp) for g, lp in zip(gold_pages, linked_pages, strict=True)) / max(
        sum(len(g) for g in gold_pages), 1
    )
    base = graal.config
    per_mode: dict[str, list[set]] = {}
    seconds: dict[str, dict[str, float]] = {}
    for label, overrides in MODES.items():
        graal.config = base.replace(**overrides)
        got, sec = [], {"graph": 0.0, "rank": 0.0}
        for text, ms in zip(texts, linked, strict=True):
            res = graal.search(text, ms)
            got.append({h.hit.sentence for h in res.hits})
            sec["graph"] += res.seconds["graph"]
            sec["rank"] += res.seconds["rank"]
        per_mode[label], seconds[label] = got, sec
    graal.config = base
    graal_avg = avg_retrieved_sentences(per_mode["GRAAL (clause frames)"])
    k_same = max(1, round(graal_avg))
    baselines = {}
    for name in ("bm25", "dense"):
        started = time.perf_counter()
        hits = pipe.retrievers[name].retrieve_batch(texts, k_same)
        baselines[name] = ([{h.sentence for h in hs} for hs in hits], time.perf_counter() - started)
    tables = {}
    for slice_name, idx in _slices(dataset, claims).items():
        sub = [claims[i] for i in idx]
        rows = {}
        for label, got in per_mode.items():
            sec = seconds[label]
            row = _row(sub, [got[i] for i in idx], (sec["graph"] + sec["rank"]) * len(idx) / len(claims))
            row["ms_graph"] = round(1000 * sec["graph"] / len(claims), 2)
            row["ms_rank"] = round(1000 * sec["rank"] / len(claims), 2)
            rows[label] = row
        for name, (got, sec) in baselines.items():
            rows[f"{name} @ {k_same} (GRAAL's avg)"] = _row(
                sub, [got[i] for i in idx], sec * len(idx) / len(claims)
            )
        tables[slice_name] = rows
    meta = read_meta(pipe.artifacts["graal"]) or {}
    build = meta.get("graph", {})
    rate = build.get("sentences_per_second") or 0
    return {
        "dataset": dataset,
        "claims": len(claims),
        "tables": tables,
        "linking": {
            "ms_per_claim": round(1000 * link_seconds / len(claims), 2),
            "claims_per_second": round(len(claims) / link_seconds, 1),
            "claims_with_a_gold_set_fully_linked": round(sum(gold_in) / len(claims), 4),
            "gold_pages_linked_share": round(page_share, 4),
            "avg_linked_entities": round(sum(map(len, linked_pages)) / len(claims), 2),
        },
        "build": {
            **build,
            "build_seconds": meta.get("build_seconds"),
            "projected_hours_for_25M_sentences_one_process": round(PROJECTED_SENTENCES / rate / 3600, 1)
            if rate
            else None,
        },
    }


def to_markdown(results: list[dict]) -> str:
    md = [
        "# GRAAL Table 1 on garag's data",
        "",
        "Command: `nice -n 19 .venv/bin/python benchmarks/graal_table.py`",
        "",
    ]
    cols = ["avg_sentences", "avg_pages", "hit_rate", "overall", "ms_per_claim"]
    for r in results:
        for slice_name, rows in r["tables"].items():
            n = next(iter(rows.values()))["claims"]
            caveat = " (few claims: read with care)" if n < 50 else ""
            md += [f"## {slice_name}: {n} claims{caveat}", "", "| method | " + " | ".join(cols) + " |"]
            md.append("|---" * (len(cols) + 1) + "|")
            for label, row in rows.items():
                md.append(f"| {label} | " + " | ".join(str(row[c]) for c in cols) + " |")
            md.append("")
        md += [f"### {r['dataset']}: entity linking and graph build", "", "```json"]
        md += [json.dumps({"linking": r["linking"], "build": r["build"]}, indent=2), "```", ""]
    md.append(
        "ms_per_claim excludes entity linking (shared by all modes; see `linking`). "
        "GRAAL's overall = harmonic mean of min(1, 100/avg sentences) and hit rate."
    )
    return "\n".join(md) + "\n"


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["fever", "hover"])
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    results = [run(d, args.limit) for d in args.datasets]
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RESULTS / "graal_table.json", results)
    write_text_atomic(RESULTS / "graal_table.md", to_markdown(results))
    print(to_markdown(results))


if __name__ == "__main__":
    main()
