"""Contrast rules that keep every name: numbers and relation words (see :mod:`training.contrast`;
negation is :mod:`garag.polarity`).

Each change is a pure function of a parsed claim (:class:`garag.claim_parse.ParsedClaim`),
the claim's label, its evidence texts and a seeded ``random.Random``; it returns the changed text
and a short description of the edit, or None when the rule does not apply.  Labels are decided in
:mod:`training.contrast`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from garag.claim_parse import YEAR_RE, ParsedClaim, pieces, put, render

# --- numbers ----------------------------------------------------------------------------------

INT_RE = re.compile(r"^(\d{1,3}(,\d{3})+|\d+)$")
NUMBER_WORDS = {
    w: i + 2 for i, w in enumerate("two three four five six seven eight nine ten eleven twelve".split())
}
WORD_FOR = {v: k for k, v in NUMBER_WORDS.items()}
LATEST_YEAR = 2017  # FEVER's Wikipedia dump: no moved year after it (unless the claim's is)
MONTHS = frozenset(
    "January February March April May June July August September October November December".split()
)
# Bounds and approximations (within three words before): a moved value may still hold ("before 1990").
NUMBER_BLOCKERS = frozenset(
    "over under more less fewer least most about around nearly approximately almost roughly before "
    "after since until till by than within up circa some past exceeding".split()
)
NUMBER_AFTER = frozenset({"or", "+", "more", "plus", "%", "percent"})
BOUND_PHRASES = ("at least", "more than", "less than", "fewer than", "up to", "at most", "as many as")
_EVIDENCE_TOKEN_RE = re.compile(r"\d[\d,]*\d|\d|[A-Za-z]+")


def evidence_tokens(evidence: Sequence[str]) -> frozenset[str]:
    """Lower-cased words and numbers of the evidence texts."""
    return frozenset(w.lower() for text in evidence for w in _EVIDENCE_TOKEN_RE.findall(text))


def _new_number(value: int, kind: str, rng: random.Random, banned: frozenset[str]) -> str | None:
    for _ in range(20):
        if kind == "year":
            new = value + rng.choice([d for d in range(-10, 11) if d])
            text = str(new) if new <= max(value, LATEST_YEAR) else None
        elif kind == "word":
            new = rng.choice([v for v in WORD_FOR if v != value])
            text = WORD_FOR[new] if str(new) not in banned else None
        elif kind == "day":
            new = rng.randint(1, 28)
            text = str(new) if new != value else None
        elif value <= 20:
            new = rng.choice([v for v in range(2, max(12, value + 6)) if v != value])
            text = str(new)
        else:
            factor = rng.choice([0.5, 0.6, 0.75, 1.25, 1.5, 2.0])
            digits = len(str(value)) - 2
            new = max(2, round(value * factor / 10**digits) * 10**digits)
            text = f"{new:,}" if new != value else None
        if text and text.lower() not in banned and text.replace(",", "") not in banned:
            return text
    return None


def change_number(p: ParsedClaim, evidence: Sequence[str], rng: random.Random) -> tuple[str, str] | None:
    """Move one year or whole number that the evidence states (as written) to another value."""
    seen = evidence_tokens(evidence)
    found = []
    for i, t in enumerate(p.toks):
        prev = p.toks[i - 1].text if i else ""
        nxt = p.toks[i + 1].text if i + 1 < len(p.toks) else ""
        if any(w.lower in NUMBER_BLOCKERS for w in p.toks[max(0, i - 3) : i]) or nxt.lower() in NUMBER_AFTER:
            continue
        if any(b in " ".join(w.lower for w in p.toks[:i]) for b in BOUND_PHRASES):
            continue  # "at least 30 points and 20 rebounds": the bound covers both numbers
        if p.ent_at(i) is not None or (i > 1 and prev[:1].isupper() and prev not in MONTHS):
            continue  # part of a name: "Toy Story 3", "Billboard 200"
        if t.text in NUMBER_WORDS and (t.text in seen or str(NUMBER_WORDS[t.text]) in seen):
            found.append((i, NUMBER_WORDS[t.text], "word"))  # lower case only: "Three Days of the Condor"
        elif YEAR_RE.match(t.text) and t.text in seen:
            found.append((i, int(t.text), "year"))
        elif INT_RE.match(t.text) and t.text in seen and int(t.text.replace(",", "")) >= 2:
            value = int(t.text.replace(",", ""))
            day = value <= 31 and (prev in MONTHS or nxt in MONTHS)
            if day or t.dep in ("nummod", "quantmod", "compound", "amod"):  # a count, not "24" the film
                found.append((i, value, "day" if day else "int"))
    if not found:
        return None
    i, value, kind = rng.choice(found)
    text = _new_number(value, kind, rng, seen)
    if text is None:
        return None
    if "," not in p.toks[i].text:
        text = text.replace(",", "")
    edit = pieces(p)
    edit[i] = (text, p.toks[i].ws)
    return render(edit), f"{p.toks[i].text} -> {text}"


# --- relation words ---------------------------------------------------------------------------

# (word, contrary, condition): "" always; "than": next token is "than"; "adj": next token is an
# adjective or adverb; "contest": the direct object is a contest; "not_known": not "best known";
# "time": not "named after" (a resemblance, not a time); "ordinal": an adjective, not "at first".
_RELATION_TABLE = """
before after time | older younger | oldest youngest | largest smallest | first last ordinal
north south | northern southern | east west | eastern western | northeast southwest
northwest southeast | northeastern southwestern | northwestern southeastern
increased decreased | increase decrease | increases decreases | highest lowest | maximum minimum
above below | earliest latest | longest shortest | male female
successful unsuccessful | heaviest lightest | richest poorest | alive dead
larger smaller than | higher lower than | longer shorter than | earlier later than | more less than
most least adj | best worst not_known | better worse not_known
won lost contest | wins loses contest | win lose contest
"""
RELATION_LEXICON: tuple[tuple[str, str, str], ...] = tuple(
    (w, c, (cond or [""])[0])
    for row in _RELATION_TABLE.replace("\n", "|").split("|")
    if row.strip()
    for a, b, *cond in [row.split()]
    for w, c in ((a, b), (b, a))
)
CONTEST_NOUNS = frozenset(
    "election game match race battle war final championship series bout fight contest case vote seat "
    "tournament cup title primary referendum".split()
)
_LEXICON = {w: (c, cond) for w, c, cond in RELATION_LEXICON}


NOT_TEMPORAL_BEFORE = frozenset(
    {"named", "name", "modeled", "modelled", "patterned", "styled", "look", "looks", "took"}
)


def _relation_ok(p: ParsedClaim, i: int, cond: str) -> bool:
    nxt = p.toks[i + 1] if i + 1 < len(p.toks) else None
    prev = p.toks[i - 1].lower if i else ""
    if cond == "time":
        return prev not in NOT_TEMPORAL_BEFORE
    if cond == "ordinal":
        return p.toks[i].tag == "JJ" and prev != "at"
    if cond == "than":
        return nxt is not None and nxt.lower == "than"
    if cond == "adj":
        return nxt is not None and nxt.tag in ("JJ", "RB")
    if cond == "not_known":
        return nxt is None or nxt.lower not in ("known", "-")
    if cond == "contest":  # a definite contest: "won a championship" -> "lost a championship" may hold
        objs = p.children(i, "dobj")
        if not objs:
            return False
        o = objs[0]
        definite = p.toks[o].tag == "NNP" or any(
            p.toks[d].lower == "the" or p.toks[d].dep == "poss" for d in p.children(o, "det", "poss")
        )
        return definite and p.toks[o].lemma.lower() in CONTEST_NOUNS
    return True


def _born_died(p: ParsedClaim) -> tuple[int, int, str] | None:
    """``was born in/on <date with a year>`` <-> ``died in/on <date>`` (singular subjects only)."""
    r = p.root
    if r is None:
        return None
    dates = {
        i
        for e in p.ents
        if e.label == "DATE"
        and any(YEAR_RE.match(t.text) for t in p.toks[e.start : e.end])
        and not any(t.lower in ("'s", "s", "century") for t in p.toks[e.start : e.end + 1])  # "the 1900's"
        for i in range(e.start, e.end)
    }
    dated = any(
        p.toks[q].lower in ("in", "on") and any(o in dates for o in p.children(q, "pobj"))
        for q in p.children(r, "prep")
    )
    subj = next(iter(p.children(r, "nsubj", "nsubjpass")), None)
    if not dated or subj is None or p.toks[subj].tag not in ("NNP", "NN"):
        return None
    root = p.toks[r]
    if root.lower == "born" and r > 0 and p.toks[r - 1].lower == "was" and p.toks[r - 1].dep == "auxpass":
        return r - 1, r + 1, "died"
    if root.lower == "died" and root.tag == "VBD" and not p.children(r, "aux", "auxpass", "neg"):
        return r, r + 1, "was born"
    return None


def replace_relation(p: ParsedClaim, rng: random.Random) -> tuple[str, str] | None:
    """Replace one relation word by its contrary from :data:`RELATION_LEXICON` (or born <-> died)."""
    options: list[tuple[int, int, str]] = []
    bd = _born_died(p)
    if bd is not None:
        options.append(bd)
    for i, t in enumerate(p.toks):
        entry = _LEXICON.get(t.text)  # lower-case words only: "East Timor" is a name
        if entry and p.ent_at(i) is None and _relation_ok(p, i, entry[1]):
            options.append((i, i + 1, entry[0]))
    if not options:
        return None
    start, end, word = rng.choice(options)
    edit = pieces(p)
    old = render(edit[start:end])
    put(p, edit, start, end, word)
    return render(edit), f"{old} -> {word}"
