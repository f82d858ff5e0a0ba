"""Contrast rules about names: role swap (keeps them) and entity substitution (changes one).

Pure functions of a parsed claim, as in :mod:`training.contrast_rules`; documented in
:mod:`training.contrast`.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from garag.claim_parse import Ent, ParsedClaim, clean_name, pieces, put, render, squash

# --- role swap --------------------------------------------------------------------------------

# "X is the N of Y": asymmetric kinship, succession and part-of nouns.
ASYMMETRIC_NOUNS = frozenset(
    "father mother son daughter parent child grandfather grandmother grandson granddaughter uncle aunt "
    "nephew niece predecessor successor mentor teacher student pupil capital subsidiary sequel prequel "
    "owner".split()
)
# "X V Y" (and passive "Y was V by X"), by lemma.
ASYMMETRIC_VERBS = frozenset(
    "defeat beat succeed precede replace influence acquire buy purchase own employ coach mentor teach "
    "train kill murder assassinate found adopt".split()
)
# "X is C than Y" (and "X was born before/after Y").
COMPARATIVES = frozenset(
    "older younger taller shorter larger smaller bigger heavier lighter richer poorer earlier later".split()
)


# Types that may swap roles with each other (spaCy often calls a band ORG, a team GPE).
PARTIES = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC"})


def _ent_of(p: ParsedClaim, i: int | None) -> Ent | None:
    e = None if i is None else p.ent_at(i)
    return e if e is not None and clean_name(p, e) else None


def _first(xs: Sequence[int]) -> int | None:
    return xs[0] if xs else None


def swap_roles(p: ParsedClaim) -> tuple[str, str] | None:
    """Swap the two names of a listed asymmetric relation: "X defeated Y" -> "Y defeated X"."""
    r = p.root
    if r is None:
        return None
    root = p.toks[r]
    subj = _first(p.children(r, "nsubj", "nsubjpass"))
    obj: int | None = None
    if root.lemma == "be":
        for a in p.children(r, "attr", "acomp"):
            noun, word = p.toks[a].lemma.lower() in ASYMMETRIC_NOUNS, p.toks[a].lower
            prep = "of" if noun else "than" if word in COMPARATIVES else ""
            for q in p.children(a, "prep"):
                if prep and p.toks[q].lower == prep:
                    obj = _first(p.children(q, "pobj"))
    elif root.lemma.lower() in ASYMMETRIC_VERBS:
        if p.children(r, "auxpass"):
            agent = _first(p.children(r, "agent"))
            obj = None if agent is None else _first(p.children(agent, "pobj"))
        else:
            obj = _first(p.children(r, "dobj"))
    elif root.lemma.lower() == "bear" and root.lower == "born":
        for q in p.children(r, "prep"):
            if p.toks[q].lower in ("before", "after"):
                obj = _first(p.children(q, "pobj"))
    a, b = _ent_of(p, subj), _ent_of(p, obj)
    if a is None or b is None or a == b or (a.end > b.start and b.end > a.start):
        return None
    if root.lower == "born" and b.label != "PERSON":
        return None
    if a.label != b.label and not {a.label, b.label} <= PARTIES:
        return None  # "McLuhan taught English": not two parties of one relation
    if any(
        p.toks[i].tag == "VBP" or p.toks[i].lower in ("are", "were")
        for i in [r, *p.children(r, "aux", "auxpass")]
    ):
        return None  # a plural verb would not agree with a swapped subject
    first, second = sorted([a, b], key=lambda e: e.start)
    edit = pieces(p)
    put(p, edit, first.start, first.end, second.text)
    put(p, edit, second.start, second.end, first.text)
    return render(edit), f"{a.text} <-> {b.text}"


# --- entity substitution ----------------------------------------------------------------------

SUBSTITUTION_TYPES = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART"})
DETERMINERS = frozenset({"a", "an", "the"})
# NORP names that are adjectives ("American", "Japanese", "Scottish"), not groups ("Democrats").
NORP_ADJECTIVE_RE = re.compile(r"^[A-Z][a-z]+(an|ese|ish|ch|i|ic)$")


def _core(p: ParsedClaim, e: Ent) -> Ent:
    """``e`` without a leading determiner ("a Golden Globe" -> "Golden Globe")."""
    start = e.start
    while start < e.end - 1 and p.toks[start].lower in DETERMINERS:
        start += 1
    text = "".join(t.text + t.ws for t in p.toks[start : e.end]).strip()
    return Ent(start, e.end, e.label, text)


def _with_the(p: ParsedClaim, e: Ent) -> bool:
    """Whether the name stands after "the" ("the United States", not "Colombia")."""
    return e.start > 0 and p.toks[e.start - 1].lower == "the"


def name_pool(parsed: Sequence[ParsedClaim], min_count: int = 2) -> dict[tuple[str, bool], list[str]]:
    """Replacement names by spaCy type and use of "the": whole names seen at least ``min_count`` times
    with that type, their most frequent (spaCy's one-off types are often wrong); no possessives, no
    claim-final "X." (the full stop taken into the name), NORP only as adjectives."""
    counts: Counter = Counter()
    for p in parsed:
        for e in {_core(p, e) for e in p.ents if e.label in SUBSTITUTION_TYPES and clean_name(p, e)}:
            if e.text.endswith(("'s", "'")) or (e.label == "NORP" and not NORP_ADJECTIVE_RE.match(e.text)):
                continue
            if e.end == len(p.toks) and e.text.endswith("."):
                continue
            counts[e.text, e.label, _with_the(p, e)] += 1
    best: dict[str, tuple[int, str, bool]] = {}
    for (text, label, the), n in sorted(counts.items()):
        if n > best.get(text, (0, "", False))[0]:
            best[text] = (n, label, the)
    pool: dict[tuple[str, bool], list[str]] = {}
    for text, (n, label, the) in sorted(best.items()):
        if n >= min_count:
            pool.setdefault((label, the), []).append(text)
    return pool


class Substitution(NamedTuple):
    """A claim with one name substituted: its text, the edit (``"old -> new (TYPE)"``) and the new name."""

    text: str
    detail: str
    name: str


def substitute_entity(
    p: ParsedClaim,
    evidence: Sequence[str],
    topics: Sequence[str],
    pool: Mapping[tuple[str, bool], Sequence[str]],
    rng: random.Random,
) -> Substitution | None:
    """Replace one name outside the subject that the evidence states by another of its spaCy type."""
    seen = squash(" ".join(evidence))
    topic_keys = {squash(t) for t in topics}
    subject: set[int] = set()
    for s in p.children(p.root, "nsubj", "nsubjpass") if p.root is not None else []:
        subject |= p.subtree(s)
    options = [
        c
        for e in p.ents
        if e.label in SUBSTITUTION_TYPES and clean_name(p, e)
        for c in [_core(p, e)]
        if squash(c.text)
        and squash(c.text) in seen
        and not any(squash(c.text) in t for t in topic_keys)  # "Richmond" of "Richmond, Virginia"
        and not subject & set(range(c.start, c.end))
        and (c.label != "NORP" or NORP_ADJECTIVE_RE.match(c.text))
    ]
    if not options:
        return None
    ent = rng.choice(options)
    key, claim_key = squash(ent.text), squash(p.text)
    names = [
        n
        for n in pool.get((ent.label, _with_the(p, ent)), ())
        if squash(n) not in seen and squash(n) not in claim_key and key not in squash(n)
    ]
    if not names:
        return None
    new = rng.choice(names)
    edit = pieces(p)
    put(p, edit, ent.start, ent.end, new)
    if new.endswith(".") and ent.end < len(p.toks) and p.toks[ent.end].text == ".":
        edit[ent.end] = ("", "")  # "Jr." ends the claim: no "Jr.."
    art = ent.start - 1
    if art >= 0 and p.toks[art].lower in ("a", "an"):
        word = "an" if new[:1].lower() in "aeiou" else "a"
        edit[art] = (word.capitalize() if p.toks[art].text[0].isupper() else word, p.toks[art].ws)
    return Substitution(render(edit), f"{ent.text} -> {new} ({ent.label})", new)
