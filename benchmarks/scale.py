"""Scale benchmark: the whole index (store, BM25, dense, GRAAL graph) at 1M sentences, its query
latency, and a projection for full FEVER (25M sentences, 5.4M pages) on 1 x 2, 1 x 16 and 4 x 16 cores.

Parts (``--parts``); each runs in its own process, so that its peak RSS is its own:

* corpus: >= N sentences of real page text, resampled and re-titled (benchmarks/scale_corpus.py;
  its docstring says what the re-titling does to linking ambiguity).  Run when a later part needs it.
* store: ``garag.store.build_store`` on that corpus.
* graph: the GRAAL corpus graph over that store as ``garag index`` builds it (``GraalRetriever.build``
  with configs/graph.yaml: parse=tagger, disambiguation=words): ``--workers`` processes parse, link and
  write page partitions that the driver merges.
* pages: the page tables every graph worker holds (page ids, numbers, alias table) built for full
  FEVER's 5.4M pages with distinct titles (needs the store), for the memory projection.
* graal: GRAAL query latency for real FEVER claims on that graph: linking, path search and candidate
  collection without the encoder, then the MiniLM re-ranking with a cold and a warm embedding cache.
* bm25, faiss: over recombined sentences (the first half of one real sentence and the second half of
  another, seeded, streamed into the builder).  Dense vectors for 1M sentences would take ~100 minutes
  to encode on this 2-core CPU, so the FAISS part encodes a real sample with the offline MiniLM and
  makes the rest normalised mixtures of two real embeddings (same dimension and norm, a realistic
  spread); the encoder's throughput is measured on its own (per core from CPU time; on a GPU only
  when one is present).  BM25 is built in shards of ``--bm25-shard-docs`` sentences at N and at N/2
  (the growth per sentence), and its vocabulary's growth is fitted on the real sentences (Heaps).

``--workdir DIR`` keeps the corpus, store and graph for later runs (a part reuses what an earlier
one built with the same ``--sentences``/``--seed``/``--titles``/``--base-pages``); results are merged into
``<out>/scale.json`` (parts measured at another size are dropped) and ``<out>/scale.md`` is written
from it, with the projection method.

    python benchmarks/scale.py [--sentences 1000000] [--parts store,graph,graal,pages,bm25,faiss] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from scale_corpus import FEVER_PAGES, TITLES, copy_id, fit_exponents, projection, report, write_corpus

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results"
SEED = 20240601
PARTS = (
    "store",
    "graph",
    "dense",
    "dense_query",
    "graal",
    "pages",
    "bm25",
    "bm25_add",
    "page_index",
    "faiss_dims",
    "faiss",
)
CHAIN = ("corpus", "store", "graph", "graal")  # each needs the one before it
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mb() -> float:
    """Resident memory now (not the peak)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _cpu(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _stats(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "mean": None}
    a = np.asarray(values)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "mean": float(a.mean())}


def _base_sentences() -> list[str]:
    from garag.datasets import fever
    from garag.text import detokenize
    from garag.wiki import iter_pages

    return [detokenize(t) for p in iter_pages(fever().corpus_path) for _, t, _ in p.sentences()]


def generate(n: int, base: list[str], seed: int = SEED) -> Iterator[str]:
    """``n`` synthetic sentences: halves of two random real sentences, joined."""
    rng = random.Random(seed)
    split = [s.split() for s in base]
    for _ in range(n):
        a, b = split[rng.randrange(len(split))], split[rng.randrange(len(split))]
        yield " ".join(a[: max(1, len(a) // 2)] + b[len(b) // 2 :])


def _queries(n: int) -> list[str]:
    from garag.datasets import fever

    return [c.text for c in fever().claims()][:n]


# -- the whole index over the generated corpus ------------------------------------------------------


def part_corpus(args: argparse.Namespace, work: Path) -> dict:
    counts = write_corpus(
        work / "corpus.jsonl", args.sentences, args.seed, args.titles, limit=args.base_pages
    )
    return {**counts, "peak_rss_mb": _peak_mb()}


def part_store(args: argparse.Namespace, work: Path) -> dict:
    from garag.store import build_store

    db, tmp = work / "store.db", work / "store.db.partial"
    db.unlink(missing_ok=True)  # a killed build leaves only the .partial file: no half store reused
    tmp.unlink(missing_ok=True)
    before, cpu, t = _peak_mb(), _cpu(), time.perf_counter()
    counts = build_store(work / "corpus.jsonl", tmp, progress=False)
    wall = time.perf_counter() - t
    tmp.replace(db)
    return {
        "sentences": counts["sentences"],
        "pages": counts["pages"],
        "seconds": wall,
        "cpu_seconds": _cpu() - cpu,
        "sentences_per_second": counts["sentences"] / wall,
        "peak_rss_mb_before": before,
        "peak_rss_mb": _peak_mb(),
        "db_mb": db.stat().st_size / 2**20,
    }


def _graal(args: argparse.Namespace, work: Path, overrides: list[str]) -> tuple:
    """GRAAL of configs/graph.yaml with ``dense.model = --dense-model`` (the encoder is part of the
    graph's artifact hash, so the graph and graal parts must agree; the graph build itself, with
    ``disambiguation: words``, encodes nothing)."""
    from garag.config import load_config
    from garag.store import SentenceStore
    from retrievers.base import IndexContext
    from retrievers.graal.retriever import GraalRetriever

    cfg = load_config(REPO / "configs" / "graph.yaml", [f"dense.model={args.dense_model}", *overrides])
    stamp = (work / "params.json").read_text(encoding="utf-8")
    ctx = IndexContext(SentenceStore(work / "store.db"), work / "cache", f"scale:{stamp}", progress=False)
    return GraalRetriever(cfg.graal, cfg.dense, ctx), cfg


def part_graph(args: argparse.Namespace, work: Path) -> dict:
    retriever, cfg = _graal(args, work, [f"graal.workers={args.workers}"])
    store = retriever.ctx.store  # counted in SQL: its page index is not what a build holds
    n, pages = len(store), store.con.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
    from retrievers.graal.linker import word_vectors

    word_vectors(["warm up"])  # imports spaCy's stop words: fixed memory, counted before the build
    from retrievers.graal.graph_store import GraphStore

    registered: list[float] = []  # the driver's memory for its page tables, as the build makes them
    register = GraphStore.register

    def measured_register(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        rss = _rss_mb()
        out = register(self, *a, **k)
        registered.append(_rss_mb() - rss)
        return out

    GraphStore.register = measured_register
    before, t = _peak_mb(), time.perf_counter()
    cpu_self, cpu_children = _cpu(), _cpu(resource.RUSAGE_CHILDREN)
    path = retriever.build(force=True)  # as `garag index` builds it, spaCy loads included
    wall = time.perf_counter() - t
    parent, workers = _cpu() - cpu_self, _cpu(resource.RUSAGE_CHILDREN) - cpu_children
    peak_parent = _peak_mb()  # before the page tables are opened again below to measure them
    stats = json.loads((path / "meta.json").read_text(encoding="utf-8"))["graph"]
    if args.workers == 1:  # parsing ran in this process: split its CPU time by the builder's stage clock
        workers = (
            parent
            * stats["parse_seconds"]
            / (stats["parse_seconds"] + stats["link_seconds"] + stats["write_seconds"])
        )
        parent -= workers
    con = sqlite3.connect(path / "graph.db")
    q = "SELECT COUNT(*) FROM entity_stats WHERE n_mentions > ?"
    hubs = con.execute(q, (cfg.graal.hub_max_mentions,)).fetchone()[0]
    con.close()
    GraphStore.register = register
    rss = _rss_mb()
    tables = GraphStore(path / "graph.db", readonly=True)  # what every worker and the driver hold
    tables_mb = _rss_mb() - rss
    del tables
    (work / "graph.json").write_text(json.dumps({"artifact": str(path)}), encoding="utf-8")
    return {
        "sentences": n,
        "pages": pages,
        "workers": args.workers,
        "settings": {"parse": cfg.graal.parse, "disambiguation": cfg.graal.disambiguation},
        "seconds": wall,
        "sentences_per_second": n / wall,
        "parent_cpu_seconds": parent,
        "workers_cpu_seconds": workers,
        "sentences_per_cpu_second": n / (parent + workers),
        "parse_sentences_per_core_second": n / workers,
        "serial_sentences_per_core_second": n / parent,
        "cores_busy": (parent + workers) / wall,
        "stage_seconds": {k: stats[f"{k}_seconds"] for k in ("parse", "link", "write", "merge")},
        "page_tables_mb": tables_mb,
        "driver_register_mb": sum(registered),
        "mentions": stats["mentions"],
        "edges": stats["edges"],
        "hub_entities": hubs,
        "peak_rss_mb_before": before,
        "peak_rss_mb_parent": peak_parent,
        "peak_rss_mb_worker": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if args.workers > 1
        else None,
        "graph_db_mb": (path / "graph.db").stat().st_size / 2**20,
    }


def _graph_half(args: argparse.Namespace, work: Path) -> dict:
    """The graph part at half the sentences (its own corpus, store and graph under ``work/half``),
    for the driver's memory growth between two sizes."""
    half = work / "half"
    cmd = [sys.executable, __file__, "--sentences", str(args.sentences // 2), "--parts", "graph"]
    cmd += ["--workers", str(args.workers), "--seed", str(args.seed), "--titles", args.titles]
    cmd += ["--base-pages", str(args.base_pages), "--workdir", str(half), "--out", str(half / "out")]
    cmd += ["--dense-model", args.dense_model]
    print(f"scale: graph at {args.sentences // 2:,} sentences ...", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr[-5000:])
        raise SystemExit(f"scale: graph at half size failed (exit {done.returncode})")
    graph = json.loads((half / "out" / "scale.json").read_text(encoding="utf-8"))["parts"]["graph"]
    return {k: v for k, v in graph.items() if k not in ("params", "command")}


def part_pages(args: argparse.Namespace, work: Path) -> dict:
    """The page tables a graph worker holds (page ids, their numbers, the alias table), built for
    full FEVER's page count from the corpus's real page ids plus ``unique`` copies (every copy
    has alias keys of its own, as distinct Wikipedia titles do)."""
    from retrievers.graal.aliases import AliasTable

    con = sqlite3.connect(work / "store.db")
    base = [p for (p,) in con.execute("SELECT page FROM pages ORDER BY page_idx") if "copy_" not in p]
    con.close()
    rss, t = _rss_mb(), time.perf_counter()
    names: list[str] = list(base)
    k = 1
    while len(names) < FEVER_PAGES:
        names.extend(copy_id(p, k, "unique") for p in base[: FEVER_PAGES - len(names)])
        k += 1
    index = {p: i for i, p in enumerate(names)}
    aliases = AliasTable.from_pages(names)
    return {
        "pages": len(names),
        "alias_keys": len(aliases),
        "seconds": time.perf_counter() - t,
        "page_tables_mb": _rss_mb() - rss,
        "index_entries": len(index),
    }


def part_graal(args: argparse.Namespace, work: Path) -> dict:
    import torch

    for d in (work / "cache").glob("embeddings-*"):
        shutil.rmtree(d)  # a cold embedding cache
    retriever, cfg = _graal(args, work, [])
    t = time.perf_counter()
    retriever.build()  # reuses the graph part's artifact
    open_s = time.perf_counter() - t
    claims = _queries(args.queries)
    rerank = claims[: args.rerank_queries]

    def timed(claim: str) -> dict:
        retriever.clear_query_cache()  # a search, not the look-up of an earlier claim's result
        t0 = time.perf_counter()
        r = retriever.search(claim)
        ms = {k: v * 1000 for k, v in r.seconds.items()}
        ms["total"] = (time.perf_counter() - t0) * 1000
        return {**ms, "candidates": len(r.hits), "entities": len(r.mentions)}

    def summary(rows: list[dict]) -> dict:
        keys = ("link", "graph", "rank", "total", "candidates", "entities")
        out = {k: _stats([r[k] for r in rows]) for k in keys}
        out["graph_part"] = _stats([r["link"] + r["graph"] for r in rows])
        out["claims"] = len(rows)
        out["no_entity"] = sum(r["entities"] == 0 for r in rows)
        return out

    retriever.config = cfg.graal.model_copy(update={"dense_weight": 0.0})  # no encoder: the graph alone
    retriever.search("Barack Obama was born in Hawaii.")  # loads spaCy and opens the databases
    graph_only = summary([timed(c) for c in claims])
    retriever.config = cfg.graal
    retriever.encoder.encode(["warm up"])  # the model loads before the clock starts
    encoded = retriever.encoder.texts_encoded
    cold = summary([timed(c) for c in rerank])
    encoded = retriever.encoder.texts_encoded - encoded
    warm = summary([timed(c) for c in rerank])
    paths, vectors = None, retriever.index_vectors()
    if vectors is not None:  # the dense part's vectors.npy: GRAAL's cold queries read its rows
        from graal_cold import cold_latency

        paths = cold_latency(retriever, rerank, vectors, work / "graal-cold", from_disk=True)
        paths["dense_model"] = args.dense_model
    return {
        "sentences": len(retriever.ctx.store),
        "open_seconds": open_s,
        "cold_paths": paths,
        "torch_threads": torch.get_num_threads(),
        "graph_only": graph_only,
        "rerank_cold": cold,
        "rerank_warm": warm,
        "rerank_sentences_encoded": encoded,
        "peak_rss_mb": _peak_mb(),
    }


# -- the dense retriever over the store, as `garag index` builds and the retriever searches it ------


def _dense(args: argparse.Namespace, work: Path) -> tuple:
    """The dense retriever of configs/graph.yaml with ``dense.model = --dense-model`` over the
    store (``dense.index: auto``, the default), in the cache GRAAL's part reads its vectors from."""
    from garag.config import load_config
    from garag.store import SentenceStore
    from retrievers.base import IndexContext
    from retrievers.dense import FaissDenseRetriever

    cfg = load_config(REPO / "configs" / "graph.yaml", [f"dense.model={args.dense_model}"])
    stamp = (work / "params.json").read_text(encoding="utf-8")
    ctx = IndexContext(SentenceStore(work / "store.db"), work / "cache", f"scale:{stamp}", progress=False)
    return FaissDenseRetriever(cfg.dense, ctx), cfg


def part_dense(args: argparse.Namespace, work: Path) -> dict:
    """``FaissDenseRetriever.build`` over every sentence of the store: encoding into the embedding
    cache and ``vectors.npy``, then the index ``auto`` picks, built from that file; each phase's
    wall and CPU seconds and the process's peak RSS before the index phase and at the end."""
    import retrievers.dense as dense_mod

    for d in (work / "cache").glob("embeddings-*"):
        shutil.rmtree(d)  # every sentence encoded, none read from an earlier run's cache
    retriever, _ = _dense(args, work)
    retriever.encoder.encode(["warm up"])  # the model loads before the clock starts
    phases: dict = {}

    def timed_build(vectors, settings):  # noqa: ANN001, ANN202 - encoding ends where the index starts
        phases["encode_end"] = (time.perf_counter(), _cpu(), _peak_mb())
        index, phases["index"] = _timed_build(vectors, settings)
        return index

    dense_mod.build_index = timed_build
    before, t, cpu = _peak_mb(), time.perf_counter(), _cpu()
    path = retriever.build(force=True)
    wall, cpu_all = time.perf_counter() - t, _cpu() - cpu
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    t1, cpu1, peak_encode = phases["encode_end"]
    built = phases["index"]
    n = len(retriever.ctx.store)
    (work / "dense.json").write_text(json.dumps({"artifact": str(path)}), encoding="utf-8")
    return {
        "sentences": n,
        "model": args.dense_model,
        "dim": meta["dim"],
        "index": meta["index_type"],
        "settings": {k: v for k, v in retriever.settings().items() if k != "model_identity"},
        "seconds": wall,
        "cpu_seconds": cpu_all,
        "encode_seconds": t1 - t,
        "encode_cpu_seconds": cpu1 - cpu,
        "encode_sentences_per_core_second": n / (cpu1 - cpu),
        "index_seconds": built["train_seconds"] + built["add_seconds"],
        "index_cpu_seconds": built["train_cpu_seconds"] + built["add_cpu_seconds"],
        **built,
        "faiss_threads": __import__("faiss").omp_get_max_threads(),
        "peak_rss_mb_before": before,
        "peak_rss_mb_encode": peak_encode,
        "peak_rss_mb": _peak_mb(),
        "index_mb": (path / "index.faiss").stat().st_size / 2**20,
        "vectors_mb": (path / "vectors.npy").stat().st_size / 2**20,
        "embedding_cache_mb": sum(
            f.stat().st_size
            for d in (work / "cache").glob("embeddings-*")
            for f in d.rglob("*")
            if f.is_file()
        )
        / 2**20,
    }


def part_dense_query(args: argparse.Namespace, work: Path) -> dict:
    """The dense part's index searched as the retriever searches it (IVF-PQ's candidates re-scored
    exactly from vectors.npy): one claim at a time and batched, and its recall@10/@100 against
    exact search over the same real-text vectors (brute force over vectors.npy in blocks)."""
    from retrievers.dense_index import VectorFile

    retriever, _ = _dense(args, work)
    t = time.perf_counter()
    retriever.build()  # loads the dense part's artifact
    open_s = time.perf_counter() - t
    claims = _queries(args.queries)
    retriever.encode_queries(claims[:4])  # the model loads before the clock starts
    retriever.clear_query_cache()
    t = time.perf_counter()
    q = retriever.encode_queries(claims)
    encode_ms = (time.perf_counter() - t) * 1000 / len(claims)
    one, got = _one_at_a_time(retriever, q)
    t = time.perf_counter()
    retriever.search(q, 100)
    batched_qps = len(claims) / (time.perf_counter() - t)
    search_peak = _peak_mb()
    vectors = VectorFile(retriever.path / "vectors.npy")
    t = time.perf_counter()
    best_r = _exact_top(q, vectors, 100)
    exact_s = time.perf_counter() - t
    nprobe = getattr(retriever._index, "nprobe", None)  # dense.ivf_nprobe as the retriever set it
    sweep = _nprobe_sweep(args, retriever, vectors) if args.nprobe and nprobe else []
    return {
        "nprobe": nprobe,
        "nprobe_sweep": sweep,
        "sentences": vectors.shape[0],
        "index": retriever.meta["index_type"],
        "queries": len(claims),
        "open_seconds": open_s,
        "query_encode_ms": encode_ms,
        "search_top100_ms": _stats(one),
        "batched_queries_per_second": batched_qps,
        "recall_at_10": _overlap(got[:, :10], best_r[:, :10]),
        "recall_at_100": _overlap(got, best_r),
        "exact_search_seconds": exact_s,
        "peak_rss_mb_search": search_peak,
        "peak_rss_mb": _peak_mb(),
    }


def _one_at_a_time(retriever: object, q: np.ndarray) -> tuple[list[float], np.ndarray]:
    """Each query's top-100 searched alone: the milliseconds of each search and the rows found."""
    ms, rows = [], []
    for i in range(len(q)):
        t = time.perf_counter()
        _, r = retriever.search(q[i : i + 1], 100)
        ms.append((time.perf_counter() - t) * 1000)
        rows.append(r[0])
    return ms, np.stack(rows)


def _exact_top(q: np.ndarray, vectors: object, k: int) -> np.ndarray:
    """The rows of the ``k`` best inner products of each query, by brute force over ``vectors``."""
    from retrievers.dense_index import ADD_CHUNK

    best_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    best_r = np.zeros((len(q), k), dtype=np.int64)
    for start in range(0, vectors.shape[0], ADD_CHUNK * 4):
        sims = q @ vectors.read(start, min(vectors.shape[0], start + ADD_CHUNK * 4)).T
        top = np.argpartition(-sims, min(k, sims.shape[1] - 1), axis=1)[:, :k]
        cand_s = np.concatenate([best_s, np.take_along_axis(sims, top, 1)], axis=1)
        cand_r = np.concatenate([best_r, top + start], axis=1)
        keep = np.argsort(-cand_s, axis=1, kind="stable")[:, :k]
        best_s, best_r = np.take_along_axis(cand_s, keep, 1), np.take_along_axis(cand_r, keep, 1)
    return best_r


def _nprobe_sweep(args: argparse.Namespace, retriever: object, vectors: object) -> list[dict]:
    """``dense.ivf_nprobe`` values (``--nprobe``) on the FEVER tune part's claims, for choosing it:
    the retriever's top-100 latency one claim at a time and recall@10/@100 against exact search."""
    from garag.datasets import get_dataset

    claims = [c.text for c in get_dataset("fever", part="tune").claims()][: args.queries]
    q = retriever.encode_queries(claims)
    truth = _exact_top(q, vectors, 100)
    out = []
    for nprobe in (int(x) for x in args.nprobe.split(",")):
        retriever._index.nprobe = nprobe
        retriever.search(q[:4], 100)
        one, got = _one_at_a_time(retriever, q)
        out.append({"nprobe": nprobe, "claims": len(claims), "search_top100_ms": _stats(one),
                    "recall_at_10": _overlap(got[:, :10], truth[:, :10]),
                    "recall_at_100": _overlap(got, truth)})  # fmt: skip
    return out


# -- BM25 and FAISS over recombined sentences ---------------------------------------------------------


class _TimedTokenise:
    """Times ``retrievers.bm25.tokenise_shard`` while active: the shards (their text preparation
    too), which ``bm25.workers`` processes or Ray's tokenisers share out (one process here); the
    rest of a build (the store read, the renumbering, the merge, the weighting) is serial."""

    def __enter__(self) -> _TimedTokenise:
        import retrievers.bm25 as bm25_mod

        self.module, self.tokenise, self.wall, self.cpu = bm25_mod, bm25_mod.tokenise_shard, 0.0, 0.0

        def timed(*a, **k):  # noqa: ANN002, ANN003, ANN202
            t0, c0 = time.perf_counter(), time.process_time()
            out = self.tokenise(*a, **k)
            self.wall += time.perf_counter() - t0
            self.cpu += time.process_time() - c0
            return out

        bm25_mod.tokenise_shard = timed
        return self

    def __exit__(self, *exc: object) -> None:
        self.module.tokenise_shard = self.tokenise

    def split(self, build_seconds: float) -> dict:
        return {"parallel_tokenise_seconds": self.wall, "parallel_tokenise_cpu_seconds": self.cpu,
                "serial_seconds": build_seconds - self.wall}  # fmt: skip


def _bm25_build(args: argparse.Namespace, n: int, out: Path) -> tuple[dict, object]:
    """A sharded BM25 build (``BM25Index.build_saved``) of ``n`` recombined sentences into ``out``."""
    from garag.config import BM25Config
    from retrievers.bm25 import BM25Index

    base = _base_sentences()
    shutil.rmtree(out, ignore_errors=True)
    config = BM25Config(stemmer="", shard_docs=args.bm25_shard_docs)
    rss_before = _peak_mb()
    t = time.perf_counter()
    with _TimedTokenise() as tok:
        index = BM25Index.build_saved(out, generate(n, base), config, progress=False, total=n)
    build_s = time.perf_counter() - t
    return {
        "sentences": n,
        "shard_docs": config.shard_docs,
        "shards": -(-n // config.shard_docs),
        "vocabulary": len(index._vocab),
        "build_seconds": build_s,
        **tok.split(build_s),
        "build_sentences_per_second": n / build_s,
        "peak_rss_mb_before_build": rss_before,
        "peak_rss_mb": _peak_mb(),
        "index_mb": sum(f.stat().st_size for f in out.iterdir()) / 2**20,
    }, index


def part_bm25_half(args: argparse.Namespace, work: Path) -> dict:
    """The same build at half the size (its own process), for the per-sentence memory growth."""
    return _bm25_build(args, args.sentences, work / "bm25-half")[0]


def part_bm25(args: argparse.Namespace, work: Path) -> dict:
    from retrievers.bm25 import BM25Index

    n = args.sentences
    half = [
        sys.executable,
        __file__,
        "--sentences",
        str(n // 2),
        "--bm25-shard-docs",
        str(args.bm25_shard_docs),
    ]
    done = subprocess.run(
        [*half, "--workdir", str(work), "--part", "bm25_half"], capture_output=True, text=True
    )
    if done.returncode:
        sys.stderr.write(done.stderr[-5000:])
        raise SystemExit(f"scale: bm25 at {n // 2} sentences failed (exit {done.returncode})")
    shutil.rmtree(work / "bm25-half", ignore_errors=True)
    result, index = _bm25_build(args, n, work / "bm25")
    del index
    loaded = BM25Index.load(work / "bm25", mmap=True)
    queries = _queries(args.queries)
    loaded.search(queries[0], 100)
    single = []
    for q in queries:
        t = time.perf_counter()
        loaded.search(q, 100)
        single.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    loaded.search_many(queries, 100, n_threads=2)
    batch_qps = len(queries) / (time.perf_counter() - t)
    return {
        **result,
        "half": json.loads(done.stdout.strip().splitlines()[-1]),
        "vocabulary_growth": _vocabulary_growth(),
        "queries_per_second_single": len(single) / (sum(single) / 1000),
        "single_query_ms": _stats(single),
        "queries_per_second_2_threads": batch_qps,
    }


def part_page_index(args: argparse.Namespace, work: Path) -> dict:
    """The lexical indexes `garag index` builds over the store for configs/graph.yaml, in one
    process: the sentence BM25 (``BM25Index.over_sentences``), then the pages stage (title table
    and page-level BM25, ``PageRetriever.build``), each timed with its tokenisation apart."""
    from garag.config import load_config
    from garag.store import SentenceStore
    from retrievers.base import IndexContext
    from retrievers.bm25 import BM25Index
    from retrievers.pages import PageRetriever

    cfg = load_config(REPO / "configs" / "graph.yaml")
    stamp = (work / "params.json").read_text(encoding="utf-8")
    ctx = IndexContext(SentenceStore(work / "store.db"), work / "cache", f"scale:{stamp}", progress=False)
    out: dict = {"sentences": len(ctx.store), "pages": ctx.store.n_pages}

    def measured(build: Callable[[], Path], name: str) -> None:
        before, t, cpu = _peak_mb(), time.perf_counter(), _cpu()
        with _TimedTokenise() as tok:
            path = build()
        wall = time.perf_counter() - t
        size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20
        out[name] = {"seconds": wall, "cpu_seconds": _cpu() - cpu, **tok.split(wall),
                     "peak_rss_mb_before": before, "peak_rss_mb": _peak_mb(), "index_mb": size}  # fmt: skip

    measured(lambda: BM25Index.over_sentences(cfg.bm25, ctx, force=True)[0], "sentence_bm25")
    for old in (work / "cache").glob("pages-*"):  # built, not an earlier run's artifact reused
        shutil.rmtree(old)
    retriever = PageRetriever(cfg.pages, cfg.bm25, ctx)
    measured(retriever.build, "page_index")  # reuses the sentence index just built
    return out


def _timed_build(vectors: object, settings: dict) -> tuple[object, dict]:
    """``build_index`` and its IVF training and its adds timed apart (wall and CPU seconds; the
    first read of row 0 starts the adds, or the flat fill: no training)."""
    from retrievers.dense_index import VectorFile, build_index

    read, phases = VectorFile.read, {}

    def phased_read(self, start: int, stop: int):  # noqa: ANN001, ANN202 - the first add block ends training
        if start == 0 and "train_end" not in phases:
            phases["train_end"] = (time.perf_counter(), _cpu())
        return read(self, start, stop)

    VectorFile.read = phased_read
    try:
        t, cpu = time.perf_counter(), _cpu()
        index = build_index(vectors, settings)
    finally:
        VectorFile.read = read
    t1, cpu1 = phases["train_end"]
    return index, {"train_seconds": t1 - t, "train_cpu_seconds": cpu1 - cpu,
                   "add_seconds": time.perf_counter() - t1, "add_cpu_seconds": _cpu() - cpu1}  # fmt: skip


def part_faiss_dims(args: argparse.Namespace, work: Path) -> dict:
    """IVF-PQ built as the retriever builds it (``build_index`` over a float16 ``vectors.npy``, the
    settings ``dense.index: ivf_pq`` gives at this size) on seeded random unit vectors of each of
    ``--faiss-dims`` dimensions: train and add CPU seconds, for what the dimension costs (the dense
    part measures one encoder's; the GPU variant encodes MiniLM's 384)."""
    from garag.config import DenseConfig
    from retrievers.dense_index import VectorFile, index_settings

    n = min(args.sentences, args.faiss_dims_rows)
    out: dict = {"sentences": n, "dims": {}}
    rng = np.random.default_rng(SEED)
    for dim in (int(d) for d in args.faiss_dims.split(",")):
        path = work / f"faiss-dims-{dim}.npy"
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(n, dim))
        for start in range(0, n, 100_000):
            block = rng.standard_normal((min(n, start + 100_000) - start, dim), dtype=np.float32)
            mm[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
        mm.flush()
        del mm
        settings = index_settings(DenseConfig(index="ivf_pq"), "ivf_pq", n, dim)
        out["dims"][str(dim)] = {"settings": settings, **_timed_build(VectorFile(path), settings)[1]}
        path.unlink()
    return out


ADD_SENTENCES, DROP_EVERY = 10_000, 100  # the bm25_add part's edit of the bm25 part's index


def _bm25_edit(work: Path, oneshot: bool) -> dict:
    """Derive the bm25 part's index for an edit (every 100th document dropped, 10,000 recombined
    sentences added) as ``garag index --add/--remove`` does, timed with this process's peak RSS."""
    from garag.config import BM25Config
    from retrievers.bm25 import BM25Index

    parent = work / "bm25"
    if not (parent / "garag_doc_len.npy").is_file():
        raise SystemExit(f"scale: bm25_add needs the bm25 part's index in {parent}: run --parts bm25 first")
    n = len(np.load(parent / "garag_doc_len.npy", mmap_mode="r"))
    doc_map = np.full(n, -1, dtype=np.int64)
    kept = np.flatnonzero(np.arange(n) % DROP_EVERY)
    doc_map[kept] = np.arange(len(kept))
    new = list(generate(ADD_SENTENCES, _base_sentences(), seed=SEED + 1))
    config = BM25Config(stemmer="")
    out = work / ("bm25-add-oneshot" if oneshot else "bm25-add")
    shutil.rmtree(out, ignore_errors=True)
    before, t = _peak_mb(), time.perf_counter()
    if oneshot:
        BM25Index.derive(parent, doc_map, new, config).save(out)
    else:
        BM25Index.derive_saved(out, parent, doc_map, iter(new), config)
    seconds = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return {
        "documents": n,
        "dropped": n - len(kept),
        "added": len(new),
        "seconds": seconds,
        "peak_rss_mb_before": before,
        "peak_rss_mb": _peak_mb(),
    }


def part_bm25_add_oneshot(args: argparse.Namespace, work: Path) -> dict:
    """The same edit derived in memory at once (``BM25Index.derive``), for comparison."""
    return _bm25_edit(work, oneshot=True)


def part_bm25_add(args: argparse.Namespace, work: Path) -> dict:
    """An edit of the 1M-sentence BM25 index derived in shards through disk (``derive_saved``, what
    ``garag index --add`` runs), and in memory at once in a process of its own."""
    cmd = [sys.executable, __file__, "--sentences", str(args.sentences), "--workdir", str(work)]
    done = subprocess.run([*cmd, "--part", "bm25_add_oneshot"], capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr[-5000:])
        raise SystemExit(f"scale: the one-shot BM25 derive failed (exit {done.returncode})")
    return {**_bm25_edit(work, oneshot=False), "oneshot": json.loads(done.stdout.strip().splitlines()[-1])}


def _vocabulary_growth() -> dict:
    """Heaps' law V = K n^beta for the BM25 vocabulary, fitted on prefixes of the real sentences
    (shuffled, seeded; FEVER + HoVer pages with their titles, as indexed), and the memory of one
    vocabulary word in the tokenizer (a str -> int dict, measured on as many made-up words of the
    real words' lengths).  The recombined sentences reuse the real vocabulary, so the projection
    adds the growth of the vocabulary from these."""
    from garag.config import BM25Config
    from retrievers.bm25_weights import _make_tokenizer

    texts = _real_indexed_texts()
    random.Random(SEED).shuffle(texts)
    config = BM25Config()
    tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
    sizes, vocab, done = [], [], 0
    for k in range(6, -1, -1):
        n = len(texts) >> k
        for _ in tokenizer.streaming_tokenize(texts[done:n], update_vocab=True, allow_empty=True):
            pass
        done = n
        sizes.append(n)
        vocab.append(len(tokenizer.word_to_id))
    beta, log_k = np.polyfit(np.log(sizes), np.log(vocab), 1)
    words = list(tokenizer.word_to_id)
    rng = random.Random(SEED)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    sample = [len(words[rng.randrange(len(words))]) for _ in range(200_000)]
    tracemalloc.start()  # strings, ints above the small-int cache and the dict, as in bm25s
    table = {
        "".join(rng.choices(letters, k=max(n - 6, 1))) + f"{i:06d}": i + 1000 for i, n in enumerate(sample)
    }
    per_word = tracemalloc.get_traced_memory()[0] / len(table)
    tracemalloc.stop()
    del table
    return {
        "real_sentences": sizes,
        "vocabulary": vocab,
        "heaps_beta": float(beta),
        "heaps_k": float(np.exp(log_k)),
        "bytes_per_word": per_word,
    }


def _real_indexed_texts() -> list[str]:
    from garag.datasets import fever, hover
    from garag.wiki import iter_pages
    from retrievers.bm25 import sentence_text

    return [
        sentence_text(p.id, t, True)
        for data in (fever(), hover())
        for p in iter_pages(data.corpus_path)
        for _, t, _ in p.sentences()
    ]


def part_faiss(args: argparse.Namespace, work: Path) -> dict:
    import faiss
    import torch

    from retrievers.embeddings import SentenceEncoder

    n = args.sentences
    base = _base_sentences()
    rng = np.random.default_rng(SEED)
    encoder = SentenceEncoder("minilm", "cpu")
    encoder.load().encode(base[:64])  # warm up
    pick = rng.choice(len(base), size=min(args.sample, len(base)), replace=False)
    texts = [base[i] for i in pick]
    t, cpu = time.perf_counter(), _cpu()
    real = encoder.encode(texts)
    encode_s, encode_cpu = time.perf_counter() - t, _cpu() - cpu
    gpu_sps = None
    if torch.cuda.is_available():  # measured only where there is a GPU
        gpu = SentenceEncoder("minilm", "cuda", 512).load()
        gpu.encode(texts[:1024])
        t = time.perf_counter()
        gpu.encode(texts)
        torch.cuda.synchronize()
        gpu_sps = len(texts) / (time.perf_counter() - t)
    encoder_rss = _peak_mb()
    dim = real.shape[1]
    vectors = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        a, b = rng.integers(0, len(real), m), rng.integers(0, len(real), m)
        w = rng.uniform(0.2, 0.8, (m, 1)).astype(np.float32)
        chunk = w * real[a] + (1 - w) * real[b]
        vectors[start : start + m] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    q = encoder.encode(_queries(args.queries))
    results = {
        "sentences": n,
        "dim": dim,
        "encode_sentences_per_second": len(pick) / encode_s,
        "encode_sentences_per_core_second": len(pick) / encode_cpu,
        "encode_torch_threads": torch.get_num_threads(),
        "encode_gpu_sentences_per_second": gpu_sps,
        "encoded_sample": len(pick),
        "peak_rss_mb_encoder": encoder_rss,
    }

    def timed_search(index: faiss.Index, k: int = 100) -> dict:
        index.search(q[:1], k)
        t0 = time.perf_counter()
        _, ids = index.search(q, k)
        qps = len(q) / (time.perf_counter() - t0)
        single = []
        for row in q[:100]:
            t0 = time.perf_counter()
            index.search(row[None, :], k)
            single.append((time.perf_counter() - t0) * 1000)
        return {"queries_per_second": qps, "single_query_ms": _stats(single), "ids": ids}

    def record(name: str, built: float, search: dict, bytes_per_vector: int, **extra: float) -> None:
        ids = search.pop("ids")
        results[name] = {**extra, "build_seconds": built, **search, "bytes_per_vector": bytes_per_vector}
        results[name]["recall@100_vs_flat"] = _overlap(ids, truth) if name != "flat" else 1.0

    t = time.perf_counter()
    flat = faiss.IndexFlatIP(dim)
    flat.add(vectors)
    built = time.perf_counter() - t
    search = timed_search(flat)
    truth = search["ids"]
    record("flat", built, search, dim * 4)
    del flat

    nlist = int(4 * np.sqrt(n))
    m_pq = 48

    def ivf(name: str, index: faiss.Index, bytes_per_vector: int, **extra: int) -> None:
        t0, c0 = time.perf_counter(), _cpu()
        index.train(vectors[rng.choice(n, size=min(n, 50 * nlist), replace=False)])
        t1, c1 = time.perf_counter(), _cpu()
        index.add(vectors)
        t2, c2 = time.perf_counter(), _cpu()
        index.nprobe = 32
        record(name, t2 - t0, timed_search(index), bytes_per_vector, nlist=nlist, nprobe=32, **extra,
               train_seconds=t1 - t0, train_cpu_seconds=c1 - c0, add_seconds=t2 - t1,
               add_cpu_seconds=c2 - c1)  # fmt: skip

    ivf(
        "ivf_flat",
        faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT),
        dim * 4,
    )
    ivf(
        "ivf_pq",
        faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, nlist, m_pq, 8, faiss.METRIC_INNER_PRODUCT),
        m_pq + 8,
        m=m_pq,
    )
    if not args.no_hnsw:
        t = time.perf_counter()
        hnsw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = 40
        hnsw.add(vectors)
        built = time.perf_counter() - t
        hnsw.hnsw.efSearch = 128
        record("hnsw", built, timed_search(hnsw), dim * 4 + 32 * 2 * 4, M=32, efSearch=128)
    results["peak_rss_mb"] = _peak_mb()
    return results


def _overlap(ids: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(ids, truth, strict=True)]))


# -- driver -------------------------------------------------------------------------------------------

RUN = {"corpus": part_corpus, "store": part_store, "graph": part_graph, "graal": part_graal,
       "dense": part_dense, "dense_query": part_dense_query,
       "pages": part_pages, "bm25": part_bm25, "bm25_half": part_bm25_half, "bm25_add": part_bm25_add,
       "page_index": part_page_index, "faiss_dims": part_faiss_dims,
       "bm25_add_oneshot": part_bm25_add_oneshot, "faiss": part_faiss}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=1_000_000)
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, among {', '.join(PARTS)}")
    ap.add_argument("--queries", type=int, default=500, help="claims timed (BM25, FAISS, GRAAL graph part)")
    ap.add_argument(
        "--rerank-queries", type=int, default=50, help="claims timed with GRAAL's MiniLM re-ranking"
    )
    ap.add_argument(
        "--nprobe",
        default="",
        help="dense_query: also sweep these dense.ivf_nprobe values (comma-separated) on the FEVER tune part",
    )
    ap.add_argument("--faiss-dims", default="256,384", help="faiss_dims: the dimensions compared")
    ap.add_argument(
        "--faiss-dims-rows", type=int, default=1_000_000, help="faiss_dims: random vectors (at most)"
    )
    ap.add_argument("--sample", type=int, default=20_000, help="real sentences encoded for the FAISS part")
    ap.add_argument(
        "--dense-model",
        default="wordllama",
        help="dense.model of the dense and graal parts (wordllama: docs/scale.md's choice for large corpora)",
    )
    ap.add_argument("--no-hnsw", action="store_true", help="skip the HNSW index (its 1M build is slow)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of the graph build")
    ap.add_argument(
        "--bm25-shard-docs",
        type=int,
        default=250_000,
        help="bm25.shard_docs of the BM25 part (shards on disk)",
    )
    ap.add_argument(
        "--graph-half",
        action="store_true",
        help="also build the graph at half the size (driver memory growth)",
    )
    ap.add_argument("--titles", choices=TITLES, default="disambiguated", help="copy ids (scale_corpus.py)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument(
        "--base-pages", type=int, default=0, help="trial runs: resample only this many real pages (0 = all)"
    )
    ap.add_argument("--workdir", type=Path, help="keep corpus, store and graph here (later runs reuse them)")
    ap.add_argument("--out", type=Path, default=OUT, help="where scale.json and scale.md go")
    ap.add_argument(
        "--fit-from",
        type=Path,
        help="a scale.json of the same parts at another size: the projection fits the scaling between them",
    )
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="run no part: rewrite scale.json/.md in --out from the parts measured there (and --fit-from)",
    )
    ap.add_argument("--part", choices=tuple(RUN), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.part:
        print(json.dumps(RUN[args.part](args, args.workdir)))
        return 0
    requested = [] if args.report_only else [p.strip() for p in args.parts.split(",") if p.strip()]
    if (not requested and not args.report_only) or set(requested) - set(RUN):
        ap.error(f"--parts: among {', '.join(RUN)}, got {args.parts!r}")
    params = {
        "sentences": args.sentences,
        "seed": args.seed,
        "titles": args.titles,
        "base_pages": args.base_pages,
    }
    tmp = None if args.workdir else tempfile.mkdtemp(prefix="garag-scale-")
    work = (args.workdir or Path(tmp)).resolve()
    work.mkdir(parents=True, exist_ok=True)
    stamp = work / "params.json"
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) != params:
        for name in ("corpus.jsonl", "store.db", "graph.json", "cache"):
            shutil.rmtree(work / name) if (work / name).is_dir() else (work / name).unlink(missing_ok=True)
    stamp.write_text(json.dumps(params), encoding="utf-8")
    have = {"corpus": "corpus.jsonl", "store": "store.db", "graph": "graph.json", "graal": ""}
    last = max((CHAIN.index(p) for p in requested if p in CHAIN), default=-1)
    plan, stale = [], False
    for stage in CHAIN[: last + 1]:
        if stage in requested or stale or not have[stage] or not (work / have[stage]).is_file():
            plan.append(stage)
            stale = True
    plan += [p for p in PARTS if p in requested and p not in CHAIN]
    plan.sort(key=("corpus", *PARTS).index)  # graal after dense: its cold queries read dense's vectors
    command = "python benchmarks/scale.py " + " ".join(argv)
    results = {}
    try:
        for part in plan:
            print(f"scale: {part} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            cmd = [sys.executable, __file__, *argv, "--part", part, "--workdir", str(work)]
            env = {**os.environ, **(ONE_THREAD if part == "graph" else {})}
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if done.returncode:
                sys.stderr.write(done.stderr[-5000:])
                raise SystemExit(f"scale: part {part} failed (exit {done.returncode})")
            results[part] = {**json.loads(done.stdout.strip().splitlines()[-1]), "params": params,
                             "command": command}  # fmt: skip
            if part == "graph" and args.graph_half:
                results[part]["half"] = _graph_half(args, work)
            print(f"scale: {part} done in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    path = args.out / "scale.json"
    old = json.loads(path.read_text(encoding="utf-8")).get("parts", {}) if path.is_file() else {}
    parts = {k: v for k, v in old.items() if v.get("params") == params} | results
    fit = {}
    if args.fit_from:  # the same parts measured at another size: the scaling between the two
        small = json.loads(args.fit_from.read_text(encoding="utf-8"))["parts"]
        fit = (
            fit_exponents(small, parts)
            if params["sentences"]
            > max((p["sentences"] for p in small.values() if "sentences" in p), default=0)
            else fit_exponents(parts, small)
        )
    gpu = REPO / "benchmarks" / "results" / "gpu_encode.json"
    gpu_rate = None
    if gpu.is_file():  # MiniLM through the embedding cache on one H200 (benchmarks/gpu_encode.md)
        runs = json.loads(gpu.read_text(encoding="utf-8"))["runs"]
        gpu_rate = max(r["sentences_per_s"] for r in runs if r["device"] == "cuda" and "cache" in r["what"])
    proj = projection(parts, fit, gpu_rate)
    result = {"params": params, "cpus": os.cpu_count(), "parts": parts, "projection": proj,
              "fit_from": str(args.fit_from or "")}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    text = report(result)
    (args.out / "scale.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
