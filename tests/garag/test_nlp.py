"""garag.nlp.parse: the shared parses of the real offline spaCy pipeline, against spaCy's own
one-text-at-a-time parse."""

from __future__ import annotations

import json
from pathlib import Path

from garag import nlp
from garag.claim_parse import SPACY_MODEL, parse_claims
from pipeline.decompose import RuleDecomposer

CLAIMS = Path(__file__).parents[1] / "fixtures" / "claims.jsonl"


def _texts() -> list[str]:
    texts = [json.loads(line)["claim"] for line in CLAIMS.read_text(encoding="utf-8").splitlines() if line]
    return texts + [
        "Bhagat Singh was not an American, and he died in 1931.",
        "The film, which Ang Lee directed, won two Oscars in 2006 and 2013.",
        "Ürümqi   is a city .",
        "",
    ]


def _signature(doc) -> list[tuple]:  # noqa: ANN001 - spacy.tokens.Doc
    tokens = [
        (t.text, t.whitespace_, t.tag_, t.pos_, t.dep_, t.head.i, t.lemma_, t.ent_iob_, t.ent_type_)
        for t in doc
    ]
    return tokens + [("sentences", tuple(s.start for s in doc.sents))] if len(doc) else tokens


def test_parse_gives_spacys_own_parses_and_parses_each_text_once() -> None:
    texts = _texts()
    assert len(texts) > 6
    spacy = nlp.load_spacy(SPACY_MODEL)
    alone = [_signature(spacy(t)) for t in texts]
    memory = nlp._parses.setdefault(SPACY_MODEL, nlp.LRU(nlp.PARSES_KEPT))
    before = memory.computed
    shared = nlp.parse(texts + texts[:3], SPACY_MODEL)  # repeats within a call are parsed once
    assert [_signature(d) for d in shared[: len(texts)]] == alone
    assert shared[len(texts) :] == shared[:3]  # the same Doc objects
    again = nlp.parse(list(reversed(texts)), SPACY_MODEL)
    assert [id(d) for d in again] == [id(d) for d in reversed(shared[: len(texts)])]
    assert memory.computed - before <= len(texts)  # none of the second call's texts parsed again


def test_the_decomposer_and_the_claim_parser_read_the_same_parse() -> None:
    texts = [t for t in _texts() if t]
    rule = RuleDecomposer().load()
    assert rule.subclaims_batch(texts) == [rule.subclaims(t) for t in texts]
    assert any(len(parts) > 1 for parts in rule.subclaims_batch(texts))  # claims of several parts too
    memory = nlp._parses[SPACY_MODEL]
    before = memory.computed
    parsed = parse_claims(texts[:5])
    assert memory.computed == before  # parsed already, by the decomposer's batch
    assert [p.text for p in parsed] == texts[:5]
    assert [len(p.toks) for p in parsed] == [len(nlp.load_spacy(SPACY_MODEL)(t)) for t in texts[:5]]


def test_parse_in_chunks_parses_a_chunk_when_its_first_text_is_read(monkeypatch) -> None:  # noqa: ANN001
    texts = [f"Claim number {i} was made in {1900 + i}." for i in range(7)]
    monkeypatch.setattr(nlp, "PARSE_CHUNK", 3)
    memory = nlp._parses.setdefault(SPACY_MODEL, nlp.LRU(nlp.PARSES_KEPT))
    docs = nlp.parse_in_chunks(texts, SPACY_MODEL)
    seen = []
    for i, doc in enumerate(docs):
        seen.append(doc.text)
        # texts 0-2 parsed at the first read, 3-5 at the fourth, 6 at the seventh; no later ones
        assert [t in memory for t in texts] == [j < 3 * (i // 3 + 1) for j in range(7)]
    assert seen == texts
    assert list(nlp.parse_in_chunks([], SPACY_MODEL)) == []
