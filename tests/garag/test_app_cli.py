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
