"""Does the graph re-ranking keep complete gold evidence sets in the verifier's top-5?

The graph-augmented pipeline re-ranks each claim's top-20 fused sentences over the
claim's fact graph (GA-RAG eqs. 2-4) and the NLI verifier reads the first five.
This benchmark computes every claim's pool, triplets, claim-sentence cosines and
claim entities once (configs/graph.yaml: decomposition, fusion with GRAAL,
syntactic triplets), then re-ranks with each coefficient setting of the grid and
reports R@5: the share of verifiable claims with a complete gold set in the top-5.
The fused order (no re-ranking) is the reference row.

The coefficients of configs/graph.yaml were picked from this grid, which runs on
the evaluation claims themselves (HoVer has no separate development set here):
read the comparison's graph numbers with that in mind.

Usage::

    .venv/bin/python benchmarks/graph_rerank_grid.py [--fever-sample 600] [--seed 13]
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from eval.compare import stratified_sample
from eval.retrieval_metrics import fully_supported
from garag.artifacts import write_json_atomic, write_text_atomic
from garag.config import PropagationConfig, load_config
from garag.errors import ErrorPolicy
from pipeline.graph_reasoning import rank_facts
from pipeline.linearize import ranked_evidence
from pipeline.verification import VerificationPipeline, hits_to_evidence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ALPHAS = (0.8, 0.5)
BETAS = (0.2, 0.5, 1.0, 2.0, 4.0)
LAMBDAS = ((0.7, 0.15, 0.15), (1.0, 0.0, 0.0))


def pools(dataset: str, sample: int, seed: int, part: str = "all", cache: str = "cache") -> list[tuple]:
    """(claim, pool, triplets, sims, claim entities) per verifiable claim, computed once."""
    overrides = [f"data.dataset={dataset}", f"data.part={part}", f"paths.cache_dir={cache}"]
    cfg = load_config(ROOT / "configs" / "graph.yaml", overrides)
    pipe = VerificationPipeline(cfg, progress=False).build()
    claims = [c for c in pipe.dataset.claims(ErrorPolicy(skip=True)) if c.verifiable]
    if sample:
        claims = stratified_sample(claims, sample, seed)
    rows = []
    for i in range(0, len(claims), 32):
        batch = claims[i : i + 32]
        texts = [c.text for c in batch]
        subq = [tuple(pipe.decomposer.decompose(t)) for t in texts]
        for c, r in zip(batch, pipe.retrieval.retrieve_batch(texts, extra_queries=subq), strict=True):
            pool = hits_to_evidence(r.fused, pipe.store, cfg.pipeline.evidence_pool)
            triplets = pipe.graph.extractor.extract(pool)
            sims = pipe.graph.similarity(c.text, pool)
            entities = pipe.graph.claim_entities(c.text) if pipe.graph.claim_entities else []
            rows.append((c, pool, triplets, sims, entities))
    return rows


def recall5(rows: list[tuple], prop: PropagationConfig | None) -> float:
    """R@5 of the fused order (``prop`` None) or of the graph re-ranking with ``prop``."""
    hits = 0
    for claim, pool, triplets, sims, entities in rows:
        if prop is None:
            top = [e.sentence for e in pool[:5]]
        else:
            facts = rank_facts(pool, triplets, prop, sims=sims, claim_entities=entities)
            top = [e.sentence for e in ranked_evidence(facts, pool)[:5]]
        hits += fully_supported(claim, top)
    return hits / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fever-sample", type=int, default=600, help="verifiable FEVER claims (0 = all)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--part", default="all", choices=("all", "tune", "report"), help="claims of the split")
    ap.add_argument("--cache", default="cache", help="garag's cache directory")
    args = ap.parse_args()
    suffix = "" if args.part == "all" else f"_{args.part}"
    settings: dict[str, PropagationConfig | None] = {"fused order (no re-ranking)": None}
    base = PropagationConfig()
    for a, b, lam in itertools.product(ALPHAS, BETAS, LAMBDAS):
        settings[f"garag a={a} b={b} l={lam}"] = base.replace(
            alpha=a, beta=b, lambda1=lam[0], lambda2=lam[1], lambda3=lam[2]
        )
    for b in (0.2, 2.0):
        settings[f"ppr a=0.8 b={b}"] = base.replace(method="ppr", beta=b)
    table: dict[str, dict[str, float]] = {name: {} for name in settings}
    counts = {}
    for dataset, sample in (("hover", 0), ("fever", args.fever_sample)):
        t0 = time.perf_counter()
        rows = pools(dataset, sample, args.seed, args.part, args.cache)
        counts[dataset] = len(rows)
        print(f"{dataset}: {len(rows)} claims, pools in {time.perf_counter() - t0:.0f} s", flush=True)
        for name, prop in settings.items():
            table[name][dataset] = round(recall5(rows, prop), 4)
            print(f"  {name:45s} R@5 {table[name][dataset]:.3f}", flush=True)
    lines = [
        "# Graph re-ranking: complete gold sets in the verifier's top-5",
        "",
        f"`python benchmarks/graph_rerank_grid.py --fever-sample {args.fever_sample} --seed {args.seed} "
        f"--part {args.part}`; "
        f"verifiable claims ({args.part} part): HoVer {counts['hover']}, FEVER {counts['fever']} "
        f"(stratified, seed {args.seed}). "
        "Pools: configs/graph.yaml (decomposition, fusion with GRAAL, top-20, syntactic triplets). "
        "a, b: eq. 2's alpha and beta; l: eq. 4's lambda1-3; gamma 0.5, 3 iterations.",
        "",
        "| setting | HoVer R@5 | FEVER R@5 |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {row['hover']:.3f} | {row['fever']:.3f} |" for name, row in table.items()]
    write_text_atomic(RESULTS / f"graph_rerank_grid{suffix}.md", "\n".join(lines) + "\n")
    summary = {"claims": counts, "seed": args.seed, "part": args.part, "r_at_5": table}
    write_json_atomic(RESULTS / f"graph_rerank_grid{suffix}.json", summary)
    print(f"written: {RESULTS / f'graph_rerank_grid{suffix}.md'}")


if __name__ == "__main__":
    main()
