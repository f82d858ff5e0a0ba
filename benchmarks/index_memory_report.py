"""The report of benchmarks/index_memory.py: measured peaks, the lines through them to full FEVER,
and the memory model ``dense.index: auto`` weighs (retrievers/dense_index.py) beside them."""

from __future__ import annotations

import numpy as np

FEVER_SENTENCES, FEVER_PAGES = 25_000_000, 5_400_000
GOAL_GB = 4.0
MB = 2**20


def line(points: list[tuple[float, float]], at: float) -> tuple[float, float]:
    """Least-squares line through ``(x, y)`` points: ``(slope, value at at)``."""
    x, y = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    if len(points) < 2:
        return 0.0, float(y[0])
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept + slope * at)


def _gb(mb: float) -> str:
    return f"{mb / 1024:.2f}"


def report(res: dict) -> str:
    lines = [
        "# Index memory: dense index kinds and the pages stage, measured and extrapolated",
        "",
        "Commands (every build or search in a child process of its own, one thread; peak RSS = the "
        "child's VmHWM):",
        "",
        *[f"    {c}" for c in res.get("commands", [])],
        "",
    ]
    if res.get("dense"):
        lines += dense_report(res["dense"])
    if res.get("pages"):
        lines += pages_report(res["pages"], res.get("shard_docs", 0))
    return "\n".join(lines)


def _private(search: dict) -> float:
    """A search's peak less the file pages it ended with (shared libraries, vectors.npy pages)."""
    return search["peak_rss_mb"] - search.get("end_mb", {}).get("RssFile", 0.0)


def dense_report(dense: dict) -> list[str]:
    from garag.config import DenseConfig
    from retrievers.dense_index import choose_index, index_memory

    config, dim = DenseConfig(), dense["dim"]
    sizes = sorted(dense["sizes"].items(), key=lambda kv: int(kv[0]))
    base = min(r["build"]["rss_mb_before"] for _, row in sizes for r in row.values())
    encoder = dense["encoder"]["peak_rss_mb"]
    lines = [
        "## Dense index kinds",
        "",
        f"Vectors: {dim}-d normalised mixtures of two of {dense['real_vectors']:,} real MiniLM vectors (the "
        "embedded FEVER + HoVer sentences): synthetic, with the size and layout of real ones, so the same "
        f"memory.  Queries: {dense['queries']} FEVER claims encoded with MiniLM; recall is against exact "
        "search over the same vectors (IVF-PQ after the retriever's exact re-scoring of k x "
        "`dense.pq_refine` = 4 candidates read from vectors.npy).  A child holds "
        f"{base:.0f} MB (Python, numpy, FAISS) before its build or search starts; MiniLM loaded and "
        f"encoding, alone, peaks at {encoder:.0f} MB.  `model`: `retrievers.dense_index.index_memory` + "
        f"those {base:.0f} MB, what `dense.index: auto` weighs.  IVF-PQ builds: training (a sample of at "
        "most 262,144 vectors) / adding, each phase's own peak.  Search end: private memory + file pages "
        "(shared libraries ~30 MB; vectors.npy is read with plain reads, so none of its pages stay).  "
        "Times: one thread on a 2-core machine shared with other jobs, only roughly comparable.",
        "",
        "| kind | vectors | build peak MB | build s | search peak MB | search end MB | model MB "
        "| index file MB | query p50 / p95 ms | recall@10 / @100 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, row in sizes:
        for kind, r in row.items():
            b, s = r["build"], r["search"]
            peak = f"{b['peak_rss_mb']:.0f}"
            if b.get("add_peak_rss_mb") and kind.startswith("ivf"):
                peak = f"{b['train_peak_rss_mb']:.0f} / {b['add_peak_rss_mb']:.0f}"
            end = s.get("end_mb")
            end_s = f"{end['RssAnon']:.0f} + {end['RssFile']:.0f}" if end else ""
            model = base + index_memory(kind, int(n), dim, config) / MB
            lines.append(
                f"| {kind} | {int(n):,} | {peak} | {b['seconds']:.0f} | {s['peak_rss_mb']:.0f} | {end_s} | "
                f"{model:.0f} | {b['index_mb']:.0f} | {s['single_query_ms_p50']:.1f} / "
                f"{s['single_query_ms_p95']:.1f} | {s['recall@10']:.3f} / {s['recall@100']:.3f} |"
            )
    lines += [
        "",
        f"To {FEVER_SENTENCES:,} vectors: a least-squares line through each phase's measured peaks (search: "
        "private memory), beside the model:",
        "",
        "| kind | phase | sizes fitted | MB per 1M vectors | line at 25M GB | model at 25M GB | under 4 GB |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for kind, phase, used, slope, value in dense_fits(dense):
        model = base + index_memory(kind, FEVER_SENTENCES, dim, config) / MB
        ok = "yes" if max(value, model) / 1024 <= GOAL_GB else "no"
        lines.append(
            f"| {kind} | {phase} | {used} | {slope * 1e6:.0f} | {_gb(value)} | {_gb(model)} | {ok} |"
        )
    flat_gb = _gb(encoder + index_memory("flat", config.flat_max, 384, config) / MB)
    pq_gb = _gb(encoder + index_memory("ivf_pq", FEVER_SENTENCES, 384, config) / MB)
    measured = dense["sizes"].get(str(config.flat_max), {}).get("flat")
    seen = f" (measured build peak + MiniLM's: {_gb(measured['build']['peak_rss_mb'] + encoder - base)} GB)"
    lines += [
        "",
        f"With MiniLM in the same process (+{encoder - base:.0f} MB), by the model: the largest flat index "
        f"`auto` builds ({config.flat_max:,} 384-d vectors) {flat_gb} GB{seen if measured else ''}; "
        f"IVF-PQ at 25M {pq_gb} GB.",
        "",
        f"What `dense.index: auto` picks with the defaults (`index_memory_gb: {config.index_memory_gb:g}`, "
        f"`flat_max: {config.flat_max:,}`, `large_index: {config.large_index}`):",
        "",
    ]
    for d in (256, 384, 768):
        gb = index_memory("ivf_pq", FEVER_SENTENCES, d, config) / 2**30
        lines.append(f"* {d}-d vectors: flat up to {switch(config, d):,}, ivf_pq above (at 25M: {gb:.2f} GB)")
    kinds = {choose_index(config, n, 384) for n in (15_365, 40_865)}
    lines += [f"* the embedded HoVer (15,365) and FEVER (40,865) corpora: {', '.join(sorted(kinds))}", ""]
    return lines


def switch(config, dim: int) -> int:  # noqa: ANN001
    """The largest corpus ``auto`` gives the flat index for ``dim``-d vectors."""
    from retrievers.dense_index import choose_index

    lo, hi = 1, FEVER_SENTENCES
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if choose_index(config, mid, dim) == "flat" else (lo, mid - 1)
    return lo


def dense_fits(dense: dict) -> list[tuple[str, str, str, float, float]]:
    """``(kind, phase, sizes used, slope MB per vector, MB at 25M)`` for every kind's phases.  IVF
    training reads a capped sample: its line is fitted where the cap holds (its slope is ~0)."""
    from retrievers.dense_index import IVF_TRAIN_MAX

    out = []
    for kind in sorted({k for row in dense["sizes"].values() for k in row}):
        rows = sorted((int(n), row[kind]) for n, row in dense["sizes"].items() if kind in row)
        phases = {"build": [(n, r["build"]["peak_rss_mb"]) for n, r in rows]}
        if kind.startswith("ivf") and all(r["build"].get("add_peak_rss_mb") for _, r in rows):
            capped = [(n, r) for n, r in rows if n > IVF_TRAIN_MAX] or rows
            phases = {
                "build: train": [(n, r["build"]["train_peak_rss_mb"]) for n, r in capped],
                "build: add": [(n, r["build"]["add_peak_rss_mb"]) for n, r in rows],
            }
        phases["search"] = [(n, _private(r["search"])) for n, r in rows]
        for phase, pts in phases.items():
            slope, value = line(pts, FEVER_SENTENCES)
            out.append((kind, phase, ", ".join(f"{n // 1000:,}k" for n, _ in pts), slope, value))
    return out


def pages_report(pages: dict, shard_docs: int) -> list[str]:
    lines = [
        "## The pages stage",
        "",
        "`PageRetriever.build` (title table + page-level BM25 + loading; the shared sentence BM25 built "
        "before, in a process of its own) over the scale corpus of benchmarks/scale_corpus.py cut at N "
        f"pages.  `bm25.shard_docs: {shard_docs:,}` sentences, so a page shard holds about as many "
        "sentences' text.  `unsharded`: the page BM25 alone, built in memory at once as before this "
        "change (`BM25Index.build` + `save`).",
        "",
        "| pages | sentences | build | peak RSS MB | seconds |",
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    for n, row in sorted(pages.items(), key=lambda kv: int(kv[0])):
        for mode, r in row.items():
            lines.append(
                f"| {int(n):,} | {r['sentences']:,} | {mode} | {r['peak_rss_mb']:.0f} | {r['seconds']:.1f} |"
            )
    lines += [
        "",
        f"To {FEVER_PAGES:,} pages: a line through the two largest sizes (a sharded build holds at most "
        "three shards' postings from its third shard on: the first, the one before and the one being "
        "tokenised, so its peak grows by shards only up to there; past it, what grows is what every "
        "page costs outside the index: the store's page table, page id -> number, and the page "
        "numbers):",
        "",
    ]
    for mode, slope, value, secs in pages_fits(pages):
        lines.append(f"* {mode}: {slope * 1e6:.0f} MB per 1M pages: {_gb(value)} GB, {secs / 3600:.2f} h")
    lines += [
        "",
        "The corpus resamples 55,947 real sentences, so its vocabulary (~52k words) does not grow with it; "
        "full FEVER's (about 2.2M words by the Heaps fit of benchmarks/results/scale-1m.md, the words of the "
        "sentence index) adds about 0.6 GB to either build (scale.md's 288 bytes a word).",
        "",
    ]
    return lines


def pages_fits(pages: dict) -> list[tuple[str, float, float, float]]:
    """``(build, slope MB per page, MB at 5.4M, seconds at 5.4M)`` through the two largest sizes."""
    out = []
    for mode in sorted({m for row in pages.values() for m in row}):
        rows = sorted((row[mode] for row in pages.values() if mode in row), key=lambda r: r["pages"])[-2:]
        slope, value = line([(r["pages"], r["peak_rss_mb"]) for r in rows], FEVER_PAGES)
        out.append((mode, slope, value, line([(r["pages"], r["seconds"]) for r in rows], FEVER_PAGES)[1]))
    return out
