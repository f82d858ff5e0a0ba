"""Command line: ``garag <command>`` (same as ``python run_pipeline.py <command>``)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from garag.config import Config, ConfigError, load_config
from garag.errors import InputError

logger = logging.getLogger("garag")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file (defaults apply to missing keys)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set bm25.k1=1.2 (repeatable)",
    )
    p.add_argument("--dataset", help="shortcut for --set data.dataset=NAME (fever, hover, custom)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def _add_run(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--out", help="run directory (default: <results_dir>/<dataset>-baseline[-oracle])")
    p.add_argument(
        "--oracle", action="store_true", help="give the verifier the gold evidence (retrieval oracle)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="garag", description="Graph-augmented RAG for fact verification.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("index", help="build (or reuse) the sentence store and every configured index")
    _add_common(p)
    p.add_argument("--force", action="store_true", help="rebuild even when the artifacts exist")

    p = sub.add_parser("retrieve", help="retrieve evidence for one claim; prints JSON")
    _add_common(p)
    p.add_argument("claim", help="the claim text")
    p.add_argument("-k", type=int, default=10, help="number of hits (default 10)")
    p.add_argument(
        "--retriever",
        default="fused",
        help="'fused' (default) or one configured retriever's name (bm25, dense, pages, graal)",
    )

    p = sub.add_parser(
        "train-verifier", help="train garag's NLI verifier on FEVER train pairs (reused after)"
    )
    _add_common(p)
    p.add_argument("--force", action="store_true", help="retrain even when a trained model exists")

    p = sub.add_parser(
        "predict", help="verify every claim of the dataset; writes predictions.jsonl (resumable)"
    )
    _add_run(p)

    p = sub.add_parser(
        "evaluate", help="predict (resuming) and score: accuracy, FEVER score, evidence P/R/F1"
    )
    _add_run(p)
    p.add_argument("--predictions", help="only re-score this saved predictions.jsonl (runs no model)")
    p.add_argument("--run", help="only re-score this compare run (id under results/ or a path; no model)")

    p = sub.add_parser("compare", help="run configs on the same claims: metrics, significance, report")
    p.add_argument("--configs", nargs="+", required=True, help="config files, baseline first")
    p.add_argument("--claims", help="claims file used by every config (default: each config's data.claims)")
    p.add_argument("--dataset", help="dataset for every config (fever, hover, custom)")
    p.add_argument("--sample", type=int, help="draw N claims stratified by label")
    p.add_argument("--seed", type=int, default=13, help="sampling and bootstrap seed (default 13)")
    p.add_argument("--run-id", help="results sub-directory (default: from dataset, configs, sample, seed)")
    p.add_argument("--batch-size", type=int, default=32, help="claims per pipeline batch (default 32)")
    p.add_argument("--no-faithfulness", action="store_true", help="skip the NLI check of explanations")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a value in every config (repeatable)")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.set_defaults(config=None)

    p = sub.add_parser("evaluate-retrieval", help="recall@k and hit rate of each retriever and of the fusion")
    _add_common(p)
    p.add_argument("--out", help="output directory (default: <results_dir>/retrieval/<dataset>)")

    p = sub.add_parser("subgraph", help="write one claim's GRAAL subgraph (vertices, edges, frames) as JSON")
    _add_common(p)
    p.add_argument("claim", help="the claim text")
    p.add_argument("--out", help="output JSON file (default: print to stdout)")
    p.add_argument("--max-edges", type=int, default=500, help="at most this many edges (default 500)")

    p = sub.add_parser(
        "llm-model", help="assemble (once) and verify the local GGUF of llm.model; prints its path and sha256"
    )
    _add_common(p)
    return parser


def _config(args: argparse.Namespace) -> Config:
    overrides = list(args.overrides)
    if args.dataset:
        overrides.insert(0, f"data.dataset={args.dataset}")
    return load_config(args.config, overrides)


def _cmd_index(args: argparse.Namespace, config: Config) -> int:
    from pipeline.retrieval import RetrievalPipeline

    pipe = RetrievalPipeline(config, progress=not args.no_progress)
    artifacts = pipe.build(force=args.force)
    print(json.dumps({name: str(path) for name, path in artifacts.items()}, indent=2))
    return 0


def _cmd_retrieve(args: argparse.Namespace, config: Config) -> int:
    from pipeline.retrieval import RetrievalPipeline

    if not args.claim.strip():
        raise ValueError("the claim is empty")
    pipe = RetrievalPipeline(config, progress=not args.no_progress)
    pipe.build()
    result = pipe.retrieve(args.claim, k=args.k)
    if args.retriever == "fused":
        hits = result.fused
    elif args.retriever in result.per_retriever:
        hits = result.per_retriever[args.retriever][: args.k]
    else:
        raise ValueError(
            f"--retriever {args.retriever!r} is not configured (have: fused, {', '.join(pipe.retrievers)})"
        )
    assert pipe.store is not None
    texts = {s.id: s.text for s in (pipe.store.get(h.sentence) for h in hits) if s is not None}
    out = {
        "claim": args.claim,
        "retriever": args.retriever,
        "hits": [
            {
                "page": h.sentence.page,
                "line": h.sentence.line,
                "score": h.score,
                "retriever": h.retriever,
                "sources": list(h.sources),
                "text": texts.get(h.sentence, ""),
            }
            for h in hits
        ],
        "seconds": result.seconds,
    }
    if args.retriever == "graal":
        out["hits"] = _graal_paths(pipe.retrievers["graal"], args.claim, args.k, texts)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


def _graal_paths(retriever, claim: str, k: int, texts: dict) -> list[dict]:  # noqa: ANN001
    """GRAAL hits with the paths (entities and edges) that brought them."""
    out = []
    for gh in retriever.retrieve_with_paths(claim, k):
        h = gh.hit
        out.append(
            {
                "page": h.sentence.page,
                "line": h.sentence.line,
                "score": h.score,
                "text": texts.get(h.sentence) or "",
                "paths": [
                    {
                        "reason": p.reason,
                        "entities": list(p.entities),
                        "edges": [[e.u, e.v, e.frame] for e in p.edges],
                    }
                    for p in gh.provenance
                ],
            }
        )
    return out


def _cmd_subgraph(args: argparse.Namespace, config: Config) -> int:
    from garag.artifacts import write_json_atomic
    from pipeline.retrieval import RetrievalPipeline

    if not args.claim.strip():
        raise ValueError("the claim is empty")
    if "graal" not in config.retrieval.retrievers:
        config.retrieval.retrievers = [*config.retrieval.retrievers, "graal"]
    pipe = RetrievalPipeline(config, progress=not args.no_progress)
    pipe.build()
    sub = pipe.retrievers["graal"].subgraph(args.claim, max_edges=args.max_edges)  # type: ignore[attr-defined]
    if args.out:
        write_json_atomic(args.out, sub)
        print(f"written: {args.out}")
    else:
        print(json.dumps(sub, indent=2, ensure_ascii=False))
    return 0


def _cmd_evaluate_retrieval(args: argparse.Namespace, config: Config) -> int:
    from eval.retrieval_eval import evaluate_retrieval

    report = evaluate_retrieval(config, out_dir=args.out, progress=not args.no_progress)
    print(report.table_markdown)
    print(f"\nwritten: {report.out_dir}")
    return 0


def _run_dir(args: argparse.Namespace, config: Config) -> Path:
    if args.out:
        return Path(args.out)
    name = f"{config.data.dataset}-baseline" + ("-oracle" if args.oracle else "")
    return Path(config.paths.results_dir) / name


def _cmd_train_verifier(args: argparse.Namespace, config: Config) -> int:
    from garag.artifacts import read_meta
    from pipeline.train_verifier import ensure_verifier, verifier_artifact_dir

    if config.verifier.model:
        raise ValueError("verifier.model is set: garag trains its own verifier only when it is empty")
    from verifier.claim_aggregator import read_aggregator

    model = ensure_verifier(config, progress=not args.no_progress, force=args.force)
    meta = read_meta(verifier_artifact_dir(config)) or {}
    aggregator = read_aggregator(model)
    print(
        json.dumps(
            {
                "model": model,
                "best_val": meta.get("best_val"),
                "calibration": meta.get("calibration"),
                "claim_aggregator": aggregator.info if aggregator is not None else None,
                "train_seconds": meta.get("train_seconds"),
                "data": meta.get("data"),
            },
            indent=2,
        )
    )
    return 0


def _cmd_predict(args: argparse.Namespace, config: Config) -> int:
    from eval.verification_eval import run_predictions

    out = _run_dir(args, config)
    outcome = run_predictions(config, out, oracle=args.oracle, progress=not args.no_progress)
    print(
        json.dumps(
            {
                "predictions": str(outcome.predictions),
                "written": outcome.written,
                "resumed": outcome.resumed,
                "skipped": outcome.skipped,
                "claims_per_second": round(outcome.claims_per_second, 2),
            },
            indent=2,
        )
    )
    return 0


def _cmd_compare(args: argparse.Namespace, config: Config) -> int:
    from eval.compare import compare
    from eval.report import headline_table, significance_table

    outcome = compare(
        args.configs,
        claims_file=args.claims,
        dataset=args.dataset,
        sample=args.sample,
        seed=args.seed,
        run_id=args.run_id,
        results_dir=config.paths.results_dir,
        overrides=args.overrides,
        progress=not args.no_progress,
        batch_size=args.batch_size,
        faithfulness=not args.no_faithfulness,
    )
    print(headline_table(outcome.metrics))
    print(significance_table(outcome.metrics))
    print(json.dumps({"written": outcome.written, "resumed": outcome.resumed}))
    print(f"report: {outcome.run_dir / 'report.md'}")
    return 0


def _cmd_rescore(args: argparse.Namespace, config: Config) -> int:
    from eval.compare import rescore, resolve_run_dir
    from eval.report import headline_table, significance_table

    run_dir = resolve_run_dir(args.run, config.paths.results_dir)
    metrics = rescore(run_dir)
    print(headline_table(metrics))
    print(significance_table(metrics))
    print(f"report: {run_dir / 'report.md'}")
    return 0


def _cmd_evaluate(args: argparse.Namespace, config: Config) -> int:
    if args.run:
        return _cmd_rescore(args, config)
    from eval.verification_eval import records_from_file, run_predictions, score_records, write_metrics
    from garag.datasets import get_dataset

    dataset = get_dataset(
        config.data.dataset, config.data.claims, config.data.corpus, config.data.claim_format
    )
    if args.predictions:
        path = Path(args.predictions)
        out = path.parent
    else:
        out = _run_dir(args, config)
        outcome = run_predictions(config, out, oracle=args.oracle, progress=not args.no_progress)
        path = outcome.predictions
        if outcome.skipped:
            print(f"skipped: {outcome.skipped}", file=sys.stderr)
    metrics = score_records(dataset, records_from_file(path), config.eval.ks)
    name = "oracle evidence" if args.oracle else "open retrieval"
    print(write_metrics(out, name, metrics))
    print(f"written: {out}")
    return 0


def _cmd_llm_model(args: argparse.Namespace, config: Config) -> int:
    from garag.llm.models import resolve_model_file

    if config.llm.backend != "llama_cpp":
        raise ValueError(f"llm-model needs llm.backend=llama_cpp (configured: {config.llm.backend!r})")
    mf = resolve_model_file(config.llm.model, config.paths.cache_dir)
    out = {"model": mf.name, "path": str(mf.path), "sha256": mf.sha256, "bytes": mf.size}
    print(json.dumps(out, indent=2))
    return 0


_COMMANDS = {
    "llm-model": _cmd_llm_model,
    "index": _cmd_index,
    "retrieve": _cmd_retrieve,
    "subgraph": _cmd_subgraph,
    "evaluate-retrieval": _cmd_evaluate_retrieval,
    "train-verifier": _cmd_train_verifier,
    "predict": _cmd_predict,
    "evaluate": _cmd_evaluate,
    "compare": _cmd_compare,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = _config(args)
        return _COMMANDS[args.command](args, config)
    except (ConfigError, InputError, ValueError, FileNotFoundError) as e:
        print(f"garag: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
