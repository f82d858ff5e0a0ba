"""Contrast claims: each rule's edits and labels pinned on small cases, and coverage on FEVER train pairs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from garag.claim_parse import parse_claims
from garag.claims import read_fever_claims
from garag.polarity import past_tense, third_person
from garag.store import SentenceStore
from garag.types import Evidence, Label, SentenceId
from training.compositional import Part, compose_label, join_claims
from training.contrast import (
    GENERATOR,
    RULE_KINDS,
    ChangeType,
    ContrastClaim,
    SourceClaim,
    change_claim,
    compose_contrasts,
    contrast_claims,
    contrast_counts,
    contrast_label,
    sources_from_claims,
    sources_from_train_pairs,
)
from training.contrast_names import name_pool

S, R, NEI = Label.SUPPORTS, Label.REFUTES, Label.NOT_ENOUGH_INFO
NEG, NEG_OUT = ChangeType.NEGATION, ChangeType.NEGATION_REMOVED
TRAIN_PAIRS = Path(__file__).resolve().parents[2] / "data" / "fever" / "train_pairs.jsonl"


def _source(text: str, label: Label = S, evidence: tuple[str, ...] = ()) -> SourceClaim:
    ev = tuple(Evidence(SentenceId("Page", i), t) for i, t in enumerate(evidence))
    return SourceClaim(7, text, label, ev)


def _change(case: dict) -> ContrastClaim | None:
    source = _source(case["claim"], case.get("label", S), tuple(case.get("evidence", ())))
    (parsed,) = parse_claims([source.text])
    return change_claim(source, parsed, case["kind"], case.get("seed", 0), case.get("pool"))


def _names(text: str) -> Counter:
    """Capitalised words, but for function words capitalised for standing first."""
    words = re.findall(r"[\w'.&-]+", text)
    return Counter(
        w.rstrip(".") for w in words if w[:1].isupper() and w.lower() not in ("the", "a", "an", "in", "on")
    )


def _check(case: dict) -> ContrastClaim | None:
    made = _change(case)
    if case.get("expected") is None:
        assert made is None, f"{case['claim']!r} -> {made and made.text!r}"
        return None
    assert made is not None, f"{case['claim']!r} was not changed"
    expected = case["expected"] if isinstance(case["expected"], set) else {case["expected"]}
    assert made.text in expected
    assert made.label is case["to"]
    assert (made.change, made.source_text, made.source_label) == (
        case["kind"],
        case["claim"],
        case.get("label", S),
    )
    if made.change is not ChangeType.ENTITY:
        assert _names(made.text) == _names(case["claim"])
    return made


NEGATION_CASES = [
    {
        "claim": "Bhagat Singh was an American.",
        "label": R,
        "to": S,
        "expected": {"Bhagat Singh was not an American.", "Bhagat Singh wasn't an American."},
    },
    {"claim": "Vienna is a city.", "to": R, "expected": {"Vienna is not a city.", "Vienna isn't a city."}},
    {
        "claim": "The Beatles were a band.",
        "to": R,
        "expected": {"The Beatles were not a band.", "The Beatles weren't a band."},
    },
    {
        "claim": "Varun Dhawan has been in Hindi movies.",
        "label": R,
        "to": S,
        "expected": {
            "Varun Dhawan has not been in Hindi movies.",
            "Varun Dhawan hasn't been in Hindi movies.",
        },
    },
    {
        "claim": "Elephants have been featured in religion.",
        "to": R,
        "expected": {
            "Elephants have not been featured in religion.",
            "Elephants haven't been featured in religion.",
        },
    },
    {
        "claim": "Mary Shelley had written a novel.",
        "to": R,
        "expected": {"Mary Shelley had not written a novel.", "Mary Shelley hadn't written a novel."},
    },
    {
        "claim": "Tom Hanks can sing.",
        "to": R,
        "expected": {"Tom Hanks cannot sing.", "Tom Hanks can't sing."},
    },
    {
        "claim": "Avatar 2 will be released in 2020.",
        "label": R,
        "to": S,
        "expected": {"Avatar 2 will not be released in 2020.", "Avatar 2 won't be released in 2020."},
    },
    {
        "claim": "Taylor Swift writes songs.",
        "to": R,
        "expected": {"Taylor Swift does not write songs.", "Taylor Swift doesn't write songs."},
    },
    {
        "claim": "Ringo Starr joined the Beatles in 1962.",
        "to": R,
        "expected": {
            "Ringo Starr did not join the Beatles in 1962.",
            "Ringo Starr didn't join the Beatles in 1962.",
        },
    },
    {
        "claim": "Lions do eat meat.",
        "label": R,
        "to": S,
        "expected": {"Lions do not eat meat.", "Lions don't eat meat."},
    },
    {
        "claim": "The Beatles had four members.",
        "to": R,
        "expected": {"The Beatles did not have four members.", "The Beatles didn't have four members."},
    },
    {
        "claim": "Vienna is a city.",
        "label": NEI,
        "to": NEI,
        "expected": {"Vienna is not a city.", "Vienna isn't a city."},
    },
    # already negated: NEGATION adds no second "not" (NEGATION_REMOVED drops it instead)
    {"claim": "Bhagat Singh was not an American.", "expected": None},
    {"claim": "Sandra Bullock was never a producer.", "label": R, "expected": None},
    # scope: quantified subjects, modals that do not negate, coordination of a REFUTES claim
    {"claim": "All dogs are mammals.", "expected": None},
    {"claim": "Tom Hanks may sing.", "expected": None},
    {"claim": "The Congo was once a Belgian colony.", "expected": None},  # "wasn't once" is another claim
    {"claim": "John Lennon sang and wrote songs.", "label": R, "expected": None},
    {"claim": "Saxony, a state in Germany.", "expected": None},
]


@pytest.mark.parametrize("case", NEGATION_CASES, ids=lambda c: c["claim"])
def test_negation(case: dict) -> None:
    _check({"kind": NEG, **case})


NEGATION_REMOVED_CASES = [
    # the double negation: "X is not Y" negated is "X is Y"
    {"claim": "Bhagat Singh was not an American.", "to": R, "expected": "Bhagat Singh was an American."},
    {
        "claim": "Iraq is not in the Middle East.",
        "label": R,
        "to": S,
        "expected": "Iraq is in the Middle East.",
    },
    {"claim": "Vienna isn't a city.", "label": R, "to": S, "expected": "Vienna is a city."},
    {"claim": "Tom Hanks cannot sing.", "label": R, "to": S, "expected": "Tom Hanks can sing."},
    {"claim": "Tom Hanks can't sing.", "label": R, "to": S, "expected": "Tom Hanks can sing."},
    {
        "claim": "Tiger Woods did not win the Masters.",
        "label": R,
        "to": S,
        "expected": "Tiger Woods won the Masters.",
    },
    {
        "claim": "Doug Jones didn't star in a horror film.",
        "label": R,
        "to": S,
        "expected": "Doug Jones starred in a horror film.",
    },
    {"claim": "Batman does not have superpowers.", "to": R, "expected": "Batman has superpowers."},
    {
        "claim": "Rihanna has never sold a record.",
        "label": R,
        "to": S,
        "expected": "Rihanna has sold a record.",
    },
    {"claim": "Vienna is not a city.", "label": NEI, "to": NEI, "expected": "Vienna is a city."},
    {
        "claim": "Prince has not released any albums.",
        "label": R,
        "expected": None,
    },  # "has released any albums"
    {"claim": "Cher is not only a singer.", "label": R, "expected": None},
    {"claim": "Cher did not release a single album.", "label": R, "expected": None},
    {"claim": "WWI was a war that never happened.", "label": R, "expected": None},  # not the main clause
    {"claim": "Vienna is a city.", "expected": None},
]


@pytest.mark.parametrize("case", NEGATION_REMOVED_CASES, ids=lambda c: c["claim"])
def test_negation_removed(case: dict) -> None:
    _check({"kind": NEG_OUT, **case})


def test_inflection_for_removed_do_support() -> None:
    assert [past_tense(v) for v in ("win", "star", "visit", "admit", "play", "try", "debut", "make")] == [
        "won",
        "starred",
        "visited",
        "admitted",
        "played",
        "tried",
        "debuted",
        "made",
    ]
    assert [third_person(v) for v in ("have", "star", "watch", "fly", "play")] == [
        "has",
        "stars",
        "watches",
        "flies",
        "plays",
    ]


BORN = "Ron Perlman -LRB- born April 13 , 1950 -RRB- is an American actor ."
NUMBER_CASES = [
    {"claim": "Ron Perlman was born in 1950.", "evidence": [BORN], "to": R, "year": True},
    {
        "claim": "Justified won two Primetime Emmy Awards.",
        "evidence": ["Justified won two Primetime Emmy Awards ."],
        "to": R,
    },
    {
        "claim": "Carole King created 25 solo records.",
        "evidence": ["King has released 25 solo albums ."],
        "to": R,
    },
    {
        "claim": "Jack Paar was born on May 1, 1918.",
        "evidence": ["Jack Paar -LRB- May 1 , 1918 -- January 27 , 2004 -RRB- ."],
        "to": R,
    },
    # the number must be in the evidence as written
    {"claim": "Ron Perlman was born in 1951.", "evidence": [BORN], "expected": None},
    {"claim": "Ron Perlman was born in 1950.", "evidence": [], "expected": None},
    # only SUPPORTS claims: a changed REFUTES (or NEI) claim has no known truth
    {"claim": "Ron Perlman was born in 1950.", "label": R, "evidence": [BORN], "expected": None},
    {"claim": "Ron Perlman was born in 1950.", "label": NEI, "evidence": [BORN], "expected": None},
    # bounds: a moved bound may still hold
    {"claim": "Ron Perlman was born before 1950.", "evidence": [BORN], "expected": None},
    {
        "claim": "King has released more than 25 albums.",
        "evidence": ["King has released 25 solo albums ."],
        "expected": None,
    },
    # numbers inside names
    {"claim": "Toy Story 3 is a film.", "evidence": ["Toy Story 3 is a 2010 film ."], "expected": None},
]


@pytest.mark.parametrize("case", NUMBER_CASES, ids=lambda c: c["claim"] + str(c.get("label", "")))
def test_number(case: dict) -> None:
    made = _change({"kind": ChangeType.NUMBER, **case})
    if "expected" in case:
        assert made is None
        return
    assert made is not None and made.label is case["to"]
    old = re.findall(r"\b\w+\b", case["claim"])
    new = re.findall(r"\b\w+\b", made.text)
    diff = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert len(diff) == 1, diff
    evidence_words = set(re.findall(r"\w+", " ".join(case["evidence"]).lower()))
    assert diff[0][1].lower() not in evidence_words
    if case.get("year"):
        assert abs(int(diff[0][1]) - int(diff[0][0])) <= 10
    assert _names(made.text) == _names(case["claim"])


ROLE_SWAP_CASES = [
    {
        "claim": "Chris Hardwick replaced Kevin James in a show.",
        "to": R,
        "expected": "Kevin James replaced Chris Hardwick in a show.",
    },
    {
        "claim": "Edward VIII was succeeded by George VI.",
        "to": R,
        "expected": "George VI was succeeded by Edward VIII.",
    },
    {"claim": "Berlin is the capital of Germany.", "to": R, "expected": "Germany is the capital of Berlin."},
    {
        "claim": "Muhammad Ali defeated George Foreman.",
        "to": R,
        "expected": "George Foreman defeated Muhammad Ali.",
    },
    {
        "claim": "Sean Lennon is the son of John Lennon.",
        "to": R,
        "expected": "John Lennon is the son of Sean Lennon.",
    },
    {"claim": "Muhammad Ali defeated George Foreman.", "label": R, "expected": None},
    # symmetric or unlisted relations
    {"claim": "Alex Reid was married to Katie Price.", "expected": None},
    {"claim": "Tom Hanks worked with Meg Ryan.", "expected": None},
    {"claim": "Tom Hanks met Meg Ryan.", "expected": None},
]


@pytest.mark.parametrize("case", ROLE_SWAP_CASES, ids=lambda c: c["claim"] + str(c.get("label", "")))
def test_role_swap(case: dict) -> None:
    _check({"kind": ChangeType.ROLE_SWAP, **case})


RELATION_CASES = [
    {
        "claim": "Avatar was released before Titanic.",
        "to": R,
        "expected": "Avatar was released after Titanic.",
    },
    {
        "claim": "Titanic was released after Avatar.",
        "to": R,
        "expected": "Titanic was released before Avatar.",
    },
    {
        "claim": "Haifa is in the northern part of Israel.",
        "to": R,
        "expected": "Haifa is in the southern part of Israel.",
    },
    {
        "claim": "Eilat is in the southern part of Israel.",
        "to": R,
        "expected": "Eilat is in the northern part of Israel.",
    },
    {
        "claim": "Gregor Clegane is the older brother of Sandor Clegane.",
        "to": R,
        "expected": "Gregor Clegane is the younger brother of Sandor Clegane.",
    },
    {
        "claim": "Sandor Clegane is the younger brother of Gregor Clegane.",
        "to": R,
        "expected": "Sandor Clegane is the older brother of Gregor Clegane.",
    },
    {
        "claim": "Pembroke Castle is the largest castle in Wales.",
        "to": R,
        "expected": "Pembroke Castle is the smallest castle in Wales.",
    },
    {
        "claim": "The population of Leipzig increased.",
        "to": R,
        "expected": "The population of Leipzig decreased.",
    },
    {"claim": "Sparta won the Peloponnesian War.", "to": R, "expected": "Sparta lost the Peloponnesian War."},
    {"claim": "Athens lost the Peloponnesian War.", "to": R, "expected": "Athens won the Peloponnesian War."},
    {"claim": "Robert Browning was born in 1812.", "to": R, "expected": "Robert Browning died in 1812."},
    {"claim": "Robert Browning died in 1889.", "to": R, "expected": "Robert Browning was born in 1889."},
    {"claim": "Robert Browning was born in 1812.", "label": R, "expected": None},
    {"claim": "PageRank was named after Larry Page.", "expected": None},  # a namesake, not a time
    {"claim": "Kurt Angle won a championship.", "expected": None},  # he may also have lost one
    {"claim": "Anne Hathaway is best known for The Princess Diaries.", "expected": None},
    {"claim": "East Timor is a country.", "expected": None},  # names are kept
    {
        "claim": "Robert Browning was born in London.",
        "expected": None,
    },  # born and died in London may both hold
]


@pytest.mark.parametrize("case", RELATION_CASES, ids=lambda c: c["claim"] + str(c.get("label", "")))
def test_relation(case: dict) -> None:
    _check({"kind": ChangeType.RELATION, **case})


@pytest.fixture(scope="module")
def pool() -> dict:
    return name_pool(
        parse_claims(
            [
                "Mike Pence was governor of Indiana.",
                "Barack Obama was born in Hawaii.",
                "Tom Hanks lived in Ohio.",
                "Neal Schon is an American guitarist.",
                "Akira Kurosawa was a Japanese director.",
            ]
        ),
        min_count=1,
    )


def test_entity_substitution_keeps_the_type(pool: dict) -> None:
    case = {
        "claim": "Mike Pence was governor of Indiana.",
        "evidence": ["Michael Richard Pence is the 48th Vice President , previously governor of Indiana ."],
        "kind": ChangeType.ENTITY,
        "pool": pool,
    }
    made = _check(
        {**case, "to": R, "expected": {f"Mike Pence was governor of {n}." for n in ("Hawaii", "Ohio")}}
    )
    assert made is not None and made.detail.endswith("(GPE)")
    nationality = {
        "claim": "Neal Schon is an American guitarist.",
        "evidence": ["Neal Schon is an American rock guitarist ."],
        "kind": ChangeType.ENTITY,
        "pool": pool,
    }
    _check({**nationality, "to": R, "expected": "Neal Schon is a Japanese guitarist."})  # "a", not "an"
    assert _change({**case, "label": R}) is None  # only SUPPORTS claims
    assert _change({**case, "evidence": ["Pence is a politician ."]}) is None  # the evidence must state it
    # the subject is never replaced: the evidence would then be silent, not contradicting
    subject = {
        "claim": "Indiana is a state.",
        "evidence": ["Indiana is a U.S. state ."],
        "kind": ChangeType.ENTITY,
    }
    assert _change({**subject, "pool": pool}) is None


def test_contrast_label_rules() -> None:
    for kind in (NEG, NEG_OUT):
        assert [contrast_label(kind, lab) for lab in (S, R, NEI)] == [R, S, NEI]
    for kind in (ChangeType.NUMBER, ChangeType.ROLE_SWAP, ChangeType.RELATION, ChangeType.ENTITY):
        assert [contrast_label(kind, lab) for lab in (S, R, NEI)] == [R, None, None]
    assert contrast_label(ChangeType.UNCHANGED, R) is R
    with pytest.raises(ValueError, match="COMPOSED"):
        contrast_label(ChangeType.COMPOSED, S)


CLAIMS = [
    _source("Ron Perlman was born in 1950.", S, (BORN,)),
    _source("Bhagat Singh was an American.", R, ("Bhagat Singh was an Indian revolutionary .",)),
    _source("Iraq is not in the Middle East.", R, ("Iraq is a country in Western Asia , the Middle East .",)),
    _source("Sparta won the Peloponnesian War.", S, ("Sparta won the Peloponnesian War against Athens .",)),
    _source("Chris Hardwick replaced Kevin James in a show.", S, ("Hardwick replaced Kevin James .",)),
    _source("Taylor Swift writes songs.", S, ("Taylor Swift is an American singer-songwriter .",)),
    _source("Vienna is a city.", NEI),
]


def test_generator_is_deterministic_for_a_seed() -> None:
    one = contrast_claims(CLAIMS, seed=3, compositions=6)
    assert one == contrast_claims(CLAIMS, seed=3, compositions=6)
    assert {c.change for c in one} >= {
        NEG,
        NEG_OUT,
        ChangeType.NUMBER,
        ChangeType.ROLE_SWAP,
        ChangeType.RELATION,
    }
    assert len([c for c in one if c.change is ChangeType.COMPOSED]) == 6
    # a claim's change does not depend on which other claims or rules are asked for
    only_numbers = contrast_claims(CLAIMS[:1], seed=3, kinds=[ChangeType.NUMBER])
    assert only_numbers == [c for c in one if c.change is ChangeType.NUMBER]
    with pytest.raises(ValueError, match="kinds"):
        contrast_claims(CLAIMS, seed=3, kinds=[ChangeType.COMPOSED])


def test_compositions_follow_compose_label() -> None:
    made = contrast_claims(CLAIMS, seed=1)
    composed = compose_contrasts(made, CLAIMS, n=40, seed=2, parts=(2, 3))
    assert len(composed) == 40
    assert {c.label for c in composed} >= {S, R}
    for c in composed:
        assert 2 <= len(c.parts) <= 3 and c.change is ChangeType.COMPOSED
        assert c.label is compose_label([Part(i, p.text, p.label, True) for i, p in enumerate(c.parts)])
        assert c.text == join_claims([p.text for p in c.parts])
        assert any(p.change is not ChangeType.UNCHANGED for p in c.parts)
        assert len({p.source_text for p in c.parts}) == len(c.parts)
        assert set(c.evidence) == {e for p in c.parts for e in p.evidence}
    with pytest.raises(ValueError, match="parts"):
        compose_contrasts(made, CLAIMS, n=1, seed=2, parts=(1,))


def test_twins_keep_the_source_evidence() -> None:
    made = contrast_claims(CLAIMS, seed=0)
    assert made
    by_text = {s.text: s.evidence for s in CLAIMS}
    assert all(c.evidence == by_text[c.source_text] for c in made)
    assert GENERATOR.startswith("garag-contrast-")


def test_sources_from_claims_read_the_store(tiny_claims: Path, tiny_store: SentenceStore) -> None:
    sources = sources_from_claims(read_fever_claims(tiny_claims), tiny_store)
    assert len(sources) >= 6
    lennon = next(s for s in sources if s.text == "John Lennon was born in 1940.")
    assert lennon.label is S and lennon.evidence and all(e.text for e in lennon.evidence)
    assert next(s for s in sources if s.label is NEI).evidence == ()


@pytest.mark.slow
def test_coverage_on_fever_train_pairs() -> None:
    """Every rule over the real train pairs: coverage per change, balance of labels, names kept."""
    sources = sources_from_train_pairs(TRAIN_PAIRS)
    made = contrast_claims(sources, seed=0, compositions=2000)
    counts = contrast_counts(made)
    n = len(sources)
    assert n > 8000
    assert counts["negation"] >= 0.5 * n
    assert counts["negation_removed"] >= 300
    assert counts["number"] >= 300
    assert counts["relation"] >= 150
    assert counts["entity"] >= 800
    assert counts["role_swap"] >= 2  # FEVER has few claims naming both sides of an asymmetric relation
    assert counts["composed"] == 2000
    assert counts["negation:SUPPORTS"] >= 0.3 * counts["negation"]
    assert counts["negation:REFUTES"] >= 0.3 * counts["negation"]
    assert counts["composed:SUPPORTS"] >= 0.4 * counts["composed"]
    assert 0.25 <= counts["SUPPORTS"] / len(made) <= 0.75
    for c in made:
        if c.change not in (ChangeType.ENTITY, ChangeType.COMPOSED):
            assert _names(c.text) == _names(c.source_text), (c.source_text, c.text)
        assert c.label is (c.source_label if c.change is ChangeType.UNCHANGED else c.label)
    assert set(RULE_KINDS) <= {c.change for c in made}


def _train_claims() -> tuple[list, list]:
    from training.data import TrainClaim

    claims = [
        TrainClaim(10, "The Beatles were formed in Liverpool.", S, (SentenceId("The_Beatles", 0),)),
        TrainClaim(11, "Snowpiercer is a romantic comedy.", R, (SentenceId("Snowpiercer", 0),)),
        TrainClaim(12, "John Lennon was born in 1940.", S, (SentenceId("John_Lennon", 0),)),
    ]
    retrieved = [
        [SentenceId("Liverpool", 0), SentenceId("The_Beatles", 3), SentenceId("The_Beatles", 0)],
        [SentenceId("Tilda_Swinton", 1), SentenceId("Snowpiercer", 0), SentenceId("England", 0)],
        [SentenceId("The_Beatles", 1), SentenceId("England", 0)],  # the gold sentence was missed
    ]
    return claims, retrieved


def test_contrast_train_examples_read_each_twin_with_its_sources_premise(tiny_store: SentenceStore) -> None:
    from training.contrast import contrast_train_examples

    claims, retrieved = _train_claims()
    kw = dict(top_k=3, distractors=1, nei_per_claim=1.0, nei_sentences=2, seed=5)
    examples, counts = contrast_train_examples(claims, retrieved, tiny_store, share=1.0, **kw)
    assert counts["changed_claims"] == 3
    by_claim = {e.claim: e for e in examples if e.label is not NEI}
    # a refuted claim negated is supported, read with the refuted claim's own sentences
    snow = by_claim["Snowpiercer is not a romantic comedy."]
    assert snow.label is S and snow.claim_id == "negation:11"
    assert [e.sentence for e in snow.evidence] == [
        SentenceId("Tilda_Swinton", 1),
        SentenceId("Snowpiercer", 0),
    ]
    beatles = by_claim["The Beatles were not formed in Liverpool."]
    assert beatles.label is R and SentenceId("The_Beatles", 0) in [e.sentence for e in beatles.evidence]
    lennon = [e for e in examples if e.claim_id.endswith(":12") and e.label is not NEI]
    assert lennon and all(e.label is R for e in lennon)  # a year moved, "born" -> "died": refuted
    assert all(SentenceId("John_Lennon", 0) in [s.sentence for s in e.evidence] for e in lennon)
    gold = {c.id: set(c.evidence) for c in claims}
    for e in examples:
        assert e.claim not in {c.text for c in claims} and len(e.evidence) <= 3
        assert all(ev.text for ev in e.evidence)
        source = gold[int(e.claim_id.split(":")[1])]
        # with the source's evidence the rules' label; without it, NOT ENOUGH INFO
        assert (e.label is NEI) == (not source & {ev.sentence for ev in e.evidence})
    assert counts["nei"] == sum(e.label is NEI for e in examples) > 0
    assert contrast_train_examples(claims, retrieved, tiny_store, share=1.0, **kw) == (examples, counts)
    none, _ = contrast_train_examples(claims, retrieved, tiny_store, share=0.0, **kw)
    assert none == []
    with pytest.raises(ValueError, match="3 claims but 2 retrieved"):
        contrast_train_examples(claims, retrieved[:2], tiny_store, share=1.0, **kw)


def test_a_composed_premise_is_every_parts_evidence_then_their_retrieved_sentences(
    tiny_store: SentenceStore,
) -> None:
    from training.contrast import composed_premise

    claims, retrieved = _train_claims()
    parts = [Evidence(SentenceId("Snowpiercer", 0), "s"), Evidence(SentenceId("John_Lennon", 0), "j")]
    made = ContrastClaim("A, and B.", S, ChangeType.COMPOSED, "A, and B.", S, "11+12", tuple(parts))
    index = {11: 1, 12: 2}
    premise = composed_premise(made, index, retrieved, tiny_store, 4, {})
    assert premise is not None and premise[:2] == tuple(parts)
    assert [e.sentence for e in premise[2:]] == [SentenceId("Tilda_Swinton", 1), SentenceId("England", 0)]
    assert composed_premise(made, index, retrieved, tiny_store, 1, {}) is None  # evidence over top_k
