"""Retrieval quality on the embedded FEVER and HoVer data: each retriever and the fusion.

Recall@5/20/100 of complete gold evidence sets, hit rate, page recall and the
average retrieved sentences/pages, overall and (HoVer) per number of hops.
Results: ``benchmarks/results/retrieval_quality.md`` and one folder per dataset.

    python benchmarks/retrieval_quality.py [--cache DIR] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eval.retrieval_eval import evaluate_retrieval
from garag.config import load_config

OUT = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cache", default="cache", help="artifact cache (reused with `make run`)")
    ap.add_argument("--datasets", nargs="+", default=["fever", "hover"])
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    tables = []
    for name in args.datasets:
        overrides = [f"data.dataset={name}", f"paths.cache_dir={args.cache}", *args.overrides]
        config = load_config(overrides=overrides)
        result = evaluate_retrieval(config, out_dir=OUT / f"retrieval_{name}", progress=False)
        tables.append(result.table_markdown)
    command = "python benchmarks/retrieval_quality.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = "# Retrieval quality\n\nCommand: `" + command.strip() + "`\n\n" + "\n".join(tables)
    (OUT / "retrieval_quality.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
