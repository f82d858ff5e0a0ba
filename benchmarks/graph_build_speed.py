"""GRAAL graph build speed per core (issue 22): parse, link and write seconds per stage.

Builds the corpus graph of the first ``--pages`` pages of a dataset's sentence store in one
process on one core (spaCy in process, torch and BLAS limited to one thread), with a cold
embedding cache in a temporary directory (a first build encodes every disambiguation context),
and writes ``benchmarks/results/graph_build_speed.{json,md}`` (``--tag`` names the row, so that
runs before and after a change sit side by side).  ``--keep DIR`` keeps the graph database, and
``--same-as DB`` checks that the build has exactly the mentions and edges of another one.

    python benchmarks/graph_build_speed.py --cache cache --pages 3000 --tag after
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import torch  # noqa: E402

from garag.config import load_config  # noqa: E402
from pipeline.retrieval import RetrievalPipeline, build_sentence_store  # noqa: E402
from retrievers.embeddings import EmbeddingCache, SentenceEncoder  # noqa: E402
from retrievers.graal.builder import GraphBuilder
from retrievers.graal.graph_store import GraphStore  # noqa: E402
from retrievers.graal.linker import SpacyParser, word_vectors  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/graph.yaml")
    ap.add_argument("--dataset", default="fever")
    ap.add_argument(
        "--cache", default="cache", help="where the dataset's sentence store is (built if missing)"
    )
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--tag", default="current")
    ap.add_argument("--keep", type=Path, help="copy the built graph database here")
    ap.add_argument(
        "--same-as", type=Path, help="a graph database that must have the same mentions and edges"
    )
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = load_config(
        args.config, [f"data.dataset={args.dataset}", f"paths.cache_dir={args.cache}", *args.overrides]
    )
    dataset = RetrievalPipeline(cfg, progress=False).dataset
    store, _, _ = build_sentence_store(dataset, Path(args.cache), False, progress=False)
    names = store.page_names()[: args.pages]
    by_page = store.pages(names)
    pages = [(p, by_page[p]) for p in names if p in by_page]
    n = sum(len(s) for _, s in pages)
    tmp = Path(tempfile.mkdtemp(prefix="garag-graph-speed-"))
    try:
        g = cfg.graal
        encoder = SentenceEncoder(cfg.dense.model, "cpu", cfg.dense.batch_size)
        cache = EmbeddingCache(encoder, tmp)  # cold
        embed = word_vectors if g.disambiguation == "words" else cache.encode_cached
        options = {"embed": embed, "prior_weight": g.prior_weight, "exact_bonus": g.exact_bonus,
                   "own_page": g.own_page_mentions, "use_links": g.use_links}  # fmt: skip
        graph = GraphStore(tmp / "graph.db")
        parser = SpacyParser(g.spacy_model, g.frame_extractor, g.parse)
        builder = GraphBuilder(graph, parser, options, workers=1)
        builder.parser.nlp  # noqa: B018 - models load before the clock starts
        encoder.encode(["warm up"])
        started = time.perf_counter()
        stats = builder.add_pages(pages).to_dict()
        wall = time.perf_counter() - started
        same = None
        if args.same_as:
            other = GraphStore(args.same_as)
            same = other.edge_set() == graph.edge_set() and other.mention_set() == graph.mention_set()
            other.close()
        graph.close()
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(tmp / "graph.db", args.keep / "graph.db")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    row = {
        "tag": args.tag,
        "dataset": args.dataset,
        "pages": len(pages),
        "sentences": n,
        "seconds": round(wall, 2),
        "sentences_per_second_per_core": round(n / wall, 1),
        "parse_seconds": round(stats["parse_seconds"], 2),
        "link_seconds": round(stats["link_seconds"], 2),
        "write_seconds": round(stats["write_seconds"], 2),
        "mentions": stats["mentions"],
        "edges": stats["edges"],
        "same_as": None if args.same_as is None else {"db": str(args.same_as), "identical": same},
        "overrides": args.overrides,
    }
    print(json.dumps(row))
    path = args.out / "graph_build_speed.json"
    rows = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    rows = [r for r in rows if (r["tag"], r["dataset"]) != (row["tag"], row["dataset"])] + [row]
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# GRAAL graph build speed, one core (benchmarks/graph_build_speed.py)",
        "",
        "First pages of the dataset's store, one process, torch/BLAS on one thread, cold embedding cache.",
        "",
        "| tag | dataset | pages | sentences | sentences/s/core | parse s | link s | write s | mentions "
        "| edges | same graph as |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        same = (
            ""
            if r["same_as"] is None
            else f"{Path(r['same_as']['db']).parent.name}: {r['same_as']['identical']}"
        )
        lines.append(
            f"| {r['tag']} | {r['dataset']} | {r['pages']} | {r['sentences']} | "
            f"{r['sentences_per_second_per_core']} | {r['parse_seconds']} | {r['link_seconds']} | "
            f"{r['write_seconds']} | {r['mentions']} | {r['edges']} | {same} |"
        )
    (args.out / "graph_build_speed.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
