"""The command line (app.cli.main) on config handling: one-line errors, `garag config`."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from garag.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_config_prints_the_resolved_config_with_sources(tmp_path: Path, capsys) -> None:
    graph = CONFIGS / "graph.yaml"
    assert main(["config", "--config", str(graph), "--dataset", "hover", "--set", "bm25.k1=1.2"]) == 0
    out = capsys.readouterr().out
    assert "  k1: 1.2  # --set bm25.k1=1.2\n" in out
    assert "  dataset: hover  # --set data.dataset=hover\n" in out
    assert f"  mode: graph  # {graph}\n" in out
    assert "  b: 0.75  # default\n" in out
    back = tmp_path / "resolved.yaml"
    back.write_text(out)
    assert load_config(back) == load_config(graph, ["data.dataset=hover", "bm25.k1=1.2"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--set", "retrieval.k=0"], "garag: error: retrieval.k: must be >= 1, got 0"),
        (["--set", "fusion.rrf_k=.inf"], "garag: error: fusion.rrf_k: must be a finite number, got inf"),
        (
            ["--set", "verifier.max_length=8"],
            "garag: error: verifier.max_length: must be in [16, 8192], got 8",
        ),
        (["--set", "bm25.nope=1"], "garag: error: bm25: unknown key(s) ['nope'] (known: "),
        (["--config", "missing.yaml"], "garag: error: missing.yaml: config file not found"),
    ],
)
def test_bad_config_is_one_line_and_exit_code_2(argv: list[str], message: str, capsys) -> None:
    assert main(["config", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), captured.err


def _index_in_a_new_process(tmp_path: Path, *flags: str) -> str:
    """`garag index` of the test corpus with BM25 and dense (faiss, sentence-transformers, MiniLM)
    in a fresh interpreter, so that logging is configured as a user's command gets it; its stderr."""
    import os
    import subprocess
    import sys

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    settings = [
        "data.dataset=custom", f"data.claims={fixtures / 'claims.jsonl'}",
        f"data.corpus={fixtures / 'wiki-pages'}", f"paths.cache_dir={tmp_path}",
        "retrieval.retrievers=[bm25, dense]", "dense.device=cpu",
    ]  # fmt: skip
    argv = ["index", *flags, *(x for s in settings for x in ("--set", s))]
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main(sys.argv[1:]))", *argv],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.slow
def test_other_libraries_info_messages_and_bars_show_only_when_asked(tmp_path: Path) -> None:
    quiet = _index_in_a_new_process(tmp_path, "--no-progress")
    assert " INFO garag.artifacts: dense: " in quiet  # garag's own messages stay
    assert " INFO retrievers.embeddings: embedding model " in quiet
    for other in (" faiss.loader: ", " sentence_transformers.", "ModuleNotFoundError", "Loading weights"):
        assert other not in quiet, (other, quiet)
    verbose = _index_in_a_new_process(tmp_path, "--no-progress", "-v")  # the indexes are reused now
    assert " INFO sentence_transformers." in verbose and " INFO garag.artifacts: dense: reusing " in verbose
    assert "Loading weights" not in verbose
    assert "Loading weights" in _index_in_a_new_process(tmp_path)  # bars on: the model's too
