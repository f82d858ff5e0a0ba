"""Syntactic triplets from the real spaCy model on handwritten sentences."""

from __future__ import annotations

import pytest

from garag.types import Evidence, SentenceId
from pipeline.protocols import TripletExtractor
from pipeline.triplets import SyntacticExtractor, page_subject


@pytest.fixture(scope="module")
def extractor() -> SyntacticExtractor:
    return SyntacticExtractor().load()


def _facts(ex: SyntacticExtractor, text: str, page: str = "Some_Page") -> set[tuple[str, str, str]]:
    return {(t.subject, t.relation, t.object) for t in ex.extract([Evidence(SentenceId(page, 0), text)])}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("James Cameron directed Titanic .", ("James Cameron", "direct", "Titanic")),  # SVO
        ("Paris is the capital of France .", ("Paris", "be", "capital of France")),  # copula
        ("Barack Obama , a lawyer , was born in Hawaii .", ("Barack Obama", "be", "lawyer")),  # apposition
        ("Barack Obama , a lawyer , was born in Hawaii .", ("Barack Obama", "born in", "Hawaii")),  # prep
        ("Titanic was directed by James Cameron .", ("Titanic", "directed by", "James Cameron")),  # passive
        ("The band released Abbey Road and Let It Be .", ("band", "release", "Abbey Road")),  # conj objects
        ("Kerry Washington did not star in Scandal .", ("Kerry Washington", "not star in", "Scandal")),
    ],
)
def test_patterns(extractor: SyntacticExtractor, text: str, expected: tuple[str, str, str]) -> None:
    assert expected in _facts(extractor, text)


def test_pronoun_subject_resolved_to_page_and_ptb_undone(extractor: SyntacticExtractor) -> None:
    facts = _facts(extractor, "He starred in Cast Away -LRB- 2000 -RRB- .", page="Tom_Hanks")
    assert ("Tom Hanks", "star in", "Cast Away") in facts
    assert not any("-LRB-" in s + o for s, _, o in facts)
    assert page_subject("Liverpool_-LRB-band-RRB-") == "Liverpool"


def test_confidence_order_source_and_link(extractor: SyntacticExtractor) -> None:
    sid = SentenceId("Titanic_-LRB-1997_film-RRB-", 3)
    links = {"James Cameron": "James_Cameron"}
    ex = SyntacticExtractor(link=links.get).load()
    trips = ex.extract([Evidence(sid, "James Cameron directed Titanic in 1997 .")])
    assert isinstance(ex, TripletExtractor)
    assert all(t.source == sid and t.extractor == "syntactic" for t in trips)
    assert trips[0].subject == "James_Cameron" and trips[0].relation == "direct"
    by_rel = {t.relation: t.confidence for t in trips}
    assert by_rel["direct"] == pytest.approx(0.9) and by_rel["direct in"] == pytest.approx(0.75)
    assert [t.confidence for t in trips] == sorted((t.confidence for t in trips), reverse=True)


def test_batch_keeps_sources_and_rejects_bad_input(extractor: SyntacticExtractor) -> None:
    ev = [Evidence(SentenceId("A", i), f"Team {i} won the cup .") for i in range(5)]
    trips = extractor.extract(ev)
    assert [t.source.line for t in trips] == [0, 1, 2, 3, 4]
    assert extractor.extract([]) == []
    with pytest.raises(TypeError, match="evidence\\[0\\]"):
        extractor.extract(["not evidence"])  # type: ignore[list-item]
