"""Syntactic triplets from the real spaCy model on handwritten sentences."""

from __future__ import annotations

import pytest

from garag.datasets import fever
from garag.types import Evidence, SentenceId
from garag.wiki import iter_pages
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


def test_each_sentence_is_parsed_once_and_gives_the_same_facts() -> None:
    """Overlapping pools (a claim's and its program steps') parse each sentence once, real FEVER text."""
    pool: list[Evidence] = []
    for page in iter_pages(fever().corpus_path):
        pool += [Evidence(SentenceId(page.id, line), text) for line, text, _ in page.sentences()]
        if len(pool) >= 60:
            break
    first, second = pool[:40], pool[20:60] + pool[:5]
    cached = SyntacticExtractor(cache_sentences=50)
    a, b = cached.extract(first), cached.extract(second)
    assert cached.parsed == 60  # the 25 sentences of the second pool seen before were not parsed again
    fresh = SyntacticExtractor().load()
    assert a == fresh.extract(first) and b == fresh.extract(second) and len(a) > 20
    assert len(cached._cache) == 50  # bounded: the least recently used are dropped
    cached.extract(first[:20])  # the 10 dropped (pool[5:15]) are parsed again, with the same facts
    assert cached.parsed == 70 and cached.extract(first) == a
