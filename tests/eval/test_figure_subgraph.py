"""GRAAL's subgraph export is drawn as an evidence graph with the predicted evidence marked."""

from __future__ import annotations

import json

from eval.compare import FIGURE_GRAPHS, export_subgraphs, figure_candidates
from eval.figures import evidence_graph, graal_subgraph_for_figure
from garag.types import Claim

GRAAL_EXPORT = {
    "claim": "The Beatles were formed in England.",
    "vertices": [
        {"id": "The_Beatles", "role": "claim", "hub": False, "mentions": 3},
        {"id": "England", "role": "claim", "hub": False, "mentions": 5},
        {"id": "Liverpool", "role": "between", "hub": False, "mentions": 4},
    ],
    "edges": [
        {"u": "The_Beatles", "v": "Liverpool", "page": "The_Beatles", "line": 0, "frame": 1},
        {"u": "Liverpool", "v": "England", "page": "Liverpool", "line": 2, "frame": 0},
    ],
}


def test_graal_export_converts_and_marks_decisive_edges(tmp_path):
    fig = graal_subgraph_for_figure(GRAAL_EXPORT, {("Liverpool", 2)})
    assert [v["role"] for v in fig["vertices"]] == ["claim-entity", "claim-entity", "between"]
    assert [(e["source"], e["target"], e["sentence"], e["decisive"]) for e in fig["edges"]] == [
        ("The_Beatles", "Liverpool", ["The_Beatles", 0], False),
        ("Liverpool", "England", ["Liverpool", 2], True),
    ]
    out = evidence_graph(fig, tmp_path / "g.png")
    assert out.is_file() and out.stat().st_size > 1000


def test_figure_format_passes_through():
    already = {"vertices": [], "edges": [{"source": "a", "target": "b", "sentence": ["a", 0]}]}
    assert graal_subgraph_for_figure(already) == already


def test_graph_without_edges_is_drawn_with_a_note(tmp_path):
    lone = {"claim": "Tool is an artist.", "vertices": [{"id": "Tool_(band)", "role": "claim"}], "edges": []}
    out = evidence_graph(graal_subgraph_for_figure(lone), tmp_path / "lone.png")
    assert out.is_file() and out.stat().st_size > 1000


class FakeGraphPipeline:
    """Fake: stands in for a built graph pipeline; only its ``subgraph(claim_text)`` is used.
    Claims whose text contains "linked" get one edge, the others none."""

    def __init__(self):
        self.asked: list[str] = []

    def subgraph(self, text: str) -> dict:
        self.asked.append(text)
        if "linked" not in text:
            return {"vertices": [{"id": "A", "role": "claim"}], "edges": []}
        return {
            "vertices": [{"id": "A", "role": "claim"}, {"id": "B", "role": "claim"}],
            "edges": [{"u": "A", "v": "B", "page": "A", "line": 0, "frame": 0}],
        }


def test_figure_claims_prefer_examples_then_wins_then_subgraphs_with_edges(tmp_path):
    claims = [Claim(i, f"claim {i}" + (" linked" if i in (2, 5, 6, 7, 8) else "")) for i in range(10)]
    metrics = {
        "examples": [{"id": 1}, {"id": 2}],
        "paired": [{"a": "baseline", "b": "graph", "only_one_right": {"only_a": [3], "only_b": [9, 5]}}],
    }
    assert [c.id for c in figure_candidates(claims, metrics, "graph")] == [1, 2, 9, 5, 0, 3, 4, 6, 7, 8]
    assert [c.id for c in figure_candidates(claims, metrics, "baseline")][:3] == [1, 2, 3]

    fake = FakeGraphPipeline()
    assert export_subgraphs(tmp_path, {"graph": fake, "baseline": object()}, claims, metrics) == FIGURE_GRAPHS
    saved = sorted(int(p.stem) for p in (tmp_path / "subgraphs" / "graph").glob("*.json"))
    assert saved == [2, 5, 6, 7]  # the four with an edge, found in candidate order
    assert not (tmp_path / "subgraphs" / "baseline").exists()
    assert json.loads((tmp_path / "subgraphs" / "graph" / "2.json").read_text())["claim"] == "claim 2 linked"

    # a resumed run keeps the saved figures' claims and computes nothing
    fake.asked.clear()
    assert export_subgraphs(tmp_path, {"graph": fake}, claims, metrics) == 0 and fake.asked == []


def test_too_few_subgraphs_with_edges_are_filled_with_the_best_candidates(tmp_path):
    claims = [Claim(i, f"claim {i}" + (" linked" if i == 4 else "")) for i in range(6)]
    export_subgraphs(tmp_path, {"graph": FakeGraphPipeline()}, claims, {"examples": [{"id": 3}]})
    saved = sorted(int(p.stem) for p in (tmp_path / "subgraphs" / "graph").glob("*.json"))
    assert saved == [0, 1, 3, 4]  # 4 has an edge; then 3 (an example), 0, 1 in candidate order
