"""Command line: ``garag <command>`` (same as ``python run_pipeline.py <command>``).

Parses arguments, loads the config, configures logging (only here) and turns
every user error into one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from app.commands import COMMANDS, own_overrides, with_edit_flags
from garag.config import ConfigError, load_config
from garag.errors import InputError

logger = logging.getLogger("garag")
VERBOSE_HELP = "garag's debug messages and other libraries' info messages"


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", metavar="FILE[+FILE...]",
        help="YAML config file, or files stacked with '+' (each later one overrides; defaults apply to "
        "missing keys), e.g. configs/graph.yaml+configs/joint.yaml",
    )  # fmt: skip
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="[NAME:]KEY=VALUE",
        help="override a config value, e.g. --set bm25.k1=1.2 (repeatable); NAME: (the config's name, its "
        "files' stems joined by '-') as in compare",
    )
    p.add_argument("--dataset", help="shortcut for --set data.dataset=NAME (fever, hover, custom)")
    _add_part(p)
    p.add_argument(
        "--add", dest="add_pages", action="append", default=[], metavar="PAGES",
        help="add this wiki-pages file's pages to the corpus, replacing pages with the same id, after "
        "data.add_pages (repeatable); indexes are derived from the corpus without it when built",
    )  # fmt: skip
    p.add_argument(
        "--remove", dest="remove_pages", action="append", default=[], metavar="IDS",
        help="remove the pages this file names (one page id per line) from the corpus (repeatable)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def _add_part(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--part",
        choices=("all", "tune", "report"),
        help="shortcut for --set data.part=PART: only the tune or report part of the split (data/splits/)",
    )


def _add_run(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--out", help="run directory (default: <results_dir>/<dataset>-baseline[-oracle])")
    p.add_argument(
        "--oracle", action="store_true", help="give the verifier the gold evidence (retrieval oracle)"
    )
    p.add_argument(
        "--force-new",
        action="store_true",
        help="when --out holds predictions made from other settings, claims, corpus or model: set them "
        "aside (renamed *.stale-TIME) and start again instead of refusing",
    )


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (argparse prints the usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"garag: error: {message} (see: {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="garag", description="Graph-augmented RAG for fact verification.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "config", help="print the resolved config as YAML, each value with its source (file, --set, default)"
    )
    _add_common(p)

    p = sub.add_parser("index", help="build (or reuse) the sentence store and every configured index")
    _add_common(p)
    p.add_argument("--force", action="store_true", help="rebuild even when the artifacts exist")
    p.add_argument(
        "--engine", choices=("local", "ray"), default="local",
        help="where the index builds' workers run: this machine's processes (graal.workers, "
        "bm25.workers) or Ray actors (the scale extra); the artifacts are the same",
    )  # fmt: skip
    p.add_argument("--ray-address", help="a Ray cluster to join (default: start a local Ray)")
    p.add_argument(
        "--ray-workers", type=_positive_int,
        help="Ray actors per pool (default: the cluster's CPUs, less one while the driver links; "
        "for dense encoding its GPUs, when it has any)",
    )  # fmt: skip

    p = sub.add_parser(
        "verify",
        help="verify claims given as text: label, explanation and evidence (trains the verifier first "
        "if it is not yet)",
    )
    _add_common(p)
    p.add_argument("claims", nargs="*", metavar="CLAIM", help="claim texts (default: one per line on stdin)")
    p.add_argument("--json", action="store_true", help="one JSON object per claim (JSON Lines)")
    p.add_argument(
        "--batch-size", type=_positive_int, default=32, help="claims per pipeline batch (default 32)"
    )

    p = sub.add_parser(
        "contrast",
        help="write a contrast set: the dataset's claims (of --part) and their twins made by changes "
        "that keep every name, as a claims file for evaluate and compare",
    )
    _add_common(p)
    p.add_argument("--out", required=True, help="the claims file to write (JSON Lines, the dataset's format)")
    p.add_argument(
        "--kinds",
        default="negation,negation_removed,number,role_swap,relation",
        help="changes to apply, comma-separated (default: the name-keeping ones; add entity for entity "
        "substitution)",
    )
    p.add_argument("--seed", type=int, default=13, help="seed of the changes (default 13)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")

    p = sub.add_parser("retrieve", help="retrieve evidence for one claim; prints JSON")
    _add_common(p)
    p.add_argument("claim", help="the claim text")
    p.add_argument("-k", type=_positive_int, default=10, help="number of hits (default 10)")
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
    p.add_argument(
        "--configs", nargs="+", required=True, metavar="FILE[+FILE...]",
        help="configs, baseline first: each a file or files stacked with '+', named by their stems joined by "
        "'-' (configs/graph.yaml+configs/joint.yaml: graph-joint)",
    )  # fmt: skip
    p.add_argument("--claims", help="claims file used by every config (default: each config's data.claims)")
    p.add_argument("--dataset", help="dataset for every config (fever, hover, custom)")
    _add_part(p)
    p.add_argument("--sample", type=_positive_int, help="draw N claims stratified by label")
    p.add_argument("--seed", type=int, default=13, help="sampling and bootstrap seed (default 13)")
    p.add_argument("--run-id", help="results sub-directory (default: from dataset, configs, sample, seed)")
    p.add_argument(
        "--batch-size", type=_positive_int, default=32, help="claims per pipeline batch (default 32)"
    )
    p.add_argument("--no-faithfulness", action="store_true", help="skip the NLI check of explanations")
    p.add_argument(
        "--force-new",
        action="store_true",
        help="set aside a run made from other settings, claims, corpus or model files and start again",
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="[NAME:]KEY=VALUE",
                   help="override a value in every config, or with NAME: in the config of that name "
                   "(repeatable)")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.set_defaults(config=None)

    p = sub.add_parser(
        "serve",
        help="the verification service and web page (needs the serve extra: pip install garag[serve])",
    )
    p.add_argument(
        "--configs", nargs="+", default=["configs/baseline.yaml", "configs/graph.yaml"],
        metavar="FILE[+FILE...]",
        help="configs to load (files stacked with '+' are named by their stems joined by '-'; default: "
        "configs/baseline.yaml configs/graph.yaml)",
    )  # fmt: skip
    p.add_argument(
        "--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others need GARAG_API_KEY)"
    )
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--allowed-host", dest="allowed_hosts", action="append", default=[], metavar="NAME",
        help="a name clients may reach the server by (the Host header), besides the loopback names and "
        "--host (repeatable)",
    )  # fmt: skip
    p.add_argument("--results-dir", help="where compare runs are browsed (default: paths.results_dir)")
    p.add_argument(
        "--max-batch", type=_positive_int, default=64, help="claims per batch request (default 64)"
    )
    p.add_argument(
        "--micro-batch", type=_positive_int, default=16, help="most claims per verifier batch (default 16)"
    )
    p.add_argument(
        "--max-queue",
        type=_positive_int,
        default=256,
        help="most claims waiting per config; more get 429 with Retry-After (default 256)",
    )
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=50.0,
        help="the longest a batch waits for more requests; it stops once 3 ms pass without one (default 50)",
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    p.add_argument(
        "--keep-alive", type=float, default=75.0, metavar="SECONDS",
        help="how long an idle connection is kept open for its next request (default 75: longer than "
        "a proxy's usual idle timeout, and than the seconds a flood can hold the event loop, which "
        "with uvicorn's own 5 closed connections whose next request was already sent)",
    )  # fmt: skip
    p.add_argument(
        "--max-body", type=_positive_int, default=256 * 1024, help="request body bytes (default 256 KiB)"
    )
    p.add_argument(
        "--max-upload", type=_positive_int, default=64 * 1024 * 1024,
        help="bytes of an uploaded claims file or wiki-pages file (default 64 MiB)",
    )  # fmt: skip
    p.add_argument(
        "--state-dir",
        help="where jobs, history and uploaded pages are kept across restarts (default: RESULTS_DIR/serve)",
    )
    p.add_argument(
        "--no-history", action="store_true",
        help="keep no history of the claims verified (default: STATE_DIR/history.sqlite)",
    )  # fmt: skip
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="[NAME:]KEY=VALUE",
                   help="override a value in every config, or with NAME: in the config of that name "
                   "(repeatable)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.set_defaults(config=None, no_progress=True)

    p = sub.add_parser("evaluate-retrieval", help="recall@k and hit rate of each retriever and of the fusion")
    _add_common(p)
    p.add_argument("--out", help="output directory (default: <results_dir>/retrieval/<dataset>)")

    p = sub.add_parser("subgraph", help="write one claim's GRAAL subgraph (vertices, edges, frames) as JSON")
    _add_common(p)
    p.add_argument("claim", help="the claim text")
    p.add_argument("--out", help="output JSON file (default: print to stdout)")
    p.add_argument(
        "--max-edges", type=_positive_int, default=500, help="at most this many edges (default 500)"
    )

    p = sub.add_parser(
        "split",
        help="write the tune/report split of the dataset's claims (groups sharing a gold page); once",
    )
    _add_common(p)
    p.add_argument("--tune-fraction", type=float, default=0.4, help="share of claims in tune (default 0.4)")
    p.add_argument("--seed", type=int, default=2026, help="seed of the group order (default 2026)")
    p.add_argument("--out", help="split file (default: data/splits/<dataset>.json, or data.split)")
    p.add_argument("--force", action="store_true", help="overwrite an existing split file")

    p = sub.add_parser(
        "llm-model", help="assemble (once) and verify the local GGUF of llm.model; prints its path and sha256"
    )
    _add_common(p)
    return parser


# garag's own top-level packages (pyproject.toml's packages.find): they log at INFO, -v at DEBUG
OWN_LOGGERS = ("garag", "app", "pipeline", "retrievers", "verifier", "training", "eval", "prompts")


def configure_logging(*, verbose: bool, progress: bool) -> None:
    """garag's messages at INFO (DEBUG with ``-v``); other libraries' at WARNING (INFO with ``-v``),
    so that faiss's loader, sentence-transformers and transformers do not fill the console.

    Without progress bars (``--no-progress``) the Hugging Face libraries' bars (a model's "Loading
    weights") are off too, unless ``HF_HUB_DISABLE_PROGRESS_BARS`` is set already: it is read when
    they are first imported, which the commands do later.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)
    if not progress:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed on one line
        return e.code if isinstance(e.code, int) else 2
    configure_logging(verbose=args.verbose, progress=not getattr(args, "no_progress", False))
    try:
        config = with_edit_flags(load_config(args.config, own_overrides(args)), args)
        return COMMANDS[args.command](args, config)
    except KeyboardInterrupt:
        print("garag: interrupted (a rerun resumes where this one stopped)", file=sys.stderr)
        return 130
    except (
        ConfigError,
        InputError,
        ValueError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
    ) as e:
        if args.debug:
            raise
        print(f"garag: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if args.debug:
            raise
        print(
            f"garag: internal error: {type(e).__name__}: {_one_line(e)} (--debug shows the traceback)",
            file=sys.stderr,
        )
        return 1


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
