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
        help="'fused' (default) or one configured retriever's name (bm25, dense, pages)",
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

    p = sub.add_parser("evaluate-retrieval", help="recall@k and hit rate of each retriever and of the fusion")
    _add_common(p)
    p.add_argument("--out", help="output directory (default: <results_dir>/retrieval/<dataset>)")
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
    print(json.dumps(out, indent=2, ensure_ascii=False))
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
    model = ensure_verifier(config, progress=not args.no_progress, force=args.force)
    meta = read_meta(verifier_artifact_dir(config)) or {}
    print(
        json.dumps(
            {
                "model": model,
                "best_val": meta.get("best_val"),
                "calibration": meta.get("calibration"),
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


def _cmd_evaluate(args: argparse.Namespace, config: Config) -> int:
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


_COMMANDS = {
    "index": _cmd_index,
    "retrieve": _cmd_retrieve,
    "evaluate-retrieval": _cmd_evaluate_retrieval,
    "train-verifier": _cmd_train_verifier,
    "predict": _cmd_predict,
    "evaluate": _cmd_evaluate,
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
