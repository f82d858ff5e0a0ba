"""The synthetic compositional generator: its labels follow its parts, its premises hold what they claim."""

from __future__ import annotations

import itertools
import json

import pytest

from garag.store import SentenceStore, build_store
from garag.types import Label, SentenceId
from training.compositional import Part, compose_examples, compose_label, join_claims, partial_examples
from training.data import TrainClaim

N_PAGES = 24


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[TrainClaim], list[list[SentenceId]], SentenceStore]:
    """24 pages with 4 lines each; claim i is about page i and mentions the title of page i+1 (bridges)."""
    root = tmp_path_factory.mktemp("compositional")
    wiki = root / "wiki-pages"
    wiki.mkdir()
    pages = [f"Place_{chr(65 + i)}" for i in range(N_PAGES)]
    with open(wiki / "wiki-001.jsonl", "w", encoding="utf-8") as fh:
        for page in pages:
            lines = "\n".join(f"{j}\t{page} fact {j} ." for j in range(4))
            fh.write(json.dumps({"id": page, "text": "", "lines": lines}) + "\n")
    build_store(wiki, root / "s.db", progress=False)
    store = SentenceStore(root / "s.db")
    claims, retrieved = [], []
    for i, page in enumerate(pages):
        nxt = pages[(i + 1) % N_PAGES].replace("_", " ")
        label = Label.REFUTES if i % 3 == 0 else Label.SUPPORTS
        evidence = (SentenceId(page, 0),) if i % 2 else (SentenceId(page, 0), SentenceId(page, 1))
        claims.append(TrainClaim(i, f"{page.replace('_', ' ')} is next to {nxt}.", label, evidence))
        retrieved.append(
            [
                SentenceId(page, 2),
                SentenceId(page, 0),
                SentenceId(pages[(i + 5) % N_PAGES], 3),
                SentenceId(page, 3),
            ]
        )
    return claims, retrieved, store


def test_compose_label_refutes_beats_nei_beats_supports():
    s, r = Label.SUPPORTS, Label.REFUTES
    assert compose_label([Part(1, "a", s, True), Part(2, "b", s, True)]) is Label.SUPPORTS
    assert compose_label([Part(1, "a", s, True), Part(2, "b", r, True)]) is Label.REFUTES
    assert compose_label([Part(1, "a", s, False), Part(2, "b", s, True)]) is Label.NOT_ENOUGH_INFO
    assert compose_label([Part(1, "a", s, False), Part(2, "b", r, True)]) is Label.REFUTES
    assert compose_label([Part(1, "a", r, False), Part(2, "b", s, True)]) is Label.NOT_ENOUGH_INFO
    with pytest.raises(ValueError):
        compose_label([])


def test_join_claims():
    assert join_claims(["A is B.", "C is D. "]) == "A is B, and C is D."
    assert join_claims(["A.", "B.", "C."]) == "A, B, and C."
    assert join_claims(["Only one"]) == "Only one."


def test_labels_follow_parts_and_premises_hold_the_shown_evidence(world):
    claims, retrieved, store = world
    by_id = {c.id: c for c in claims}
    composed, counts = compose_examples(claims, retrieved, store, n=120, top_k=8, seed=5, bridge_share=0.5)
    assert len(composed) == 120
    assert {Label.SUPPORTS, Label.REFUTES, Label.NOT_ENOUGH_INFO} == {c.example.label for c in composed}
    assert counts["bridge"] > 0 and counts["conjunction"] > 0
    for c in composed:
        ex, parts = c.example, c.parts
        assert 2 <= len(parts) <= 4 and len(ex.evidence) <= 8
        assert ex.label is compose_label(parts)
        assert ex.claim == join_claims([p.text for p in parts])
        shown = {e.sentence for e in ex.evidence}
        assert all(e.text for e in ex.evidence)
        for p in parts:
            gold = set(by_id[p.claim_id].evidence)
            if p.evidence_shown:
                assert gold & shown, "a shown part has at least one of its gold sentences in the premise"
            else:
                pages = {s.page for s in gold}
                assert not {s for s in shown if s.page in pages}, "a hidden part has nothing from its pages"
        if ex.label is Label.SUPPORTS:
            assert all(p.label is Label.SUPPORTS and p.evidence_shown for p in parts)
        if c.bridge:
            for a, b in zip(
                parts, parts[1:], strict=False
            ):  # each next part is about a page the previous one names
                page_b = by_id[b.claim_id].evidence[0].page.replace("_", " ")
                assert page_b in a.text


def test_generator_is_deterministic_and_checks_its_arguments(world):
    claims, retrieved, store = world
    a, _ = compose_examples(claims, retrieved, store, n=20, top_k=8, seed=1)
    b, _ = compose_examples(claims, retrieved, store, n=20, top_k=8, seed=1)
    assert [x.example for x in a] == [x.example for x in b]
    with pytest.raises(ValueError, match="retrieved"):
        compose_examples(claims, retrieved[:-1], store, n=1, top_k=8, seed=1)
    with pytest.raises(ValueError, match="top_k 3"):
        compose_examples(claims, retrieved, store, n=1, top_k=3, seed=1)
    none, counts = compose_examples(claims[:2], retrieved[:2], store, n=5, top_k=8, seed=1)
    assert none == [] and counts["skipped_too_few_claims"] == 5


def test_supports_share_controls_the_label_mix(world):
    claims, retrieved, store = world
    only_s, _ = compose_examples(claims, retrieved, store, n=30, top_k=8, seed=2, supports_share=1.0)
    assert all(c.example.label is Label.SUPPORTS for c in only_s)
    no_s, _ = compose_examples(claims, retrieved, store, n=30, top_k=8, seed=2, supports_share=0.0)
    assert all(c.example.label is not Label.SUPPORTS for c in no_s)


def test_partial_examples_read_one_parts_evidence_and_are_never_supports(world):
    claims, _, store = world
    by_page = {c.evidence[0].page: c for c in claims}
    examples, counts = partial_examples(claims, store, n=60, seed=3, bridge_share=0.5)
    assert counts["claims"] == 60 and counts["bridge"] > 0 and counts["conjunction"] > 0
    groups = [list(g) for _, g in itertools.groupby(examples, key=lambda ex: ex.claim_id)]  # in order made
    assert len(groups) == 60
    refuted_claims = 0
    for group in groups:
        parts = [by_page[ex.evidence[0].sentence.page] for ex in group]
        assert 2 <= len(parts) <= 3 and len({p.id for p in parts}) == len(parts)  # one example per part
        assert {ex.claim for ex in group} == {join_claims([p.text for p in parts])}
        for ex, part in zip(group, parts, strict=True):
            assert [e.sentence for e in ex.evidence] == list(part.evidence[:2]) and all(
                e.text for e in ex.evidence
            )
            # a refuted part refutes the whole; a supported part's evidence says nothing of the others
            assert ex.label is (Label.REFUTES if part.label is Label.REFUTES else Label.NOT_ENOUGH_INFO)
        refuted_claims += any(p.label is Label.REFUTES for p in parts)
    assert 25 <= refuted_claims < 60  # half get a refuted part; a chain's later links may be refuted too
    again, _ = partial_examples(claims, store, n=60, seed=3, bridge_share=0.5)
    assert again == examples
    none, counts = partial_examples(claims[:2], store, n=5, seed=1)
    assert none == [] and counts["skipped_too_few_claims"] == 5
    with pytest.raises(ValueError, match="parts must be >= 2"):
        partial_examples(claims, store, n=1, seed=1, parts=(1, 2))
