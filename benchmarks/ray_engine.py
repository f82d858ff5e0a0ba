"""The graph build on Ray against the process engine (issue 54, "Ray used as Ray").

Builds the corpus graph of the first ``--pages`` pages of a dataset's sentence store with the
graph config's settings, in partitions of ``--partition-sentences``, four ways: ``graal.workers``
processes; a local Ray sized from this machine's CPUs; a Ray cluster of three nodes on this
machine (``ray.cluster_utils.Cluster``: a head with no CPU for actors and ``--nodes`` nodes of one
CPU); the same cluster losing a node after the first partition is merged.  Every graph must equal
the process engine's.  Writes ``benchmarks/results/ray_engine.{json,md}``.

    python benchmarks/ray_engine.py --cache /work/gc --pages 3000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

from garag.config import load_config  # noqa: E402
from pipeline.retrieval import RetrievalPipeline, build_sentence_store  # noqa: E402
from retrievers.graal.builder import GraphBuilder  # noqa: E402
from retrievers.graal.graph_store import GraphStore  # noqa: E402
from retrievers.graal.linker import SpacyParser, word_vectors  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"


class _Builder(GraphBuilder):
    """Calls ``after_first_merge()`` once the first partition is merged (to lose a node there)."""

    after_first_merge = staticmethod(lambda: None)

    def _merge(self, out: Path, result) -> None:  # noqa: ANN001
        super()._merge(out, result)
        hook, self.after_first_merge = self.after_first_merge, staticmethod(lambda: None)
        hook()


def _build(path: Path, pages: list, cfg, args, engine=None, hook=None) -> tuple[GraphStore, float]:  # noqa: ANN001
    g = cfg.graal
    options = {"embed": word_vectors, "prior_weight": g.prior_weight, "exact_bonus": g.exact_bonus,
               "own_page": g.own_page_mentions, "use_links": g.use_links}  # fmt: skip
    graph = GraphStore(path)
    parser = SpacyParser(g.spacy_model, g.frame_extractor, g.parse)
    builder = _Builder(
        graph, parser, options, args.workers, engine=engine, partition_sentences=args.partition_sentences
    )
    if hook is not None:
        builder.after_first_merge = hook
    started = time.perf_counter()
    builder.add_pages(pages)
    return graph, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/graph.yaml")
    ap.add_argument("--dataset", default="fever")
    ap.add_argument("--cache", default="cache", help="where the dataset's store is (built if missing)")
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--partition-sentences", type=int, default=500)
    ap.add_argument("--workers", type=int, default=2, help="processes of the process engine")
    ap.add_argument("--nodes", type=int, default=2, help="worker nodes of the cluster, one CPU each")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    import ray
    from ray.cluster_utils import Cluster

    from retrievers.graal.ray_engine import RayEngine

    cfg = load_config(args.config, [f"data.dataset={args.dataset}", f"paths.cache_dir={args.cache}"])
    if cfg.graal.disambiguation != "words":
        raise SystemExit("this benchmark builds partitions: graal.disambiguation must be words")
    dataset = RetrievalPipeline(cfg, progress=False).dataset
    store, _, _ = build_sentence_store(dataset, Path(args.cache), False, progress=False)
    names = store.page_names()[: args.pages]
    by_page = store.pages(names)
    pages = [(p, by_page[p]) for p in names if p in by_page]
    n = sum(len(s) for _, s in pages)
    tmp = Path(tempfile.mkdtemp(prefix="garag-ray-bench-"))
    rows: list[dict] = []

    def row(name: str, graph: GraphStore, wall: float, pool=None, start: float = 0.0) -> None:  # noqa: ANN001
        same = graph.edge_set() == ref.edge_set() and graph.mention_set() == ref.mention_set()
        rows.append({
            "build": name, "start_seconds": round(start, 2), "seconds": round(wall, 2),
            "sentences_per_second": round(n / wall, 1),
            "actors": None if pool is None else len(pool.actors),
            "nodes_used": None if pool is None else len(pool.nodes),
            "actors_lost": None if pool is None else len(pool.lost),
            "tasks_sent_again": None if pool is None else pool.resent,
            "same_graph": same,
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)

    try:
        ref, wall = _build(tmp / "process.db", pages, cfg, args)
        row(f"{args.workers} processes (graal.workers)", ref, wall)
        started = time.perf_counter()
        with RayEngine() as engine:
            start = time.perf_counter() - started
            graph, wall = _build(tmp / "ray-local.db", pages, cfg, args, engine)
            row("local Ray, sized from the CPUs", graph, wall, engine.pools[0], start)
        started = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for _ in range(args.nodes):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        start = time.perf_counter() - started
        try:
            with RayEngine() as engine:
                graph, wall = _build(tmp / "cluster.db", pages, cfg, args, engine)
                row(f"cluster: head + {args.nodes} nodes x 1 CPU", graph, wall, engine.pools[0], start)
            victim = next(iter(cluster.worker_nodes))
            with RayEngine() as engine:
                graph, wall = _build(
                    tmp / "cluster-lost.db", pages, cfg, args, engine, lambda: cluster.remove_node(victim)
                )
                row("the same, a node lost after the first partition", graph, wall, engine.pools[0])
        finally:
            ray.shutdown()
            cluster.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "dataset": args.dataset, "pages": len(pages), "sentences": n,
        "partition_sentences": args.partition_sentences, "cpus": os.cpu_count(),
        "load_average_after": os.getloadavg()[0],
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rows": rows,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ray_engine.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# The graph build on Ray (benchmarks/ray_engine.py)",
        "",
        f"First {len(pages):,} pages of {args.dataset} ({n:,} sentences), `{args.config}` (parse "
        f"{cfg.graal.parse}, disambiguation words), partitions of {args.partition_sentences:,} "
        f"sentences, on a machine of {os.cpu_count()} cores shared with other jobs (load average "
        f"{result['load_average_after']:.1f} at the end): compare rows of one run only.",
        "",
        "Ray's start (a local Ray, or the cluster and joining it) is timed apart from the build; "
        "the build's wall time includes starting the workers (spawned processes, or actors) and "
        "loading their models. Ray runs its workers at nice 19.",
        "",
        "| build | Ray start s | build wall s | sentences/s | actors | nodes used | actors lost "
        "| tasks sent again | same graph |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        cells = [r["actors"], r["nodes_used"], r["actors_lost"], r["tasks_sent_again"]]
        lines.append(
            f"| {r['build']} | {r['start_seconds'] or ''} | {r['seconds']} | {r['sentences_per_second']} | "
            + " | ".join("" if c is None else str(c) for c in cells)
            + f" | {r['same_graph']} |"
        )
    (args.out / "ray_engine.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
