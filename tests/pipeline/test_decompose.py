"""Rule decomposition with the real spaCy model, and the shared de-duplication."""

from __future__ import annotations

import pytest

from garag.config import ConfigError, DecompositionConfig
from pipeline.decompose import RuleDecomposer, dedupe_questions, normalize_question
from pipeline.protocols import Decomposer


@pytest.fixture(scope="module")
def decomposer() -> RuleDecomposer:
    return RuleDecomposer().load()


def test_verb_conjunction(decomposer: RuleDecomposer) -> None:
    qs = decomposer.decompose("Barack Obama was born in Hawaii and served as president.")
    assert qs[:2] == ["Was Barack Obama born in Hawaii?", "Did Barack Obama serve as president?"]
    assert isinstance(decomposer, Decomposer)


def test_noun_conjunction(decomposer: RuleDecomposer) -> None:
    qs = decomposer.decompose("Tom Hanks starred in Forrest Gump and Cast Away.")
    assert "Did Tom Hanks star in Forrest Gump?" in qs and "Did Tom Hanks star in Cast Away?" in qs


def test_relative_clause_and_apposition(decomposer: RuleDecomposer) -> None:
    qs = decomposer.decompose("Steven Spielberg, who founded DreamWorks, directed Jaws.")
    assert qs[:2] == ["Did Steven Spielberg found DreamWorks?", "Did Steven Spielberg direct Jaws?"]
    qs = decomposer.decompose(
        "Nikolaj Coster-Waldau, a Danish actor, worked with the Fox Broadcasting Company."
    )
    assert "Is Nikolaj Coster-Waldau a Danish actor?" in qs


def test_simple_claim_gives_nothing_and_limit(decomposer: RuleDecomposer) -> None:
    # one simple fact: its question restates the claim, which is already a retrieval query
    assert decomposer.decompose("Roman Atwood is a content creator.") == []
    assert decomposer.decompose("   ") == []
    one = RuleDecomposer(DecompositionConfig(max_questions=1)).load()
    assert len(one.decompose("Tom Hanks starred in Forrest Gump and Cast Away.")) == 1
    with pytest.raises(TypeError, match="claim"):
        decomposer.decompose(None)  # type: ignore[arg-type]


def test_sub_claims_read_as_sentences(decomposer: RuleDecomposer) -> None:
    # a member split from a plural subject takes a singular verb, and "both" goes with the split
    assert decomposer.subclaims("Ajax and Feyenoord are both based in the Netherlands.") == [
        "Ajax is based in the Netherlands.",
        "Feyenoord is based in the Netherlands.",
    ]
    assert decomposer.subclaims("Paris and Lyon have both hosted the Tour de France.") == [
        "Paris has hosted the Tour de France.",
        "Lyon has hosted the Tour de France.",
    ]
    # no quotation marks; brackets go where no word is left between them, stay where one is
    assert decomposer.subclaims('The film "Blue Sky" was released before "Red Rain".') == [
        "The film is Blue Sky.",
        "The film was released before Red Rain.",
    ]
    assert decomposer.subclaims("Mary Jones (March 3, 1901 – May 5, 1980) was an American novelist.") == [
        "Mary Jones was an American novelist."
    ]
    assert decomposer.subclaims("Mary Jones (born 1901) was an American novelist.") == [
        "Mary Jones (born 1901) was an American novelist."
    ]


def test_a_sub_claim_that_states_nothing_or_that_the_claim_denies_is_left_out(
    decomposer: RuleDecomposer,
) -> None:
    # "John Brown and Peter Green were not." says nothing a sentence could entail
    assert decomposer.subclaims("Alan Smith was a footballer, but John Brown and Peter Green were not.") == [
        "Alan Smith was a footballer."
    ]
    # "A, not B": B is denied, so "A is B" is no part of the claim, and the clause keeps no "not"
    assert decomposer.subclaims(
        "The singer of the song Blue Moon is a member of the duo Sugarland, not Roger Taylor."
    ) == [
        "The song is Blue Moon.",
        "The singer of the song is a member of the duo Sugarland.",
    ]
    # a clause's own negation stays
    assert decomposer.subclaims("Bhagat Singh was not an American.") == ["Bhagat Singh was not an American."]


def test_a_second_clause_whose_subject_the_parser_joined_to_the_first_object_is_its_own_part(
    decomposer: RuleDecomposer,
) -> None:
    # spaCy's small model parses "Berlin" as a conjunct of "France" and the second "is" as a
    # subjectless clause under the first: read as two clauses, not "Paris is in France is in Germany."
    claim = "Paris is in France and Berlin is in Germany."
    assert decomposer.subclaims(claim) == ["Paris is in France.", "Berlin is in Germany."]
    assert decomposer.decompose(claim)[:2] == ["Is Paris in France?", "Is Berlin in Germany?"]
    assert decomposer.subclaims("Paris is the capital of France and Madrid is the capital of Spain.") == [
        "Paris is the capital of France.",
        "Madrid is the capital of Spain.",
    ]
    assert decomposer.subclaims("The river flows through New York and Lake Tahoe lies in California.") == [
        "The river flows through New York.",
        "Lake Tahoe lies in California.",
    ]
    # a conjunct followed by no verb of its own stays a member of the coordination
    assert decomposer.subclaims("Tom Hanks starred in Forrest Gump and Cast Away.") == [
        "Tom Hanks starred in Forrest Gump.",
        "Tom Hanks starred in Cast Away.",
    ]


def test_claim_entities_linked() -> None:
    d = RuleDecomposer(link={"Barack Obama": "Barack_Obama"}.get).load()
    assert d.claim_entities("Barack Obama was born in Hawaii.")[:2] == ["Barack_Obama", "Hawaii"]


def test_dedupe_and_normalise() -> None:
    claim = "Obama was born in Hawaii and served as president."
    qs = [
        "  was obama born in hawaii ?? ",
        "Was Obama born in Hawaii?",  # same content words
        "Did Obama serve as president",
        "Obama was born in Hawaii and served as president",  # the claim itself
        "",
    ]
    assert dedupe_questions(qs, claim, 5) == ["Was obama born in hawaii?", "Did Obama serve as president?"]
    assert normalize_question("  is  Paris in France , really . ") == "Is Paris in France, really?"
    with pytest.raises(ValueError, match="max_questions"):
        dedupe_questions(qs, claim, -1)
    with pytest.raises(ConfigError, match="decomposition.method"):
        DecompositionConfig(method="magic")


def test_a_claim_is_parsed_once_for_its_questions_facts_and_names() -> None:
    from garag import nlp

    counted = RuleDecomposer().load()
    claim = "Steven Spielberg, who founded DreamWorks in its first year, directed Jaws."
    memory = nlp._parses.setdefault(counted.config.spacy_model, nlp.LRU(nlp.PARSES_KEPT))
    before = memory.computed
    got = (counted.decompose(claim), counted.subclaims(claim), counted.claim_entities(claim))
    assert memory.computed == before + 1  # parsed once (garag.nlp.parse keeps it)
    fresh = RuleDecomposer().load()  # another decomposer of the process reads the same parse
    assert got == (fresh.decompose(claim), fresh.subclaims(claim), fresh.claim_entities(claim))
    assert memory.computed == before + 1
    assert got[0] and got[1] and "Steven Spielberg" in got[2]
    counted.decompose("Tom Hanks starred in Forrest Gump, Cast Away and no film of this test's.")
    assert memory.computed == before + 2
