"""GRAAL cold-query latency: the candidates' vectors read from the dense index against MiniLM
encoding them per query (retrievers/graal/vectors.py).

"Cold" is as in benchmarks/scale.py: a fresh, empty embedding cache when the timed claims start (so
neither the claims nor, on the encoder path, the candidates are cached; a candidate that an earlier
claim of the run encoded is cached by then), each claim searched once, with spaCy and the model
loaded before the clock starts.  Two paths per corpus, on the same claims:

* ``encoder``: no index-time vectors: MiniLM encodes the claim with every uncached candidate;
* ``vectors``: the candidates' vectors read from the dense index's ``vectors.npy`` (memory-mapped,
  by store row): MiniLM encodes the claim alone.

Corpora:

* ``--datasets fever hover``: the embedded corpora with their built dense index and graph (e.g. the
  cache ``/work/gc``), tune-part claims.  Also checks that both paths give the same hits, scores
  and provenance for every tune claim over the embedding cache the dense build filled (as in
  ``make run``, where the dense index is built before GRAAL).
* ``--synthetic N``: a resampled corpus of >= N real sentences (benchmarks/scale_corpus.py), its
  store and GRAAL graph (configs/graph.yaml), and synthetic unit vectors for its rows (no dense
  index: encoding N sentences takes ~N/124 s per core); latency only, the same FEVER tune claims.
* ``--dump FILE``: every tune claim's GRAAL hits over a copy of the warm embedding cache, as JSON,
  with nothing but the API of garag before this change, so that ``PYTHONPATH=/work/main`` gives
  the hits before it and the worktree the hits after it (compare the two files).

For benchmarks/scale.py (any size): ``cold_latency(retriever, claims, vectors, scratch)`` with a
built ``GraalRetriever`` and ``IndexVectors`` (``retriever.index_vectors()`` when a dense index was
built over the same store, else ``synthetic_vectors(path, len(store))``).

    nice -n 10 python benchmarks/graal_cold.py --datasets fever hover --cache /work/gc
    nice -n 10 python benchmarks/graal_cold.py --synthetic 200000 --workdir /tmp/garag-graal-200k
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results"
GRAPH_CONFIG = REPO / "configs" / "graph.yaml"
WARM_UP = "Barack Obama was born in Hawaii."
GOAL_MS = 50.0


def _stats(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "mean": None}
    a = np.asarray(values, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "mean": float(a.mean())}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def _embedding_cache(retriever, root: Path) -> Iterator[None]:  # noqa: ANN001 - a GraalRetriever
    """GRAAL's embedding cache swapped for one under ``root`` (the artifacts' cache is not touched)."""
    from retrievers.embeddings import EmbeddingCache

    saved = retriever.cache
    retriever.cache = EmbeddingCache(retriever.encoder, root)
    try:
        yield
    finally:
        retriever.cache.close()
        retriever.cache = saved


def synthetic_vectors(  # noqa: ANN201
    path: Path, n: int, dim: int = 384, dtype: str = "float32", seed: int = 0, chunk: int = 65_536
):
    """Random unit vectors for ``n`` store rows, written to ``path`` (``.npy``, float32 as the dense
    index stores them, or float16: half the disk) chunk by chunk, as ``IndexVectors``:
    for timing a corpus that has no dense index (the ranking they give means nothing)."""
    from retrievers.graal.vectors import IndexVectors

    path = Path(path)
    try:
        old = IndexVectors.open(path)
    except (OSError, ValueError):
        old = None
    if old is None or old.shape != (n, dim) or np.dtype(old.dtype) != np.dtype(dtype):
        rng = np.random.default_rng(seed)
        out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, dim))
        for i in range(0, n, chunk):
            block = rng.standard_normal((min(chunk, n - i), dim), dtype=np.float32)
            out[i : i + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
        out.flush()
        del out
    return IndexVectors.open(path)


def _evict(vectors) -> None:  # noqa: ANN001 - IndexVectors
    """Drop the vectors' file from the OS page cache (the kernel keeps the pages a process maps)."""
    fd = os.open(vectors.path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_latency(vectors, trials: int = 40, seed: int = 0) -> dict:  # noqa: ANN001 - IndexVectors
    """``IndexVectors.rows`` alone for runs of 5 consecutive rows at random places (a candidate page's
    sentences): read from disk (the file evicted first) one run after another (a ``rows`` call per
    run), and all at once (one call: the runs asked for together first), and page-cached; ms
    p50/p95/mean per read, by number of runs."""
    rng = np.random.default_rng(seed)
    out = {}
    for n_runs in (3, 10, 30):
        times: dict[str, list[float]] = {"disk": [], "disk_prefetched": [], "page_cached": []}
        for _ in range(trials):
            runs = [np.arange(s, s + 5) for s in rng.integers(0, len(vectors) - 5, n_runs)]
            for key in times:
                if key != "page_cached":
                    _evict(vectors)
                t = time.perf_counter()
                if key == "disk":
                    for run in runs:
                        vectors.rows(run)
                else:
                    vectors.rows(np.concatenate(runs))
                times[key].append((time.perf_counter() - t) * 1000)
        out[f"{n_runs} runs of 5 rows"] = {k: _stats(v) for k, v in times.items()}
    return out


def cold_latency(retriever, claims: list[str], vectors, scratch: Path, from_disk: bool = False) -> dict:  # noqa: ANN001
    """Cold GRAAL queries (module docstring) on the ``encoder`` and the ``vectors`` path.

    Args:
        retriever: a built ``GraalRetriever``; its own cache and vectors are restored afterwards.
        claims: the claims timed, each once per path.
        vectors: ``IndexVectors`` by store row for the ``vectors`` path (``source`` its ``.npy`` file
            for ``from_disk``).
        scratch: a directory for the fresh embedding caches.
        from_disk: also the path ``vectors_from_disk``: before each claim the vectors' file leaves
            the OS page cache (``_evict``), so the candidates' rows are read from disk, as when
            the vectors of a corpus far larger than memory are rarely read.

    Returns:
        Per path: p50/p95/mean ms of ``link``, ``graph``, ``rank``, ``total`` and ``cpu`` (this
        process's CPU time), candidates per claim, ``texts_encoded`` (claims + candidates MiniLM
        encoded) and ``over_goal`` (claims > 50 ms).
    """
    import torch

    saved = retriever.index_vectors()
    retriever.encoder.encode(["warm up"])  # the model loads before the clock starts
    config = retriever.config
    retriever.config = config.model_copy(update={"dense_weight": 0.0})
    retriever.search(WARM_UP)  # spaCy loads, the databases open
    retriever.config = config
    out: dict = {"claims": len(claims), "torch_threads": torch.get_num_threads(), "load": os.getloadavg()[0]}
    try:
        for mode in ("encoder", "vectors") + (("vectors_from_disk",) if from_disk else ()):
            retriever.use_vectors(None if mode == "encoder" else vectors)
            with _embedding_cache(retriever, scratch / mode):
                before = retriever.encoder.texts_encoded
                rows = []
                for claim in claims:
                    if mode == "vectors_from_disk":
                        _evict(vectors)
                    retriever.clear_query_cache()
                    t, cpu = time.perf_counter(), time.process_time()
                    result = retriever.search(claim)
                    total = (time.perf_counter() - t) * 1000
                    cpu = (time.process_time() - cpu) * 1000
                    rows.append(
                        {
                            **{k: v * 1000 for k, v in result.seconds.items()},
                            "total": total,
                            "cpu": cpu,
                            "candidates": len(result.hits),
                        }
                    )
                encoded = retriever.encoder.texts_encoded - before
            out[mode] = {
                k: _stats([r[k] for r in rows])
                for k in ("link", "graph", "rank", "total", "cpu", "candidates")
            }
            out[mode]["texts_encoded"] = encoded
            out[mode]["over_goal"] = sum(r["total"] > GOAL_MS for r in rows)
    finally:
        retriever.use_vectors(saved)
        retriever.clear_query_cache()
    return out


def _hits(result) -> list:  # noqa: ANN001 - a GraalResult
    return [
        [h.hit.sentence.page, h.hit.sentence.line, h.hit.score, [p.reason for p in h.provenance]]
        for h in result.hits
    ]


def same_ranking(retriever, claims: list[str], vectors, warm: Path, scratch: Path) -> dict:  # noqa: ANN001
    """Both paths over a copy of the embedding cache ``warm`` that the dense build filled: the
    encoder path first (it encodes each claim alone, as the candidates are cached), then the
    vectors path; how many claims get the same hits, scores and provenance."""
    root = scratch / "same"
    shutil.copytree(warm, root / warm.name)
    saved = retriever.index_vectors()
    try:
        with _embedding_cache(retriever, root):
            found = {}
            for mode in ("encoder", "vectors"):
                retriever.use_vectors(None if mode == "encoder" else vectors)
                before = retriever.encoder.texts_encoded
                found[mode] = [_hits(retriever.search(c)) for c in claims]
                found[f"{mode}_encoded"] = retriever.encoder.texts_encoded - before
    finally:
        retriever.use_vectors(saved)
    pairs = list(zip(found["encoder"], found["vectors"], strict=True))
    return {
        "claims": len(claims),
        "identical": sum(a == b for a, b in pairs),
        "with_hits": sum(bool(a) for a, _ in pairs),
        "hits_compared": sum(len(a) for a, _ in pairs),
        "encoder_path_texts_encoded": found["encoder_encoded"],
        "vectors_path_texts_encoded": found["vectors_encoded"],
    }


# -- corpora ------------------------------------------------------------------------------------------


def _pipeline(dataset: str, cache: Path):  # noqa: ANN202
    """configs/graph.yaml's dense index and GRAAL graph over an embedded corpus (built or reused)."""
    from garag.config import load_config
    from pipeline.retrieval import RetrievalPipeline

    overrides = [
        f"data.dataset={dataset}",
        "data.part=tune",
        f"paths.cache_dir={cache}",
        "retrieval.retrievers=[dense,graal]",
    ]
    pipe = RetrievalPipeline(load_config(GRAPH_CONFIG, overrides), progress=False)
    pipe.build()
    return pipe


def _warm_cache(pipe) -> Path:  # noqa: ANN001
    return Path(pipe.config.paths.cache_dir) / f"embeddings-{pipe.retrievers['graal'].encoder.identity}"


def run_dataset(dataset: str, cache: Path, n_claims: int, scratch: Path, from_disk: bool = False) -> dict:
    pipe = _pipeline(dataset, cache)
    graal = pipe.retrievers["graal"]
    t = time.perf_counter()
    vectors = graal.index_vectors()
    find_s = time.perf_counter() - t
    if vectors is None:
        raise SystemExit(f"{dataset}: no dense index matching GRAAL's encoder under {cache}")
    claims = [c.text for c in pipe.dataset.claims()]
    timed = claims[:n_claims] if n_claims else claims
    same = same_ranking(graal, claims, vectors, _warm_cache(pipe), scratch)
    return {
        "corpus": dataset,
        "sentences": len(pipe.store),
        "vectors": vectors.source,
        "find_vectors_ms": find_s * 1000,
        "same_ranking": same,
        "cold": cold_latency(graal, timed, vectors, scratch, from_disk),
        "peak_rss_mb": _peak_mb(),
    }


def run_synthetic(
    n: int, work: Path, n_claims: int, workers: int, scratch: Path, from_disk: bool = False
) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scale_corpus import write_corpus

    from garag.config import load_config
    from garag.datasets import get_dataset
    from garag.store import SentenceStore, build_store
    from retrievers.base import IndexContext
    from retrievers.graal.retriever import GraalRetriever

    work.mkdir(parents=True, exist_ok=True)
    stamp = json.dumps({"sentences": n, "seed": 20240601})
    built: dict = {}
    if not (work / "store.db").is_file() or (work / "params.json").read_text(encoding="utf-8") != stamp:
        t = time.perf_counter()
        write_corpus(work / "corpus.jsonl", n, 20240601)
        (work / "store.db").unlink(missing_ok=True)
        build_store(work / "corpus.jsonl", work / "store.db", progress=False)
        (work / "params.json").write_text(stamp, encoding="utf-8")
        built["corpus_and_store_seconds"] = time.perf_counter() - t
    cfg = load_config(GRAPH_CONFIG, [f"graal.workers={workers}"])
    store = SentenceStore(work / "store.db")
    ctx = IndexContext(store, work / "cache", f"graal-cold:{stamp}", progress=False)
    graal = GraalRetriever(cfg.graal, cfg.dense, ctx)
    t = time.perf_counter()
    graal.build()
    built["graph_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    vectors = synthetic_vectors(work / "vectors.npy", len(store))
    built["vectors_seconds"] = time.perf_counter() - t
    claims = [c.text for c in get_dataset("fever", part="tune").claims()][:n_claims]
    return {
        "corpus": f"synthetic {len(store):,} sentences (scale_corpus.py, seed 20240601)",
        "sentences": len(store),
        "vectors": f"{vectors.source} (random unit vectors: latency only)",
        "built": built,
        "cold": cold_latency(graal, claims, vectors, scratch, from_disk),
        **({"reading_rows": read_latency(vectors)} if from_disk else {}),
        "peak_rss_mb": _peak_mb(),
    }


def dump(dataset: str, cache: Path, out: Path, scratch: Path) -> None:
    """Every tune claim's GRAAL hits over a copy of the warm embedding cache (module docstring)."""
    pipe = _pipeline(dataset, cache)
    graal = pipe.retrievers["graal"]
    warm = _warm_cache(pipe)
    shutil.copytree(warm, scratch / "dump" / warm.name)
    with _embedding_cache(graal, scratch / "dump"):
        hits = {c.text: _hits(graal.search(c.text)) for c in pipe.dataset.claims()}
    out.write_text(json.dumps(hits) + "\n", encoding="utf-8")
    vectors = graal.index_vectors() if hasattr(graal, "index_vectors") else None  # none before the change
    n_hits = sum(map(len, hits.values()))
    print(f"{out}: {len(hits)} claims, {n_hits} hits; vectors: {vectors and vectors.source}")


# -- report -------------------------------------------------------------------------------------------


def _ms(s: dict) -> str:
    return f"{s['p50']:.1f} / {s['p95']:.1f} / {s['mean']:.1f}"


def report(results: dict) -> str:
    commands = "; ".join(sorted({f"`{r['command']}`" for r in results.values()}))
    md = [
        "# GRAAL cold queries: index-time vectors against encoding the candidates",
        "",
        f"Commands: {commands}",
        "",
        "ms p50 / p95 / mean per claim; cold = a fresh embedding cache when the claims start (each "
        "claim searched once; benchmarks/graal_cold.py says more). `encoder`: MiniLM encodes the claim "
        "and its uncached candidates; `vectors`: candidates' vectors read from the dense index's "
        "vectors.npy by store row, MiniLM encodes the claim alone; `vectors_from_disk`: the same, the "
        "vectors' file dropped from the OS page cache before each claim (its rows read from disk). "
        "CPU: this process's CPU time per "
        "claim (the 2 cores are shared, so wall time includes waiting for one: the 1-minute load "
        "average at the start is given).",
        "",
    ]
    for key, r in results.items():
        c = r["cold"]
        md += [
            f"## {key}: {r['corpus']}, {r['sentences']:,} sentences",
            "",
            f"{c['claims']} tune claims, {c['torch_threads']} torch thread(s), load {c['load']:.1f}, "
            f"peak RSS {r['peak_rss_mb']:.0f} MB; vectors: `{r['vectors']}`",
            "",
            "| path | total | CPU | rank | graph | link | candidates | texts encoded | claims > 50 ms |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for mode in ("encoder", "vectors", "vectors_from_disk"):
            if mode not in c:
                continue
            m = c[mode]
            cells = [_ms(m[k]) for k in ("total", "cpu", "rank", "graph", "link")]
            n = m["candidates"]
            cells.append(f"{n['p50']:.0f} / {n['p95']:.0f} / {n['mean']:.0f}")
            md.append(f"| {mode} | {' | '.join(cells)} | {m['texts_encoded']} | {m['over_goal']} |")
        v, e = c["vectors"]["total"], c["encoder"]["total"]
        verdict = "met" if v["p95"] <= GOAL_MS else f"missed by {v['p95'] - GOAL_MS:.1f} ms"
        speedup = f"p50 {e['p50'] / v['p50']:.1f}x and p95 {e['p95'] / v['p95']:.1f}x"
        md += [
            "",
            f"Goal {GOAL_MS:.0f} ms per cold query (p95): vectors path {verdict}; {speedup} faster than "
            "the encoder path.",
        ]
        if "same_ranking" in r:
            s = r["same_ranking"]
            md += [
                "",
                f"Same ranking over the dense build's embedding cache: {s['identical']} of "
                f"{s['claims']} tune claims with identical hits, scores and provenance "
                f"({s['hits_compared']:,} hits; {s['with_hits']} claims link an entity); texts encoded: "
                f"encoder path {s['encoder_path_texts_encoded']}, vectors path "
                f"{s['vectors_path_texts_encoded']}.",
            ]
        if "reading_rows" in r:
            md += [
                "",
                "Reading rows (`IndexVectors.rows` alone, ms p50 / p95 / mean, 40 reads each): "
                "from disk one run after another and all runs at once (asked for together first: "
                "`POSIX_FADV_WILLNEED`), and page-cached",
                "",
                "| rows read | from disk | from disk, prefetched | page-cached |",
                "|---|---|---|---|",
            ]
            for label, t in r["reading_rows"].items():
                cells = " | ".join(_ms(t[k]) for k in ("disk", "disk_prefetched", "page_cached"))
                md.append(f"| {label} | {cells} |")
        if "built" in r:
            built = json.dumps({k: round(v, 1) for k, v in r["built"].items()})
            md += [
                "",
                f"Built or reopened (what --workdir holds is reused): {built} (seconds).",
            ]
        md.append("")
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=[], choices=("fever", "hover"))
    ap.add_argument(
        "--cache", type=Path, default=Path("/work/gc"), help="artifact root with the built indexes"
    )
    ap.add_argument("--claims", type=int, default=0, help="tune claims timed per corpus (0 = all)")
    ap.add_argument("--synthetic", type=int, default=0, help="also a synthetic corpus of >= N sentences")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/garag-graal-cold"))
    ap.add_argument("--workers", type=int, default=2, help="graph build processes (synthetic corpus)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument(
        "--from-disk", action="store_true", help="also time the vectors read from disk (not page-cached)"
    )
    ap.add_argument("--dump", type=Path, help="write one dataset's tune hits to this file and stop")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="graal-cold-") as tmp:
        if args.dump:
            dump((args.datasets or ["fever"])[0], args.cache, args.dump, Path(tmp))
            return 0
        command = "python benchmarks/graal_cold.py " + " ".join(argv)
        results = {}
        for d in args.datasets:
            r = run_dataset(d, args.cache, args.claims, Path(tmp) / d, args.from_disk)
            results[d] = {**r, "command": command}
        if args.synthetic:
            key = f"synthetic-{args.synthetic}"
            scratch = Path(tmp) / key
            n = args.claims or 300
            r = run_synthetic(args.synthetic, args.workdir, n, args.workers, scratch, args.from_disk)
            results[key] = {**r, "command": command}
    path = args.out / "graal_cold.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    merged = {**old, **results}
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    text = report(merged)
    (args.out / "graal_cold.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
