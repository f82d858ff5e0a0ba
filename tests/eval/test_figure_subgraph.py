"""GRAAL's subgraph export is drawn as an evidence graph with the predicted evidence marked."""

from __future__ import annotations

from eval.figures import evidence_graph, graal_subgraph_for_figure

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
