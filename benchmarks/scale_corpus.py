"""Helpers of benchmarks/scale.py: its corpus, and the projection to full FEVER with the report.

The corpus: >= N sentences of real wiki-pages text, resampled and re-titled.

The base is every page of the embedded FEVER corpus and of the HoVer corpus (a HoVer page whose id,
compared NFC, is already in FEVER is left out): 17,468 pages, 55,947 non-empty sentences.  Copy 0
is the base pages under their own ids, in file order; copy k >= 1 is a seeded shuffle of the base
pages under re-titled ids, written round after round until the corpus holds >= N non-empty
sentences (the last round stops at the page that reaches N).  Text, line numbers and hyperlinks are
the page's own; only ids change.  Written as FEVER wiki-pages ``.jsonl`` (``id``, ``text``,
``lines``), one page at a time: the base pages are held once, pre-encoded, and nothing else is.

Titles (``titles=``):

* ``"disambiguated"`` (the default): copy 3 of ``Barack_Obama`` is ``Barack_Obama_-LRB-copy_3-RRB-``
  and copy 3 of ``Liverpool_-LRB-band-RRB-`` is ``Liverpool_-LRB-band,_copy_3-RRB-``.  The
  parenthetical is a disambiguation part (retrievers/graal/aliases.py), so every copy shares the
  original's alias key ("barack obama") as a variant, like a real disambiguated page.  Effect on
  linking: every alias key of a base page is shared by all its copies (~18 pages per key at 1M
  sentences, far more than real Wikipedia, where most keys name one page); the copies have the
  original's first sentence, so the words cosine ties and the plain original wins on its
  exact-title bonus.  Text mentions therefore land on the originals (for an original that is itself
  disambiguated, ``Liverpool_-LRB-band-RRB-``, on the first page id of the tie, one copy), which
  collect ~18x the mentions they have in the base corpus (more entities over the hub cap); the other
  copies get only their own-page mentions (and are neighbours of the entities they mention), and the
  linker describes every candidate page (one 4096-float word vector each, cached): a pessimistic
  case for link time, graph degree and linker memory.
* ``"unique"``: ``Barack_Obama_copy_3``, whose alias key ("barack obama copy 3") is the copy's own:
  no ambiguity is added (text mentions still land on the originals, since no text names a copy).
"""

from __future__ import annotations

import json
import math
import random
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from garag.config import DenseConfig
from retrievers.dense_index import index_memory

TITLES = ("disambiguated", "unique")
FEVER_SENTENCES = 25_000_000
FEVER_PAGES = 5_400_000
SETUPS = {"1x2": (1, 2), "1x16": (1, 16), "4x16": (4, 16)}  # machines x cores
# BM25 build, per vocabulary word besides the tokenizer's dict entry: document frequency (int64),
# idf (float64 and float32), column pointer (int64), non-occurrence (float32)
BM25_WORD_ARRAYS = 32
PAGE_SIZE_BYTES = 8  # the graph's list of page sizes, beside the page tables of part `pages`
BM25_SENTENCE_BYTES = 8  # BM25 build, per document at least: its length, per shard and concatenated
# BM25 derive (garag index --add), per document of the parent: its new number (8), the kept mask (1),
# the order check's two arrays (16), its length kept and concatenated (8)
BM25_EDIT_DOC_BYTES = 33
GOAL_HOURS, GOAL_HOURS_GPU, GOAL_RSS_GB, GOAL_GRAAL_MS = 2.0, 1.5, 4.0, 50.0
MINILM_DIM = 384  # the GPU variant encodes with MiniLM


def copy_id(page: str, k: int, titles: str = "disambiguated") -> str:
    """Id of copy ``k`` (>= 1) of ``page`` under a title scheme (module docstring)."""
    if titles == "unique":
        return f"{page}_copy_{k}"
    for close in ("-RRB-", ")"):
        if page.endswith(close) and page.count(close) == 1:
            return f"{page[: -len(close)]},_copy_{k}{close}"
    return f"{page}_-LRB-copy_{k}-RRB-"


def base_pages(datasets: tuple[str, ...] = ("fever", "hover")) -> list[tuple[str, str, str, int]]:
    """``(id, JSON text field, JSON lines field, non-empty sentences)`` of every base page with a sentence."""
    from garag.datasets import get_dataset
    from garag.wiki import iter_pages

    out, seen = [], set()
    for name in datasets:
        for page in iter_pages(get_dataset(name).corpus_path):
            key = unicodedata.normalize("NFC", page.id)
            n = sum(1 for _ in page.sentences())
            if key in seen or n == 0:
                continue
            seen.add(key)
            lines = "\n".join("\t".join((str(i), text, *page.links[i])) for i, text in enumerate(page.lines))
            text = " ".join(t for t in page.lines if t)
            out.append((page.id, json.dumps(text), json.dumps(lines), n))
    return out


def write_corpus(
    path: Path,
    n_sentences: int,
    seed: int,
    titles: str = "disambiguated",
    datasets: tuple[str, ...] = ("fever", "hover"),
    limit: int = 0,
) -> dict:
    """Write the corpus (module docstring) to ``path``; return its counts and alias-key ambiguity.

    ``limit`` > 0 keeps a seeded sample of that many base pages (in file order), so that a small trial
    run has as many copies per page as a full-size one.
    """
    from retrievers.graal.aliases import title_aliases

    if titles not in TITLES:
        raise ValueError(f"titles: one of {', '.join(TITLES)}, got {titles!r}")
    started = time.perf_counter()
    base = base_pages(datasets)
    rng = random.Random(seed)
    if 0 < limit < len(base):
        base = [base[i] for i in sorted(rng.sample(range(len(base)), limit))]
    written = [0] * len(base)  # pages written from each base page (copy 0 included)
    pages = sentences = rounds = 0
    with open(path, "w", encoding="utf-8") as f:
        k = 0
        while sentences < n_sentences:
            order = list(range(len(base)))
            if k:
                rng.shuffle(order)
            for i in order:
                page, text, lines, n = base[i]
                pid = copy_id(page, k, titles) if k else page
                f.write(f'{{"id": {json.dumps(pid)}, "text": {text}, "lines": {lines}}}\n')
                written[i] += 1
                pages, sentences = pages + 1, sentences + n
                if sentences >= n_sentences:
                    break
            k, rounds = k + 1, rounds + 1
    # pages sharing the title key of a written original (what a text mention of its title is matched to)
    keys = [(title_aliases(p)[:1] or [("", 0)])[0][0] for p, _, _, _ in base]
    base_count = Counter(key for key in keys if key)
    gen_count: Counter = Counter()
    for key, w in zip(keys, written, strict=True):
        gen_count[key] += w if titles == "disambiguated" else min(w, 1)
    keyed = [key for key, w in zip(keys, written, strict=True) if key and w]
    return {
        "pages": pages,
        "sentences": sentences,
        "base_pages": len(base),
        "base_sentences": sum(b[3] for b in base),
        "rounds": rounds,
        "titles": titles,
        "seed": seed,
        "datasets": list(datasets),
        "mb": path.stat().st_size / 2**20,
        "seconds": time.perf_counter() - started,
        "title_key_candidates_base": sum(base_count[key] for key in keyed) / max(1, len(keyed)),
        "title_key_candidates": sum(gen_count[key] for key in keyed) / max(1, len(keyed)),
        "title_key_candidates_max": max((gen_count[key] for key in keyed), default=0),
    }


# -- projection to full FEVER -------------------------------------------------------------------------

METHOD = """\
**Projection method.**  Every stage is measured at the size above on this machine and scaled to
FEVER's 25,000,000 sentences and 5,400,000 pages; `g` = 25M / sentences measured.
Time: a stage that runs in one process (SQLite store build, BM25's store read, renumbering,
merge and weighting, FAISS training) takes its measured wall time x `g` whatever the cores; BM25's
shards are prepared (the store's rows made the indexed text) and tokenised by `bm25.workers`
processes or, with `--engine ray`, by the cluster's tokeniser actors: their CPU seconds x `g` /
cores (in the builds measured before 2026-11-28 the first shard and the text preparation ran in the
build's own process and count as serial; part `page_index` times the sentence BM25 and
the pages stage, title table and page-level BM25, as `garag index` builds them over the store with
configs/graph.yaml's tokenizer: where it ran, its times are the projection's, and the recombined
sentences' BM25 gives the memory); a stage that parallelises takes
(CPU seconds measured x `g`) / cores it can use: MiniLM encoding uses every core of every machine
(measured per core from process CPU time), FAISS IVF-PQ adds use the cores of one machine and grow
as `g`^1.5 (nlist = 4 sqrt(N) centroids per assignment).  The graph build's workers (processes, or
Ray actors across machines with `garag index --engine ray`) parse, link and write page partitions
while one driver process registers pages and merges the partitions, so its time is max(driver CPU x
`g`, (driver + workers CPU) x `g` / cores): the driver is the floor however many cores there
are.  CPU times come from getrusage (RUSAGE_SELF for a part's process,
RUSAGE_CHILDREN for its reaped workers).  Stages run one after another on the whole setup (store
first: every index reads it); the total is their sum.  Linear scaling is an assumption: SQLite
B-trees, alias tables and postings grow a little worse than linearly, so these are lower bounds
for the serial stages.  Dense encoding on a GPU is projected only from a measured GPU rate; that
variant encodes with MiniLM (384-d), so its FAISS stage is the measured build's times x the CPU
ratio of the same IVF-PQ build on random 384-d and measured-dimension vectors (part `faiss_dims`).
Memory: peak RSS per process.  Constant per worker: MiniLM encoding workers.  Grows with the corpus:
store build (page-id table, x pages), FAISS (index bytes per vector x 25M, plus the training
sample); projected as RSS before the stage + (peak - before) x growth.  The BM25 build goes in
shards through disk (`bm25.shard_docs` documents each; the merge works in bounded blocks of
postings), so its token matrix is never whole in memory: it is measured at two sizes with the same
shard size, and projected as the peak at the larger + the growth per sentence between them (at
least the 8 bytes of a document's length, held twice) x the sentences to come + the vocabulary's
growth.  The recombined sentences reuse
the real vocabulary, so that growth comes from Heaps' law V = K n^beta fitted on prefixes of the
real FEVER + HoVer sentences (extrapolated ~450x: an estimate), at twice the measured bytes of a
tokenizer dict entry (the tokenizer's dict and bm25s's copy at the save) plus 32 bytes of
per-term arrays.  Graph workers and driver hold the page tables (page ids, their numbers, the alias table),
measured directly at 5.4M pages with distinct titles (part `pages`); the linker's page cache and
a partition's rows are bounded.  So a graph worker is projected as its measured peak - the page
tables at the measured size + the tables at 5.4M pages.  The graph driver streams pages and their
sentences from the store and merges partitions one at a time; its page registration is measured
around it in the build.  It is projected as its peak - that registration + the tables at 5.4M
pages + 8 bytes a page for their sizes + the growth of the rest (peak - registration) per page
between two sizes (`--graph-half` runs the graph part again at half the sentences, its own corpus
and store) x the pages to come.  (Before commit bcd0fce that growth was 419 bytes a page: the
retriever read the page tables again to open the graph it had just built, a second copy in
memory; it now takes the builder's tables over.)  (Without the
half-size run: the rest of its growth, peak - before - tables, x pages, conservative.)
A BM25 edit (`garag index --add/--remove`, part `bm25_add`) reads the parent index memory-mapped
block by block and tokenises only the new documents in shards: it is projected as its measured
peak + 33 bytes a parent document (its new number, the kept mask, the order check, its length)
x the documents to come + the vocabulary's growth, as for the build; derived in memory at once,
it grows with the postings: RSS before + (peak - before) x `g`."""


def fit_exponents(small: dict, large: dict) -> dict:
    """Per stage, the exponent b of time ~ sentences^b through the same stage measured at two sizes
    (``small`` and ``large``: the ``parts`` of two scale.json files); b is kept at 1 or more (never
    a sub-linear extrapolation), and only where the two runs used the same corpus titles (and, for
    FAISS adds, the same index)."""
    keys = {  # stage -> (part, measurement)
        "store": ("store", "seconds"),
        "bm25": ("bm25", "serial_seconds"),
        "dense_encode": ("dense", "encode_cpu_seconds"),
        "dense_add": ("dense", "add_cpu_seconds"),
        "graph_driver": ("graph", "parent_cpu_seconds"),
        "graph_workers": ("graph", "workers_cpu_seconds"),
        "bm25_store": ("page_index", "sentence_bm25.serial_seconds"),
        "page_index": ("page_index", "page_index.serial_seconds"),
    }

    def value(part: dict, key: str) -> float | None:  # a measurement, dotted into nested parts
        for k in key.split("."):
            part = part.get(k) if isinstance(part, dict) else None
        return part

    out = {}
    for stage, (part, key) in keys.items():
        a, b = small.get(part), large.get(part)
        if not a or not b or value(a, key) is None or value(b, key) is None:
            continue
        if a["sentences"] >= b["sentences"]:
            continue
        if a.get("params", {}).get("titles") != b.get("params", {}).get("titles"):
            continue
        if stage == "dense_add" and a.get("index") != b.get("index"):
            continue  # auto picks flat at 1M and IVF-PQ at 5M: adds to different indexes
        va, vb = value(a, key), value(b, key)
        fitted = math.log(vb / va) / math.log(b["sentences"] / a["sentences"])
        out[stage] = {
            "sizes": [a["sentences"], b["sentences"]],
            "values": [va, vb],
            "measured": key,
            "fitted": fitted,
            "used": max(fitted, 1.0),
        }
    return out


def projection(parts: dict, fit: dict | None = None, gpu_rate: float | None = None) -> dict:
    """Hours per stage on each setup, projected peak RSS per process, totals and goals (METHOD).

    Args:
        parts: the measured parts at one size.
        fit: :func:`fit_exponents` (time ~ sentences^b per stage); linear where a stage has none.
        gpu_rate: MiniLM sentences/s on one GPU through the embedding cache (a measured rate), for
            the GPU-encoding variant.
    """
    S, stages = FEVER_SENTENCES, {}
    fit = fit or {}

    def grow(stage: str, g: float) -> float:  # the time factor from the measured size to 25M
        return g ** fit[stage]["used"] if stage in fit else g

    def grown(before: float, peak: float, growth: float) -> float:
        return (before + (peak - before) * growth) / 1024

    def hours(fn: Callable[[int, int], float]) -> dict:  # fn(machines, cores) -> seconds
        return {k: fn(m, c) / 3600 for k, (m, c) in SETUPS.items()}

    if "store" in parts:
        s = parts["store"]
        g = S / s["sentences"]
        stages["store"] = {
            "hours": hours(lambda m, c: s["seconds"] * grow("store", g)),
            "rss_gb": grown(s["peak_rss_mb_before"], s["peak_rss_mb"], FEVER_PAGES / s["pages"]),
            "disk_gb": s["db_mb"] * g / 1024,
            "parallel": "one process",
        }
    if "bm25" in parts:
        b = parts["bm25"]
        g = S / b["sentences"]
        if "half" in b:  # sharded build measured at two sizes (METHOD)
            h, v = b["half"], b["vocabulary_growth"]
            measured = (b["peak_rss_mb"] - h["peak_rss_mb"]) / (b["sentences"] - h["sentences"])
            per_sentence = max(measured, BM25_SENTENCE_BYTES / 2**20)
            words = v["heaps_k"] * S ** v["heaps_beta"]
            word_mb = (2 * v["bytes_per_word"] + BM25_WORD_ARRAYS) / 2**20
            rest = b["peak_rss_mb"] + per_sentence * (S - b["sentences"])
            rss = (rest + max(words - b["vocabulary"], 0) * word_mb) / 1024
            extra = {
                "vocabulary_words": words,
                "words_within_goal": b["vocabulary"] + (4096 - rest) / word_mb,
            }
        else:
            rss, extra = grown(b["peak_rss_mb_before_build"], b["peak_rss_mb"], g), {}
        # shards tokenised by the cluster's workers (their CPU / cores), the rest in one process
        serial_s = b.get("serial_seconds", b["build_seconds"])
        parallel_cpu = b.get("parallel_tokenise_cpu_seconds", 0.0)
        stages["bm25"] = {
            **extra,
            "hours": hours(lambda m, c: serial_s * grow("bm25", g) + parallel_cpu * g / (m * c)),
            "rss_gb": rss,
            "disk_gb": b["index_mb"] * g / 1024,
            "parallel": "tokenise: all cores; merge: one process" if "serial_seconds" in b else "one process",
        }
    if "page_index" in parts:  # the lexical indexes as `garag index` builds them over the store
        pi = parts["page_index"]
        g = S / pi["sentences"]

        def lexical(m: dict, stage: str) -> dict:  # shards over the cores, the rest in one process
            serial, shards = m["serial_seconds"] * grow(stage, g), m["parallel_tokenise_cpu_seconds"] * g
            return hours(lambda k, c: serial + shards / (k * c))

        sb = pi["sentence_bm25"]
        if "bm25" in stages:  # memory from the bm25 part's two sizes, time from the store's real text
            stages["bm25"]["hours_recombined"] = stages["bm25"]["hours"]
            stages["bm25"]["hours"] = lexical(sb, "bm25_store")
        else:
            stages["bm25"] = {
                "hours": lexical(sb, "bm25_store"),
                "rss_gb": grown(sb["peak_rss_mb_before"], sb["peak_rss_mb"], g),
                "disk_gb": sb["index_mb"] * g / 1024,
                "parallel": "tokenise: all cores; merge: one process",
            }
        pg = pi["page_index"]
        stages["pages (title table, page BM25)"] = {
            "hours": lexical(pg, "page_index"),
            "rss_gb": grown(pg["peak_rss_mb_before"], pg["peak_rss_mb"], FEVER_PAGES / pi["pages"]),
            "disk_gb": pg["index_mb"] * g / 1024,
            "parallel": "tokenise: all cores; merge: one process",
        }
    if "faiss" in parts:
        d = parts["faiss"]
        g, rate = S / d["sentences"], d.get("encode_sentences_per_core_second")
        if rate:
            stages["dense encode (CPU)"] = {
                "hours": hours(lambda m, c: S / (rate * m * c)),
                "rss_gb": d["peak_rss_mb_encoder"] / 1024,
                "parallel": "all cores",
                "only": "cpu",
            }
        if d.get("encode_gpu_sentences_per_second"):
            stages["dense encode (GPU)"] = {
                "hours": hours(lambda m, c: S / (d["encode_gpu_sentences_per_second"] * m)),
                "rss_gb": d["peak_rss_mb_encoder"] / 1024,
                "parallel": "one GPU per machine",
                "only": "gpu",
            }
        p = d["ivf_pq"]
        if "train_seconds" in p:
            sample_gb = 50 * 4 * math.sqrt(S) * d["dim"] * 4 / 2**30
            stages["faiss IVF-PQ"] = {
                "hours": hours(lambda m, c: p["train_seconds"] * g + p["add_cpu_seconds"] * g**1.5 / c),
                "rss_gb": S * p["bytes_per_vector"] / 2**30 + sample_gb + d["peak_rss_mb_encoder"] / 1024,
                "disk_gb": S * p["bytes_per_vector"] / 2**30,
                "parallel": "train: one process; add: one machine",
            }
    if "dense" in parts:  # the retriever's own build over the store (encoder, then its index)
        d = parts["dense"]
        g = S / d["sentences"]
        encode_rss = d["peak_rss_mb_encode"] / 1024
        stages[f"dense encode (CPU, {d['model']})"] = {
            "hours": hours(lambda m, c: d["encode_cpu_seconds"] * grow("dense_encode", g) / (m * c)),
            "rss_gb": encode_rss,
            "parallel": "all cores",
            "only": "cpu",
        }
        if gpu_rate:
            stages["dense encode (GPU)"] = {
                "hours": hours(lambda m, c: S / (gpu_rate * m)),
                "rss_gb": encode_rss,
                "parallel": "one GPU per machine (MiniLM)",
                "only": "gpu",
            }
        index_gb = d["index_mb"] * g / 1024
        stages[f"faiss {d['index']} (retriever)"] = {
            # training reads a capped sample (retrievers/dense_index.py): its measured time whatever
            # the size; adding uses the cores of one machine
            "hours": hours(lambda m, c: d["train_seconds"] + d["add_cpu_seconds"] * grow("dense_add", g) / c),
            # the process before its build + the index at 25M by the memory model fitted to measured
            # peaks (retrievers/dense_index.py, benchmarks/results/index_memory.md)
            "rss_gb": max(
                encode_rss,
                (d["peak_rss_mb_before"] * 2**20 + index_memory(d["index"], S, d["dim"], DenseConfig()))
                / 2**30,
            ),  # fmt: skip
            "disk_gb": index_gb + d["vectors_mb"] * g / 1024,
            "parallel": "train: one process; add: one machine",
        }
        dims = parts.get("faiss_dims", {}).get("dims", {})
        if gpu_rate and str(d["dim"]) in dims and str(MINILM_DIM) in dims and d["dim"] != MINILM_DIM:
            # the GPU variant indexes MiniLM's vectors: the measured build x what the dimension costs
            # (part faiss_dims: the same IVF-PQ build on random vectors of both dimensions)
            a, b = dims[str(d["dim"])], dims[str(MINILM_DIM)]
            r_train = b["train_cpu_seconds"] / a["train_cpu_seconds"]
            r_add = b["add_cpu_seconds"] / a["add_cpu_seconds"]
            train_s, add_s = d["train_seconds"] * r_train, d["add_cpu_seconds"] * r_add * grow("dense_add", g)
            widen = MINILM_DIM / d["dim"]
            stages[f"faiss {d['index']} (retriever)"]["only"] = "cpu"  # the GPU variant has its own
            stages[f"faiss {d['index']} (retriever, MiniLM {MINILM_DIM}-d)"] = {
                "hours": hours(lambda m, c: train_s + add_s / c),
                "dim_cost": {"train": r_train, "add": r_add},
                "rss_gb": (
                    d["peak_rss_mb_before"] * 2**20 + index_memory(d["index"], S, MINILM_DIM, DenseConfig())
                )
                / 2**30,
                "disk_gb": (index_gb + d["vectors_mb"] * g / 1024) * widen,
                "parallel": "train: one process; add: one machine (GPU variant)",
                "only": "gpu",
            }
    if "graph" in parts:
        gr = parts["graph"]
        g = S / gr["sentences"]
        serial, work = (
            gr["parent_cpu_seconds"] * grow("graph_driver", g),
            gr["parent_cpu_seconds"] * grow("graph_driver", g)
            + gr["workers_cpu_seconds"] * grow("graph_workers", g),
        )
        growth = FEVER_PAGES / gr["pages"]
        tables, full = gr.get("page_tables_mb"), parts.get("pages", {}).get("page_tables_mb")
        half, extra = gr.get("half"), {}
        if tables is not None and full is not None:
            worker = (gr["peak_rss_mb_worker"] - tables + full) / 1024 if gr["peak_rss_mb_worker"] else None
            if "driver_register_mb" in (half or {}):  # tables swapped, the rest grown (METHOD)
                rest = gr["peak_rss_mb_parent"] - gr["driver_register_mb"]
                base = rest + full + FEVER_PAGES * PAGE_SIZE_BYTES / 2**20
                rest_half = half["peak_rss_mb_parent"] - half["driver_register_mb"]
                per_page = max(rest - rest_half, 0) / (gr["pages"] - half["pages"])
                extra["driver_tables_only_gb"] = base / 1024
                extra["driver_rest_bytes_per_page"] = per_page * 2**20
                driver = (base + per_page * (FEVER_PAGES - gr["pages"])) / 1024
            else:  # conservative: all the driver's growth besides the tables grown with the pages
                rest = gr["peak_rss_mb_parent"] - gr["peak_rss_mb_before"] - tables
                driver = (gr["peak_rss_mb_before"] + max(rest, 0) * growth + full) / 1024
        else:
            driver = grown(gr["peak_rss_mb_before"], gr["peak_rss_mb_parent"], growth)
            worker = (gr["peak_rss_mb_worker"] or 0) / 1024 or None
        stages["graph"] = {
            **extra,
            "hours": hours(lambda m, c: max(serial, work / (m * c))),
            "rss_gb": driver,
            "rss_gb_worker": worker,
            "disk_gb": gr["graph_db_mb"] * g / 1024,
            "parallel": "parse, link, write: all cores; merge: one driver",
        }
    if "dense" in parts and "faiss" in parts:  # the mixture-vector FAISS part is the older estimate
        for k in [k for k in stages if k in ("dense encode (CPU)", "faiss IVF-PQ")]:
            del stages[k]
    # "only": a stage of one variant (CPU or GPU encoding); every other stage counts in both totals
    index_stages = [k for k, v in stages.items() if v.get("only") != "gpu"]
    totals = {k: sum(stages[s]["hours"][k] for s in index_stages) for k in SETUPS}
    rss = {s: max(v["rss_gb"], v.get("rss_gb_worker") or 0) for s, v in stages.items()}
    out = {"stages": stages, "total_hours_cpu_encoding": totals, "max_rss_gb": rss, "fit": fit}
    if "dense encode (GPU)" in stages:
        gpu = [k for k, v in stages.items() if v.get("only") != "cpu"]
        out["total_hours_gpu_encoding"] = {k: sum(stages[s]["hours"][k] for s in gpu) for k in SETUPS}
    out["complete"] = all(p in parts for p in ("store", "bm25", "graph")) and (
        "faiss" in parts or "dense" in parts
    )
    if "bm25_add" in parts:  # garag index --add / --remove on the BM25 index (METHOD)
        a = parts["bm25_add"]
        n, one = a["documents"], a["oneshot"]
        sharded = a["peak_rss_mb"] + BM25_EDIT_DOC_BYTES * (S - n) / 2**20
        b = parts.get("bm25", {})
        if "vocabulary_growth" in b:
            v = b["vocabulary_growth"]
            words = v["heaps_k"] * S ** v["heaps_beta"]
            sharded += max(words - b["vocabulary"], 0) * (2 * v["bytes_per_word"] + BM25_WORD_ARRAYS) / 2**20
        out["bm25_add"] = {
            "rss_gb": sharded / 1024,
            "rss_gb_oneshot": grown(one["peak_rss_mb_before"], one["peak_rss_mb"], S / n),
        }
    return out


# -- report -------------------------------------------------------------------------------------------


def _ms(s: dict | None) -> str:
    return "n/a" if not s or s.get("p50") is None else f"{s['p50']:.1f} / {s['p95']:.1f} / {s['mean']:.1f}"


def _verdict(value: float | None, goal: float, unit: str) -> str:
    if value is None:
        return "not measured"
    return (
        f"**met** ({value:.2f} {unit} <= {goal:g})"
        if value <= goal
        else f"**missed** by {value - goal:.2f} {unit} ({value:.2f} {unit}, {value / goal:.1f}x the goal)"
    )


def report(res: dict) -> str:
    P, proj = res["parts"], res["projection"]
    n = res["params"]["sentences"]
    L = [f"# Scale: the whole index at {n:,} sentences ({res['cpus']} cores, no GPU unless stated)", ""]
    L += ["Commands: " + "; ".join(sorted({f"`{p['command']}`" for p in P.values()})), ""]
    if "corpus" in P:
        c = P["corpus"]
        L += [
            f"**Corpus** (benchmarks/scale_corpus.py, titles `{c['titles']}`): {c['sentences']:,} sentences, "
            f"{c['pages']:,} pages ({c['mb']:.0f} MB, written in {c['seconds']:.1f} s) from "
            f"{c['base_pages']:,} real pages / {c['base_sentences']:,} sentences of "
            f"{' + '.join(c['datasets'])}, {c['rounds']} round(s) of seeded resampling (copy k >= 1 of a "
            "page re-titled: `Barack_Obama_-LRB-copy_3-RRB-` with `disambiguated` titles, "
            "`Barack_Obama_copy_3` with `unique` ones).  A text mention of an original's title matches "
            f"{c['title_key_candidates']:.1f} "
            f"pages on average (base corpus: {c['title_key_candidates_base']:.2f}; most: "
            f"{c['title_key_candidates_max']})"
            + (
                ": the copies share the original's alias key, tie in disambiguation (same first sentence) "
                "and lose to the original's exact-title bonus, so text mentions land on the originals (more "
                "mentions and hubs per linked entity than real Wikipedia at this size) and the linker "
                "describes every candidate page: pessimistic for link time, graph degree and linker memory."
                if c["titles"] == "disambiguated" and c["rounds"] > 1
                else "."
            ),
            "",
        ]
    notes: list[str] = []
    L += [
        "| build stage | sentences | wall s | sentences/s | CPU s | sentences/s per core | peak RSS MB "
        "| size MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    if "store" in P:
        s = P["store"]
        L.append(
            f"| store (SQLite, one process) | {s['sentences']:,} | {s['seconds']:.1f} | "
            f"{s['sentences_per_second']:,.0f} | {s['cpu_seconds']:.1f} | "
            f"{s['sentences'] / s['cpu_seconds']:,.0f} | {s['peak_rss_mb']:.0f} | {s['db_mb']:.0f} |"
        )
    if "graph" in P:
        g = P["graph"]
        cpu = g["parent_cpu_seconds"] + g["workers_cpu_seconds"]
        L += [
            f"| graph, {g['workers']} workers "
            f"({g['settings']['parse']} + {g['settings']['disambiguation']}) "
            f"| {g['sentences']:,} | {g['seconds']:.1f} | {g['sentences_per_second']:,.0f} | {cpu:.1f} | "
            f"{g['sentences_per_cpu_second']:,.0f} | {g['peak_rss_mb_parent']:.0f} driver, "
            f"{g['peak_rss_mb_worker'] or 0:.0f} worker | {g['graph_db_mb']:.0f} |",
            f"| graph: parse, link, write (workers) | | | | {g['workers_cpu_seconds']:.1f} | "
            f"{g['parse_sentences_per_core_second']:,.0f} | | |",
            f"| graph: register pages, merge partitions (driver) | | | | {g['parent_cpu_seconds']:.1f} | "
            f"{g['serial_sentences_per_core_second']:,.0f} | | |",
        ]
        st = g["stage_seconds"]
        notes.append(
            f"Graph: {g['mentions']:,} mentions, {g['edges']:,} edges, {g['hub_entities']:,} entities over "
            "the hub cap (graal.hub_max_mentions); the workers' clocks, summed: parse "
            f"{st['parse']:.1f} s, link {st['link']:.1f} s, write {st['write']:.1f} s; the driver's merges "
            f"{st.get('merge', 0):.1f} s; {g['cores_busy']:.2f} cores busy on average; page tables "
            f"(page ids, numbers, alias table) {g.get('page_tables_mb', 0):.0f} MB per process."
        )
        st = proj["stages"].get("graph", {})
        if "driver_rest_bytes_per_page" in st:
            h = g["half"]
            notes.append(
                f"Graph driver: its page registration took {g['driver_register_mb']:.0f} MB at "
                f"{g['pages']:,} pages and {h['driver_register_mb']:.0f} MB at {h['pages']:,} "
                f"({h['sentences']:,} sentences, peak {h['peak_rss_mb_parent']:.0f} MB); the rest of its "
                f"peak grew {st['driver_rest_bytes_per_page']:.0f} bytes a page between the two sizes (a "
                f"negative growth counts as 0): {st['rss_gb']:.1f} GB projected at 5.4M pages with that "
                f"growth, "
                f"{st['driver_tables_only_gb']:.1f} GB if only its page tables grew."
            )
    if "bm25_add" in P:
        a, pa = P["bm25_add"], proj["bm25_add"]
        notes.append(
            f"BM25 edit (part `bm25_add`, what `garag index --add/--remove` runs on the BM25 index): "
            f"{a['dropped']:,} of {a['documents']:,} documents dropped and {a['added']:,} added, derived in "
            f"shards through disk in {a['seconds']:.1f} s, peak RSS {a['peak_rss_mb']:.0f} MB "
            f"(in memory at once: {a['oneshot']['seconds']:.1f} s, {a['oneshot']['peak_rss_mb']:.0f} MB); "
            f"projected at full FEVER {pa['rss_gb']:.1f} GB ({pa['rss_gb_oneshot']:.1f} GB at once)."
        )
    if "pages" in P:
        pg = P["pages"]
        notes.append(
            f"Page tables at full-FEVER size (part `pages`): {pg['pages']:,} page ids with distinct titles, "
            f"{pg['alias_keys']:,} alias keys: {pg['page_tables_mb']:,.0f} MB, built in "
            f"{pg['seconds']:.0f} s (every graph worker and the driver hold them)."
        )
    if "bm25" in P:
        b = P["bm25"]
        L.append(
            f"| BM25 (bm25s, {b.get('shards', 1)} shard(s), recombined sentences) | {b['sentences']:,} | "
            f"{b['build_seconds']:.1f} | "
            f"{b['build_sentences_per_second']:,.0f} | | | {b['peak_rss_mb']:.0f} | {b['index_mb']:.0f} |"
        )
    if "page_index" in P:
        pi = P["page_index"]
        for key, name in (
            ("sentence_bm25", "BM25 over the store's sentences, as `garag index` builds it"),
            ("page_index", f"pages stage: title table + page BM25 ({pi['pages']:,} pages)"),
        ):
            m = pi[key]
            L.append(
                f"| {name} (shards: {m['parallel_tokenise_cpu_seconds']:.1f} CPU s) | "
                f"{pi['sentences']:,} | {m['seconds']:.1f} | {pi['sentences'] / m['seconds']:,.0f} | "
                f"{m['cpu_seconds']:.1f} | {pi['sentences'] / m['cpu_seconds']:,.0f} | "
                f"{m['peak_rss_mb']:.0f} | {m['index_mb']:.0f} |"
            )  # fmt: skip
    if "half" in P.get("bm25", {}):
        b, st = P["bm25"], proj["stages"]["bm25"]
        v = b["vocabulary_growth"]
        notes.append(
            f"BM25 is built in {b['shards']} shards of {b['shard_docs']:,} sentences through disk "
            f"(`bm25.shard_docs`; merged term by term): peak RSS {b['peak_rss_mb']:.0f} MB at "
            f"{b['sentences']:,} sentences, {b['half']['peak_rss_mb']:.0f} MB at {b['half']['sentences']:,} "
            f"({b['half']['shards']} shards), vocabulary {b['vocabulary']:,} words.  Vocabulary growth "
            f"on the real sentences: Heaps' beta {v['heaps_beta']:.3f}, K {v['heaps_k']:.0f} "
            f"({v['vocabulary'][-1]:,} words at {v['real_sentences'][-1]:,} sentences), so about "
            f"{st['vocabulary_words'] / 1e6:.1f}M words at 25M sentences, {v['bytes_per_word']:.0f} bytes "
            f"each in the tokenizer; the build stays under 4 GB up to "
            f"{st['words_within_goal'] / 1e6:.1f}M words."
        )
    if "faiss" in P:
        d = P["faiss"]
        L.append(
            f"| MiniLM encoding, CPU ({d['encode_torch_threads']} torch threads, real sentences) "
            f"| {d['encoded_sample']:,} | | {d['encode_sentences_per_second']:,.0f} | | "
            f"{d['encode_sentences_per_core_second']:,.0f} | {d['peak_rss_mb_encoder']:.0f} | |"
        )
        for name in (k for k in ("flat", "ivf_flat", "ivf_pq", "hnsw") if k in d):
            x = d[name]
            L.append(
                f"| FAISS {name} (mixture vectors) | {d['sentences']:,} | {x['build_seconds']:.1f} | | | | "
                f"{d['peak_rss_mb']:.0f} (part) | {d['sentences'] * x['bytes_per_vector'] / 2**20:.0f} |"
            )
        gpu = d.get("encode_gpu_sentences_per_second")
        notes.append(
            f"MiniLM on a GPU: {f'{gpu:,.0f} sentences/s' if gpu else 'not measured (no GPU here)'}."
        )
    if "dense" in P:
        d = P["dense"]
        L += [
            f"| dense encode ({d['model']}, {d['dim']}-d, one process, into the embedding cache and "
            f"vectors.npy) | {d['sentences']:,} | {d['encode_seconds']:.1f} | "
            f"{d['sentences'] / d['encode_seconds']:,.0f} | {d['encode_cpu_seconds']:.1f} | "
            f"{d['encode_sentences_per_core_second']:,.0f} | {d['peak_rss_mb_encode']:.0f} | "
            f"{d['vectors_mb'] + d['embedding_cache_mb']:.0f} |",
            f"| FAISS {d['index']} as `dense.index: auto` picks it ({d['settings']}): train / add | "
            f"{d['sentences']:,} | {d['train_seconds']:.1f} / {d['add_seconds']:.1f} | | "
            f"{d['train_cpu_seconds']:.1f} / {d['add_cpu_seconds']:.1f} | | {d['peak_rss_mb']:.0f} | "
            f"{d['index_mb']:.0f} |",
        ]
    for note in notes:
        L += ["", note]
    L += ["", "| query latency, ms | p50 / p95 / mean | notes |", "| --- | ---: | --- |"]
    if "bm25" in P:
        b = P["bm25"]
        L.append(
            f"| BM25 top-100, one query at a time | {_ms(b.get('single_query_ms'))} | "
            f"{b['queries_per_second_2_threads']:.0f} queries/s batched on 2 threads |"
        )
    if "faiss" in P:
        for name in (k for k in ("flat", "ivf_flat", "ivf_pq", "hnsw") if k in P["faiss"]):
            x = P["faiss"][name]
            L.append(
                f"| FAISS {name} top-100, one query | {_ms(x.get('single_query_ms'))} | "
                f"recall@100 vs flat {x['recall@100_vs_flat']:.3f} (loss {1 - x['recall@100_vs_flat']:.3f}); "
                f"{x['queries_per_second']:,.0f} queries/s batched |"
            )
    if "graal" in P:
        q = P["graal"]
        go, cold, warm = q["graph_only"], q["rerank_cold"], q["rerank_warm"]
        L += [
            f"| GRAAL graph part: linking + paths + candidates ({go['claims']} claims) | "
            f"{_ms(go['graph_part'])} | "
            f"linking alone {_ms(go['link'])}; candidate sentences {_ms(go['candidates'])}; "
            f"{go['no_entity']} claims link no entity |",
            f"| GRAAL without the encoder (graph part + candidate text, scoring) | {_ms(go['total'])} | |",
            f"| GRAAL re-ranking, cold embedding cache ({cold['claims']} claims) | {_ms(cold['rank'])} | "
            + (
                f"candidates' vectors read from the dense index ({q['rerank_sentences_encoded']:,} texts "
                "encoded: the claims) |"
                if q.get("cold_paths")
                else f"MiniLM encodes the candidates ({q['rerank_sentences_encoded']:,} sentences, "
                f"{q['torch_threads']} torch threads): encoder time, not graph time |"
            ),
            f"| GRAAL re-ranking, warm cache (same claims) | {_ms(warm['rank'])} | "
            "vectors read from the embedding cache, as after a dense index build over the same store |",
            f"| GRAAL total, cold cache | {_ms(cold['total'])} | |",
            f"| GRAAL total, warm cache | {_ms(warm['total'])} | |",
        ]
    if "dense_query" in P:
        q = P["dense_query"]
        L.append(
            f"| FAISS {q['index']} top-100 as the retriever searches it (candidates re-scored from "
            f"vectors.npy), one query ({q['queries']} claims) | {_ms(q['search_top100_ms'])} | recall@10 / "
            f"@100 against exact search over the same real-text vectors {q['recall_at_10']:.3f} / "
            f"{q['recall_at_100']:.3f}; {q['batched_queries_per_second']:,.0f} queries/s batched; "
            f"claim encoding {q['query_encode_ms']:.2f} ms; peak RSS {q['peak_rss_mb_search']:.0f} MB"
            + (f"; `dense.ivf_nprobe` {q['nprobe']}" if q.get("nprobe") else "")
            + " |"
        )
        for x in q.get("nprobe_sweep", []):  # choosing ivf_nprobe on the tune part's claims
            L.append(
                f"| the same with nprobe {x['nprobe']}, FEVER tune part ({x['claims']} claims) | "
                f"{_ms(x['search_top100_ms'])} | recall@10 / @100 {x['recall_at_10']:.3f} / "
                f"{x['recall_at_100']:.3f} |"
            )
    cp = P.get("graal", {}).get("cold_paths")
    if cp:
        for path, what in (
            ("encoder", f"{cp['dense_model']} encodes the claim and every candidate"),
            ("vectors", "candidates' rows read from the dense index's vectors.npy (in the page cache)"),
            ("vectors_from_disk", "the same, vectors.npy evicted from the page cache before each claim"),
        ):
            x = cp[path]
            L.append(
                f"| GRAAL cold query, {path} ({cp['claims']} claims) | {_ms(x['total'])} | {what}; CPU "
                f"{_ms(x['cpu'])} ms |"
            )
    L += ["", f"## Projection to full FEVER ({FEVER_SENTENCES:,} sentences, {FEVER_PAGES:,} pages)", ""]
    if proj.get("fit"):
        L += [
            "Scaling fitted through two sizes (time ~ sentences^b; b used = max(b, 1), never sub-linear; "
            f"the other size: `{res.get('fit_from', '')}`, with `--fit-from` or `--report-only --fit-from`):",
            "",
            "| stage | measured | sentences | values | b fitted | b used |",
            "| --- | --- | --- | --- | ---: | ---: |",
        ]
        for name, f in proj["fit"].items():
            L.append(
                f"| {name} | {f['measured']} | {f['sizes'][0]:,} / {f['sizes'][1]:,} | "
                f"{f['values'][0]:.1f} / {f['values'][1]:.1f} | {f['fitted']:.3f} | {f['used']:.3f} |"
            )
        L.append("")
    L += [
        "| stage | parallelism | 1 x 2 h | 1 x 16 h | 4 x 16 h | peak RSS per process GB | disk GB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, st in proj["stages"].items():
        h = st["hours"]
        rss = f"{st['rss_gb']:.1f}" + (
            f" driver, {st['rss_gb_worker']:.1f} worker" if st.get("rss_gb_worker") else ""
        )
        disk = f"{st['disk_gb']:.1f}" if "disk_gb" in st else ""
        L.append(
            f"| {name} | {st['parallel']} | {h['1x2']:.2f} | {h['1x16']:.2f} | {h['4x16']:.2f} | {rss} "
            f"| {disk} |"
        )
    t = proj["total_hours_cpu_encoding"]
    L.append(f"| **total, CPU encoding** | | {t['1x2']:.2f} | {t['1x16']:.2f} | {t['4x16']:.2f} | | |")
    if "total_hours_gpu_encoding" in proj:
        t = proj["total_hours_gpu_encoding"]
        L.append(f"| **total, GPU encoding** | | {t['1x2']:.2f} | {t['1x16']:.2f} | {t['4x16']:.2f} | | |")
    if "faiss" in P:
        d = P["faiss"]
        sizes = [
            f"{k} {FEVER_SENTENCES * d[k]['bytes_per_vector'] / 2**30:.1f} GB"
            for k in ("flat", "ivf_flat", "ivf_pq", "hnsw")
            if k in d
        ]
        L += [
            "",
            f"FAISS index memory at 25M: {', '.join(sizes)}.  Only IVF-PQ fits the memory goal "
            "(`dense.index: ivf_pq`).  The recall above is PQ alone: the retriever re-scores its "
            "k x `dense.pq_refine` best candidates exactly from the stored vectors (memory-mapped, "
            "only the candidates' rows are read).",
        ]
    L += ["", "**Goals**" + ("" if proj["complete"] else " (incomplete: some parts not measured)") + ":", ""]
    t4 = proj["total_hours_cpu_encoding"]["4x16"]
    L.append(f"* projected full-FEVER index on 4 x 16 cores <= {GOAL_HOURS:g} h, CPU encoding: "
             + _verdict(t4, GOAL_HOURS, "h"))  # fmt: skip
    if "total_hours_gpu_encoding" in proj:
        L.append(
            f"* the same with one GPU per machine encoding, <= {GOAL_HOURS_GPU:g} h: "
            + _verdict(proj["total_hours_gpu_encoding"]["4x16"], GOAL_HOURS_GPU, "h")
        )
    over = {k: v for k, v in proj["max_rss_gb"].items() if v > GOAL_RSS_GB}
    worst = max(proj["max_rss_gb"].values(), default=None)
    L.append(
        f"* <= {GOAL_RSS_GB:g} GB RSS per worker: " + _verdict(worst, GOAL_RSS_GB, "GB")
        + ("; over: " + ", ".join(f"{k} {v:.1f} GB" for k, v in over.items()) if over else "")
    )  # fmt: skip
    if "graal" in P:
        go, warm, cold = P["graal"]["graph_only"], P["graal"]["rerank_warm"], P["graal"]["rerank_cold"]
        L += [
            f"* GRAAL query <= {GOAL_GRAAL_MS:g} ms at {n:,} sentences (p95 / p50): graph part "
            f"{_verdict(go['graph_part']['p95'], GOAL_GRAAL_MS, 'ms')} / "
            f"{_verdict(go['graph_part']['p50'], GOAL_GRAAL_MS, 'ms')}; whole query with a warm cache "
            f"{_verdict(warm['total']['p95'], GOAL_GRAAL_MS, 'ms')} / "
            f"{_verdict(warm['total']['p50'], GOAL_GRAAL_MS, 'ms')}; with a cold cache (the "
            "candidates encoded or read from the index) "
            f"{_verdict(cold['total']['p50'], GOAL_GRAAL_MS, 'ms')} at p50",
        ]
    if cp:
        L.append(
            f"* GRAAL cold query p50 <= {GOAL_GRAAL_MS:g} ms at {n:,} sentences, candidates' vectors from "
            f"the index: {_verdict(cp['vectors']['total']['p50'], GOAL_GRAAL_MS, 'ms')}; from disk "
            f"{_verdict(cp['vectors_from_disk']['total']['p50'], GOAL_GRAAL_MS, 'ms')}"
        )
    L += ["", METHOD]
    return "\n".join(L) + "\n"
