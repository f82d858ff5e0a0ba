"""Linearizer: format, citations, token budget, stable order; graph-ranked evidence."""

from __future__ import annotations

import pytest

from garag.config import ConfigError, LinearizeConfig
from garag.types import Evidence, SentenceId, Triplet
from pipeline.graph_reasoning import RankedFact
from pipeline.linearize import approx_tokens, linearize, ranked_evidence

A, B, C = SentenceId("Barack_Obama", 3), SentenceId("Hawaii", 0), SentenceId("Chicago", 1)
TEXTS = {
    A: "Barack Obama was born in Hawaii -LRB- US -RRB- .",
    B: "Hawaii is a state .",
    C: "Chicago is a city in Illinois .",
}


def _facts() -> list[RankedFact]:
    t1 = Triplet("Barack Obama", "born in", "Hawaii", 0.75, A)
    t2 = Triplet("Barack Obama", "be", "lawyer", 0.7, A)
    return [
        RankedFact(A, 0.9, 1.0, 1.0, 0.5, 0.75, (t1, t2)),
        RankedFact(B, 0.5, 0.5, 0.5, 0.2, 0.0, ()),
        RankedFact(C, 0.2, 0.1, 0.1, 0.2, 0.0, ()),
    ]


def test_format_and_citations() -> None:
    lg = linearize(_facts(), TEXTS, LinearizeConfig())
    lines = lg.text.splitlines()
    assert lines[0] == "[1] Barack Obama | born in | Hawaii (0.900)"
    assert lines[1] == "    Barack Obama | be | lawyer"
    assert lines[2] == "    source (Barack_Obama, 3): Barack Obama was born in Hawaii (US)."
    assert lines[3] == "[2] Hawaii | states | Hawaii is a state. (0.500)"
    assert lg.citations == {1: A, 2: B, 3: C}
    assert lg.n_tokens == approx_tokens(lg.text) and lg.skipped == 0
    # deterministic: the same input gives the same text
    assert linearize(_facts(), TEXTS, LinearizeConfig()).text == lg.text


def test_budget_and_limits() -> None:
    full = linearize(_facts(), TEXTS, LinearizeConfig())
    first_block = "\n".join(full.text.splitlines()[:3])
    # budget for the first block only: the next two do not fit and are skipped
    lg = linearize(_facts(), TEXTS, LinearizeConfig(max_tokens=approx_tokens(first_block)))
    assert lg.citations == {1: A} and lg.skipped == 2 and lg.n_tokens <= approx_tokens(first_block)
    # a block too large is skipped but a later, smaller one still fits; numbering stays dense
    long_a = {**TEXTS, A: "Barack Obama was born in Hawaii " + "and more words " * 10 + "."}
    words = lambda s: len(s.split())  # noqa: E731
    # word counts: block A = 8 + 5 + 36 = 49 > 40; block B = 8 + 6 = 14; block C = 10 + 8 = 18 (+1 newline)
    big = linearize(_facts(), long_a, LinearizeConfig(max_tokens=40), count_tokens=words)
    assert big.citations == {1: B, 2: C} and big.skipped == 1
    assert linearize(_facts(), TEXTS, LinearizeConfig(max_facts=2)).citations == {1: A, 2: B}
    with pytest.raises(ValueError, match="no sentence text"):
        linearize(_facts(), {A: "x"}, LinearizeConfig())
    with pytest.raises(ConfigError, match="linearize.max_tokens"):
        LinearizeConfig(max_tokens=0)


def test_ranked_evidence() -> None:
    extra = SentenceId("Other", 0)
    ev = [Evidence(C, TEXTS[C], 3.0), Evidence(extra, "x", 2.0), Evidence(A, TEXTS[A], 1.0)]
    out = ranked_evidence(_facts(), ev)
    # graph order with graph scores (B is not in ev, so dropped), then unranked evidence in input order
    assert [(e.sentence, e.score) for e in out] == [(A, 0.9), (C, 0.2), (extra, 2.0)]
