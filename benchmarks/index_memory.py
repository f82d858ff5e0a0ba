"""Peak memory of the dense index kinds and of the page index build, measured at a few sizes and
extrapolated to full FEVER (25M sentences, 5.4M pages): what ``dense.index: auto`` and the sharded
``pages`` build are sized by.

Parts (``--parts``); every measurement runs in a child process of its own (one thread), so that its
peak RSS (VmHWM) is that build's or search's alone:

* dense: FAISS ``flat``, ``ivf_pq`` and ``hnsw`` indexes built by the retriever's own code
  (``retrievers.dense_index.build_index`` from a ``vectors.npy`` file, as ``garag index`` does) and
  searched by ``FaissDenseRetriever.search`` (IVF-PQ re-scores ``k x dense.pq_refine`` candidates read
  from vectors.npy), at ``--sizes`` vectors; an IVF build's training and adding peaks apart.
  Vectors are synthetic: normalised mixtures of two real MiniLM vectors (the FEVER + HoVer embedded
  corpora's, read from the dense artifacts of ``--cache-dir``, or encoded here when there are none),
  as benchmarks/scale.py makes them: the right dimension, norm and spread, so the same memory as
  real vectors.  Queries: real FEVER claims
  encoded with MiniLM; recall@k against exact search over the same vectors.  A further child loads
  MiniLM and encodes, for the rest of a dense process's memory.
* pages: the ``pages`` stage (``PageRetriever.build``: title table and page-level BM25) over the
  scale corpus of benchmarks/scale_corpus.py cut at ``--pages`` pages, built in shards through
  disk, and (``--unsharded``) as one in-memory BM25 as before, for comparison.

Extrapolation (benchmarks/index_memory_report.py): a least-squares line through the measured peaks
(peak = a + b x N), evaluated at 25M sentences / 5.4M pages, beside the memory model ``auto`` uses.
Results merge into ``<out>/index_memory.json`` (a size measured again replaces its row) and
``<out>/index_memory.md`` is written from it (``--report-only``: only that).

    python benchmarks/index_memory.py --workdir /tmp/garag-index-memory [--parts dense,pages]
        [--sizes 100000,300000,1000000] [--pages 100000,300000] [--unsharded] [--cache-dir /work/gc]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from index_memory_report import report

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "results"
SEED = 20240601
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
K = 100


def _peak_mb() -> float:
    """This process image's peak RSS (VmHWM): ``ru_maxrss`` would keep the parent's peak across the
    fork and exec that started it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _status_mb(*keys: str) -> dict:
    """Fields of /proc/self/status in MB (e.g. RssAnon, RssFile: private memory vs file pages)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in keys:
            out[key] = int(value.split()[0]) / 1024
    return out


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _child(spec: dict) -> dict:
    """Run one measurement (``spec["what"]``) in a fresh one-thread process; its JSON result."""
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {spec['what']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- dense -----------------------------------------------------------------------------------------


def _real_vectors(cache_dir: str | None, sample: int) -> np.ndarray:
    """MiniLM vectors of the embedded corpora's sentences: from dense artifacts, else encoded."""
    found = []
    for meta_path in sorted(Path(cache_dir).glob("dense-*/meta.json")) if cache_dir else []:
        meta = json.loads(meta_path.read_text())
        if meta.get("model") == "minilm" and (meta_path.parent / "vectors.npy").is_file():
            found.append(np.load(meta_path.parent / "vectors.npy"))
    if found:
        return np.concatenate(found)
    from garag.datasets import fever, hover
    from garag.text import detokenize
    from garag.wiki import iter_pages
    from retrievers.embeddings import SentenceEncoder

    texts = [
        detokenize(t)
        for d in (fever(), hover())
        for p in iter_pages(d.corpus_path)
        for _, t, _ in p.sentences()
    ]
    pick = np.random.default_rng(SEED).choice(len(texts), size=min(sample, len(texts)), replace=False)
    return SentenceEncoder("minilm", "cpu").encode([texts[i] for i in pick])


def _write_mixtures(path: Path, n: int, real: np.ndarray) -> None:
    from retrievers.dense_index import VectorWriter

    rng = np.random.default_rng(SEED)
    with VectorWriter(path, n, real.shape[1]) as out:
        for start in range(0, n, 100_000):
            m = min(100_000, n - start)
            a, b = rng.integers(0, len(real), m), rng.integers(0, len(real), m)
            w = rng.uniform(0.2, 0.8, (m, 1)).astype(np.float32)
            chunk = w * real[a] + (1 - w) * real[b]
            out.write(chunk / np.linalg.norm(chunk, axis=1, keepdims=True))


def _exact_top(path: Path, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact top-``k`` rows per query by inner product, reading the file in blocks."""
    from retrievers.dense_index import ADD_CHUNK, VectorFile

    vectors = VectorFile(path)
    n = vectors.shape[0]
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, n, ADD_CHUNK):
        block = vectors.read(start, min(n, start + ADD_CHUNK))
        s = np.concatenate([best_s, queries @ block.T], axis=1)
        i = np.concatenate(
            [best_i, np.broadcast_to(np.arange(start, start + len(block)), (len(queries), len(block)))], 1
        )
        top = np.argsort(-s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(s, top, 1), np.take_along_axis(i, top, 1)
    return best_i


def child_dense_build(spec: dict) -> dict:
    import faiss

    from garag.config import DenseConfig
    from retrievers.dense_index import VectorFile, build_index, index_memory, index_settings

    class PhasedFile(VectorFile):
        """The vectors file, noting the peak when the first block is read for adding (the IVF
        training is over) and resetting it (``clear_refs`` 5), so that the add phase's shows."""

        train_peak: float | None = None

        def read(self, start: int, stop: int) -> np.ndarray:
            if start == 0 and self.train_peak is None:
                self.train_peak = _peak_mb()
                Path("/proc/self/clear_refs").write_text("5")
            return super().read(start, stop)

    config = DenseConfig(index=spec["kind"])
    vectors = PhasedFile(spec["vectors"])
    n, dim = vectors.shape
    settings = index_settings(config, spec["kind"], n, dim)
    rss, t, cpu = _rss_mb(), time.perf_counter(), time.process_time()
    index = build_index(vectors, settings)
    add_peak = _peak_mb()
    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(out / "index.faiss"))
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    (out / "meta.json").write_text(
        json.dumps({"kind": "dense", "index_type": spec["kind"], "n": n, "dim": dim})
    )
    target = out / "vectors.npy"
    if not target.exists():
        target.symlink_to(Path(spec["vectors"]).resolve())
    return {
        "settings": settings,
        "rss_mb_before": rss,
        "peak_rss_mb": max(vectors.train_peak or 0.0, _peak_mb()),
        "train_peak_rss_mb": vectors.train_peak,
        "add_peak_rss_mb": add_peak,
        "index_bytes": _index_bytes(index),
        "end_mb": _status_mb("RssAnon", "RssFile"),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "index_mb": (out / "index.faiss").stat().st_size / 2**20,
        "model_mb": index_memory(spec["kind"], n, dim, config) / 2**20,
    }


def _index_bytes(index) -> int:  # noqa: ANN001
    """Bytes of the vectors' codes and ids an index holds (IVF: summed over its inverted lists)."""
    import faiss

    if hasattr(index, "invlists"):
        lists = faiss.extract_index_ivf(index).invlists
        sizes = [lists.list_size(i) for i in range(lists.nlist)]
        return int(sum(sizes) * (lists.code_size + 8))
    return int(index.ntotal * index.d * 4)


def child_dense_search(spec: dict) -> dict:
    from garag.config import DenseConfig
    from retrievers.base import IndexContext
    from retrievers.dense import FaissDenseRetriever
    from retrievers.dense_index import index_memory

    queries = np.load(spec["queries"])
    truth = np.load(spec["truth"])
    config = DenseConfig(index=spec["kind"], use_gpu="no")
    # No store: search() needs only the index and the vectors (hits would need sentence ids).
    ctx = IndexContext(store=None, cache_dir=Path(spec["out"]) / "cache", fingerprint="bench", progress=False)  # type: ignore[arg-type]
    retriever = FaissDenseRetriever(config, ctx)
    rss = _rss_mb()
    retriever.load(spec["out"])
    loaded = _rss_mb()
    retriever.search(queries[:1], K)
    single = []
    for q in queries:
        t = time.perf_counter()
        retriever.search(q[None, :], K)
        single.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    _, rows = retriever.search(queries, K)
    batched = len(queries) / (time.perf_counter() - t)
    recall = {
        f"recall@{k}": float(
            np.mean([len(set(a[:k]) & set(b[:k])) / k for a, b in zip(rows, truth, strict=True)])
        )
        for k in (10, 100)
    }
    n, dim = retriever._vectors.shape  # noqa: SLF001
    return {
        "rss_mb_before": rss,
        "rss_mb_loaded": loaded,
        "peak_rss_mb": _peak_mb(),
        "end_mb": _status_mb("RssAnon", "RssFile"),
        "single_query_ms_p50": float(np.percentile(single, 50)),
        "single_query_ms_p95": float(np.percentile(single, 95)),
        "queries_per_second_batched": batched,
        "model_mb": index_memory(spec["kind"], n, dim, config) / 2**20,
        **recall,
    }


def child_encoder(spec: dict) -> dict:
    """MiniLM loaded and encoding: the rest of a process that builds or searches a dense index."""
    from garag.datasets import fever
    from retrievers.embeddings import SentenceEncoder

    rss = _rss_mb()
    encoder = SentenceEncoder("minilm", "cpu").load()
    encoder.encode([c.text for c in fever().claims()][: spec["texts"]])
    return {"rss_mb_before": rss, "peak_rss_mb": _peak_mb()}


def part_dense(args: argparse.Namespace, work: Path, previous: dict | None = None) -> dict:
    from garag.datasets import fever
    from retrievers.embeddings import SentenceEncoder

    real = _real_vectors(args.cache_dir, args.sample)
    queries = SentenceEncoder("minilm", "cpu").encode([c.text for c in fever().claims()][: args.queries])
    np.save(work / "queries.npy", queries)
    results: dict = {
        "real_vectors": len(real),
        "dim": int(real.shape[1]),
        "queries": len(queries),
        "sizes": {},
    }
    results["encoder"] = _child({"what": "encoder", "texts": 2000})
    for n in args.sizes:
        path = work / f"vectors-{n}.npy"
        if not path.exists():
            _write_mixtures(path, n, real)
        truth = work / f"truth-{n}.npy"
        if not truth.exists():
            np.save(truth, _exact_top(path, queries, K))
        row = results["sizes"].setdefault(str(n), {})
        for kind in args.kinds:
            if kind == "hnsw" and n > args.hnsw_max:
                continue
            out = work / f"{kind}-{n}"
            spec = {"kind": kind, "vectors": str(path), "out": str(out)}
            earlier = ((previous or {}).get("sizes", {}).get(str(n), {}).get(kind) or {}).get("build")
            if args.search_only and earlier and (out / "index.faiss").exists():
                build = earlier  # the index kept by the run that measured its build
            else:
                build = _child({"what": "dense_build", **spec})
            search = _child(
                {"what": "dense_search", **spec, "queries": str(work / "queries.npy"), "truth": str(truth)}
            )
            row[kind] = {"build": build, "search": search}
            print(
                f"dense {kind} n={n}: build peak {build['peak_rss_mb']:.0f} MB ({build['seconds']:.1f} s), "
                f"search peak {search['peak_rss_mb']:.0f} MB, recall@10 {search['recall@10']:.3f}",
                flush=True,
            )
            if kind != "ivf_pq":  # large; an IVF-PQ index is kept for --search-only
                (out / "index.faiss").unlink()
    return results


# -- pages -----------------------------------------------------------------------------------------


def _pages_corpus(work: Path, pages: int, most: int) -> Path:
    """The scale corpus (written once for ``most`` pages) cut at ``pages`` pages, and its store."""
    from scale_corpus import write_corpus

    from garag.store import build_store

    root = work / f"pages-{pages}"
    store = root / "store.db"
    if store.exists():
        return root
    (root / "wiki").mkdir(parents=True, exist_ok=True)
    big = work / "corpus.jsonl"
    if not big.exists():
        write_corpus(big, int(most * 3.3) + 1, SEED, "disambiguated")  # ~3.2 sentences a page
    with (
        big.open(encoding="utf-8") as src,
        (root / "wiki" / "wiki-001.jsonl").open("w", encoding="utf-8") as dst,
    ):
        for i, line in enumerate(src):
            if i == pages:
                break
            dst.write(line)
        else:
            raise RuntimeError(f"{big}: fewer than {pages} pages")
    build_store(root / "wiki", store, progress=False)
    return root


def child_pages(spec: dict) -> dict:
    from garag.config import BM25Config, PagesConfig
    from garag.store import SentenceStore
    from retrievers.base import IndexContext
    from retrievers.bm25 import BM25Index
    from retrievers.pages import PageRetriever, _page_texts

    root = Path(spec["root"])
    store = SentenceStore(root / "store.db")
    bm25 = BM25Config(shard_docs=spec["shard_docs"])
    ctx = IndexContext(store, Path(spec["cache"]), f"pages-{store.n_pages}", progress=False)
    rss, t = _rss_mb(), time.perf_counter()
    if spec["mode"] == "sentences":  # the shared sentence index, built first in a process of its own
        BM25Index.over_sentences(bm25, ctx)
    elif spec["mode"] == "unsharded":  # the page BM25 as it was built before: one in-memory index
        index = BM25Index.build(_page_texts(store, []), bm25, total=store.n_pages)
        index.save(Path(spec["cache"]) / "unsharded")
    else:
        PageRetriever(PagesConfig(), bm25, ctx).build()
    return {
        "pages": store.n_pages,
        "sentences": len(store),
        "rss_mb_before": rss,
        "peak_rss_mb": _peak_mb(),
        "seconds": time.perf_counter() - t,
    }


def part_pages(args: argparse.Namespace, work: Path) -> dict:
    results: dict = {}
    for pages in args.pages:
        root = _pages_corpus(work, pages, max(args.pages))
        spec = {"what": "pages", "root": str(root), "shard_docs": args.shard_docs}
        row: dict = {}
        _child({**spec, "mode": "sentences", "cache": str(root / "cache")})
        row["sharded"] = _child({**spec, "mode": "sharded", "cache": str(root / "cache")})
        if args.unsharded:
            row["unsharded"] = _child({**spec, "mode": "unsharded", "cache": str(root / "cache-unsharded")})
        results[str(pages)] = row
        done = ", ".join(
            f"{m} peak {r['peak_rss_mb']:.0f} MB in {r['seconds']:.1f} s" for m, r in row.items()
        )
        print(f"pages {pages}: {done}", flush=True)
    return results


def _merge(old: dict | None, new: dict) -> dict:
    """Results of a part: measurements of new sizes added, of the same sizes replaced."""
    if not old:
        return new
    merged = {**old, **{k: v for k, v in new.items() if k != "sizes"}}
    if "sizes" in new:
        merged["sizes"] = {**old.get("sizes", {})}
        for n, row in new["sizes"].items():
            merged["sizes"][n] = {**merged["sizes"].get(n, {}), **row}
    return merged


CHILDREN = {
    "dense_build": child_dense_build,
    "dense_search": child_dense_search,
    "encoder": child_encoder,
    "pages": child_pages,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--parts", default="dense,pages")
    p.add_argument("--workdir", type=Path, required=False)
    p.add_argument("--sizes", default="100000,300000,1000000")
    p.add_argument("--kinds", default="flat,ivf_pq,hnsw")
    p.add_argument("--hnsw-max", type=int, default=300_000, help="largest size HNSW is built at (slow)")
    p.add_argument("--pages", default="100000,300000")
    p.add_argument("--shard-docs", type=int, default=250_000, help="bm25.shard_docs")
    p.add_argument("--unsharded", action="store_true", help="also build the page BM25 unsharded, as before")
    p.add_argument("--cache-dir", help="a cache whose dense artifacts give real MiniLM vectors")
    p.add_argument("--sample", type=int, default=10_000, help="sentences encoded when no cache has vectors")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--report-only", action="store_true", help="write the report from the saved results")
    p.add_argument("--search-only", action="store_true", help="dense: measure searches of kept indexes again")
    args = p.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CHILDREN[spec.pop("what")](spec)))
        return 0
    if args.workdir is None and not args.report_only:
        p.error("--workdir is required")
    args.workdir = args.workdir or Path(".")
    args.sizes = [int(x) for x in args.sizes.split(",")]
    args.pages = [int(x) for x in args.pages.split(",")]
    args.kinds = args.kinds.split(",")
    result_path = args.out / "index_memory.json"
    res = json.loads(result_path.read_text()) if result_path.exists() else {}
    if not args.report_only:
        args.workdir.mkdir(parents=True, exist_ok=True)
        command = "python benchmarks/index_memory.py " + " ".join(argv if argv is not None else sys.argv[1:])
        res["commands"] = [*res.get("commands", []), command]
        res["shard_docs"] = args.shard_docs
        for part in args.parts.split(","):
            if part == "dense":
                new = part_dense(args, args.workdir, res.get("dense"))
            else:
                new = part_pages(args, args.workdir)
            res[part] = _merge(res.get(part), new)
        args.out.mkdir(parents=True, exist_ok=True)
        result_path.write_text(json.dumps(res, indent=1))
    (args.out / "index_memory.md").write_text(report(res))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
