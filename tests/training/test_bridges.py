"""Corpus bridges: chains follow the claim's names to lead sentences; variants keep their label rules."""

from __future__ import annotations

import json

import pytest

from garag.claim_parse import parse_claims
from garag.store import SentenceStore, build_store
from garag.types import Label, SentenceId
from training.bridges import clause_about, corpus_bridges, lead_sentence
from training.compositional import join_claims
from training.data import TrainClaim

PAGES = {
    "Marie_Curie": ["Marie Curie was a physicist born in Warsaw ."],
    "Warsaw": ["Warsaw is the capital of Poland .", "It lies on the Vistula river in the east ."],
    "Poland": ["Poland is a country that borders Germany .", "Its currency is the zloty ."],
    "Paris": ["Paris is the capital and largest city of France ."],
    "Halle_Berry": ["Halle Berry is an American actress and a former model ."],
    "Berry": ["A berry is a small fleshy fruit with seeds ."],
    "Germany": ["Germany is a country in Western Europe ."],
    "Spain": ["Spain is a country in southwestern Europe ."],
    "Frederic_Chopin": ["Frederic Chopin was a composer who lived in Germany and France ."],
    "Short_page": [
        "He was a man .",
        "Short page -LRB- a band -RRB- is a rock band from somewhere near here .",
    ],
}


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[TrainClaim], list[list[SentenceId]], SentenceStore]:
    root = tmp_path_factory.mktemp("bridges")
    wiki = root / "wiki-pages"
    wiki.mkdir()
    with open(wiki / "wiki-001.jsonl", "w", encoding="utf-8") as fh:
        for page, lines in PAGES.items():
            text = "\n".join(f"{j}\t{line}" for j, line in enumerate(lines))
            fh.write(json.dumps({"id": page, "text": "", "lines": text}) + "\n")
    build_store(wiki, root / "s.db", progress=False)
    store = SentenceStore(root / "s.db")
    curie = (SentenceId("Marie_Curie", 0),)
    claims = [
        TrainClaim(0, "Marie Curie was born in Warsaw.", Label.SUPPORTS, curie),
        TrainClaim(1, "Halle Berry was a model.", Label.SUPPORTS, (SentenceId("Halle_Berry", 0),)),
        TrainClaim(2, "Marie Curie was born in Paris.", Label.REFUTES, curie),
        # the pool of replacement names: GPE names seen at least twice in the claims
        TrainClaim(
            3, "Frederic Chopin lived in Germany.", Label.SUPPORTS, (SentenceId("Frederic_Chopin", 0),)
        ),
        TrainClaim(
            4, "Frederic Chopin never saw Germany.", Label.REFUTES, (SentenceId("Frederic_Chopin", 0),)
        ),
        TrainClaim(5, "Frederic Chopin visited Spain.", Label.SUPPORTS, (SentenceId("Frederic_Chopin", 0),)),
        TrainClaim(6, "Chopin never went to Spain.", Label.REFUTES, (SentenceId("Frederic_Chopin", 0),)),
        # names no page itself: its gold sentence names Warsaw
        TrainClaim(7, "Marie Curie was a scientist.", Label.SUPPORTS, curie),
    ]
    retrieved = [[SentenceId("Berry", 0), SentenceId("Germany", 0), SentenceId("Warsaw", 1)] for _ in claims]
    return claims, retrieved, store


def _made(world, **kw):  # noqa: ANN001, ANN202
    claims, retrieved, store = world
    return corpus_bridges(
        claims, retrieved, store, top_k=5, seed=3, **{"parts": (3,), "decoy_share": 0.0} | kw
    )


def test_a_chain_follows_the_claims_names_to_the_lead_sentences_of_their_pages(world):
    made, counts = _made(world)
    chain = next(b for b in made if b.kind == "bridge" and b.claim_index == 0)
    assert chain.parts == (
        "Marie Curie was born in Warsaw.",
        "Warsaw is the capital of Poland.",
        "Poland is a country that borders Germany.",
    )
    # HoVer's form: each page's clause after its name
    assert (
        chain.text == "Marie Curie was born in Warsaw, the capital of Poland, a country that borders Germany."
    )
    assert chain.label is Label.SUPPORTS
    ids = {e.sentence for e in chain.evidence}
    assert {SentenceId("Marie_Curie", 0), SentenceId("Warsaw", 0), SentenceId("Poland", 0)} <= ids
    assert len(chain.evidence) <= 5
    assert counts["parts_3"] >= 1


def test_a_claim_that_names_no_page_is_joined_with_the_pages_its_gold_sentences_name(world):
    made, _ = _made(world)
    chain = next(b for b in made if b.kind == "bridge" and b.claim_index == 7)
    assert chain.parts[:2] == ("Marie Curie was a scientist.", "Warsaw is the capital of Poland.")
    assert chain.text == join_claims(chain.parts)


@pytest.mark.parametrize(
    ("sentence", "who", "clause"),
    [
        ("Warsaw is the capital of Poland.", False, "the capital of Poland"),
        ("Linkin Park formed in 1996 in California.", False, "which formed in 1996 in California"),
        ("Frederic Chopin was famous for his nocturnes.", True, "who was famous for his nocturnes"),
        ("In botany, a berry is a fleshy fruit.", False, "a fleshy fruit"),
    ],
)
def test_a_lead_sentence_becomes_a_clause_about_its_subject(sentence, who, clause):
    made = clause_about(parse_claims([sentence])[0], who)
    assert made is not None and made[0] == clause


def test_a_refuted_claim_refutes_its_chain_and_keeps_refuting_with_a_part_hidden(world):
    made, _ = _made(world)
    mine = {b.kind: b for b in made if b.claim_index == 2}
    assert mine["bridge"].parts[1] == "Paris is the capital and largest city of France."
    assert mine["bridge"].label is Label.REFUTES
    assert mine["bridge_hidden"].label is Label.REFUTES
    assert "bridge_entity" not in mine  # a changed name of a refuted chain has no known label


def test_a_name_inside_a_longer_name_links_no_page(world):
    made, counts = _made(world)
    assert not [b for b in made if b.claim_index == 1]  # "Berry" of "Halle Berry"
    assert counts["skipped_names_no_page"] >= 1


def test_a_substituted_name_is_refuted_and_read_with_the_same_sentences(world):
    made, _ = _made(world)
    mine = {b.kind: b for b in made if b.claim_index == 0}
    changed, chain = mine["bridge_entity"], mine["bridge"]
    assert changed.label is Label.REFUTES
    assert {e.sentence for e in changed.evidence} == {e.sentence for e in chain.evidence}
    differ = [(a, b) for a, b in zip(chain.parts, changed.parts, strict=True) if a != b]
    assert differ == [("Poland is a country that borders Germany.", changed.parts[2])]  # the last part
    old, new = changed.detail.split(" (")[0].split(" -> ")
    assert (old, new) == ("Germany", "Spain")
    assert changed.text == chain.text.replace("Germany", "Spain")
    assert new not in differ[0][0]  # the part's own sentence states the old name, not the new one


def test_a_hidden_part_leaves_its_page_out_and_makes_a_supported_chain_nei(world):
    made, _ = _made(world)
    hidden = next(b for b in made if b.kind == "bridge_hidden" and b.claim_index == 0)
    assert hidden.label is Label.NOT_ENOUGH_INFO
    assert hidden.detail in ("Warsaw", "Poland")
    assert all(e.sentence.page != hidden.detail for e in hidden.evidence)
    assert hidden.text == next(b for b in made if b.kind == "bridge" and b.claim_index == 0).text


def test_the_same_seed_makes_the_same_instances(world):
    assert _made(world) == _made(world)


def test_a_decoy_reads_the_substituted_names_own_page(world):
    made, _ = _made(world, decoy_share=1.0)
    changed = next(b for b in made if b.kind == "bridge_entity" and b.claim_index == 0)
    assert changed.detail.endswith("(page read)")
    new = changed.detail.split(" -> ")[1].split(" (")[0]
    assert any(e.sentence.page == new.replace(" ", "_") for e in changed.evidence)


def test_a_lead_sentence_names_its_page_and_loses_its_parentheses(world):
    _, _, store = world
    assert lead_sentence(store, "Warsaw") == (SentenceId("Warsaw", 0), "Warsaw is the capital of Poland.")
    # "He was a man." is too short and does not name the page; the next line's parentheses go
    sid, text = lead_sentence(store, "Short_page")
    assert sid == SentenceId("Short_page", 1)
    assert text == "Short page is a rock band from somewhere near here."


def test_parts_outside_two_to_top_k_are_refused(world):
    claims, retrieved, store = world
    with pytest.raises(ValueError, match="parts"):
        corpus_bridges(claims, retrieved, store, top_k=3, seed=1, parts=(2, 4))
    with pytest.raises(ValueError, match="2 claims but 1"):
        corpus_bridges(claims[:2], retrieved[:1], store, top_k=5, seed=1)
