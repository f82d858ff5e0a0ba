"""The pipeline diagram shows each system's own stages, read from its config."""

from __future__ import annotations

from pathlib import Path

from eval.figures import pipeline_diagram, pipeline_stages
from garag.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_baseline_row_has_no_graph_stages():
    before, retrievers, after = pipeline_stages(load_config(CONFIGS / "baseline.yaml"))
    assert before == []
    assert retrievers == ["bm25", "dense", "pages"]
    assert [a.split("\n")[0] for a in after] == ["RRF fusion", "verifier", "verdict + evidence"]


def test_graph_row_shows_decomposition_triplets_and_fact_graph():
    before, retrievers, after = pipeline_stages(load_config(CONFIGS / "graph.yaml"))
    assert before == ["decomposition\n(rule)\nsubquestions"]
    assert "graal" in retrievers
    assert [a.split("\n")[0] for a in after] == [
        "RRF fusion",
        "triplets",
        "fact graph",
        "verifier",
        "verdict + evidence",
    ]
    assert "top-20" in after[1] and "(garag)" in after[2]


def test_llm_verifier_is_named_with_its_fallback(tmp_path):
    cfg = load_config([CONFIGS / "graph.yaml", CONFIGS / "llm.yaml"], ["linearize.triplets_per_fact=2"])
    verifier = pipeline_stages(cfg)[2][-2]
    assert verifier.startswith("verifier: LLM") and "(NLI fallback)" in verifier
    out = pipeline_diagram(
        {"baseline": load_config(CONFIGS / "baseline.yaml"), "graph-llm": cfg}, tmp_path / "p.png"
    )
    assert out.is_file() and out.stat().st_size > 1000
