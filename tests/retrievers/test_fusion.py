from __future__ import annotations

import pytest

from garag.types import Hit, SentenceId
from retrievers.fusion import rrf_fuse

A, B, C = SentenceId("A", 0), SentenceId("B", 1), SentenceId("C", 2)


def _hits(name: str, *sids: SentenceId) -> list[Hit]:
    return [Hit(s, 10.0 - i, name) for i, s in enumerate(sids)]


def test_rrf_scores_by_hand():
    fused = rrf_fuse({"bm25": _hits("bm25", A, B), "dense": _hits("dense", B, C)}, k=3, rrf_k=60)
    scores = {h.sentence: h.score for h in fused}
    assert scores[B] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[A] == pytest.approx(1 / 61)
    assert scores[C] == pytest.approx(1 / 62)
    assert [h.sentence for h in fused] == [B, A, C]
    assert fused[0].sources == ("bm25", "dense") and fused[1].sources == ("bm25",)
    assert all(h.retriever == "fused" for h in fused)


def test_weights_and_subquery_lists():
    fused = rrf_fuse(
        {"bm25": _hits("bm25", A), "dense": _hits("dense", C), "dense@q2": _hits("dense", C)},
        k=2,
        rrf_k=0,
        weights={"dense": 0.25},
    )
    scores = {h.sentence: h.score for h in fused}
    assert scores[A] == pytest.approx(1.0) and scores[C] == pytest.approx(0.5)
    assert fused[1].sources == ("dense",)


def test_duplicate_in_one_list_counts_once_and_k_cuts():
    fused = rrf_fuse({"x": _hits("x", A, A, B)}, k=1, rrf_k=1)
    assert len(fused) == 1 and fused[0].score == pytest.approx(0.5)
