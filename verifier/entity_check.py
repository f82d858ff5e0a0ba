"""The names check: which of a claim's names no sentence read names (a feature of the decision model).

HoVer's NOT_SUPPORTED claims are mostly supported claims with one fact changed, and the change
is usually a name, a place, a nationality or a date that the gold evidence does not contain.  A
verifier that reads 2-4 linked facts at once misses such a swap easily; a lexical check does not.
Until issue 52 this check overrode the verdict (SUPPORTS withheld); now the decision model
(:mod:`verifier.decision`) reads the share of the claim's names it finds missing beside the
verifier's scores, and learns how much that counts.  A name is an entity (spaCy NER; counts,
ordinals, quantities, percentages, money and times are left out) with a word that appears in
none of the sentences the verifier read, nor in their page titles.  The names NER misses count
too: a run of proper nouns (spaCy's tagger) outside every entity ("Stargate SG-1") is checked
like an entity (kind ``PROPN``).

Matching is on words: both sides are case-folded with the accents of Latin letters stripped
("Łódź" and "Lodz" match, as do "Søren" and "Soren"), an entity's function words ("the", "of",
...) are ignored, a plural matches its singular ("1990s" is found where "1990" is), and a date
needs only its numbers and month names ("the mid-1990s" needs "1990s"; "the following year"
needs nothing).  Other scripts keep their marks (a Devanagari word stays one word), and Chinese,
Japanese and Korean characters count one by one, since those scripts do not space their words.

HoVer's claims were written by people, with their slips; the check forgives these (each picked
on the HoVer tune part in its overriding days, docs/results-history.md):

* a lower-case word inside a name that has a capitalised word or a number is a description, not
  a name ("the Crows in Adelaide city" needs "Crows" and "Adelaide");
* letters and digits run together are read apart, each run found (a leading article may be
  missing: "the1974" where "1974" is);
* a word of five or more letters is found where the sentences have a word one typing slip from it
  (a letter added, dropped, changed or two swapped) that begins with the same letter ("Epick" for
  "Epic", "Baebara" for "Barbara");
* a nationality (or its plural) is found where its country is (``NATIONALITIES``: "French" where
  "France" is; "British" where "English", "Scotland" or "Wales" is, not the other way round).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from garag.claim_parse import ParsedClaim
from garag.text import detokenize, page_to_title
from garag.types import Evidence

# Entity types whose words are not names: "one of", "first", "two hours", "50%", "$3"...
SKIPPED_TYPES = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY", "TIME"})
FUNCTION_WORDS = frozenset({"the", "of", "and", "a", "an", "in", "on", "at", "for", "to", "s"})
MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)
# A nationality (one word of the claim) -> the words, any one of which names it in the sentences
# read (a phrase: all of its words, anywhere in those sentences, as every entity is matched).  A
# nation's word does not name its parts' ("English" is not found where "Britain" is).  Loose by
# design: "Irish" is found where "Northern Ireland" is; "U.S." and "U.K." are not read as names.
NATIONALITIES: dict[str, tuple[str, ...]] = {
    "american": ("america", "united states"),
    "british": (
        "britain",
        "united kingdom",
        "uk",
        "english",
        "england",
        "scottish",
        "scotland",
        "welsh",
        "wales",
        "northern ireland",
    ),
    "english": ("england",),
    "scottish": ("scotland",),
    "welsh": ("wales",),
    "irish": ("ireland",),
    "canadian": ("canada",),
    "australian": ("australia",),
    "french": ("france",),
    "german": ("germany",),
    "italian": ("italy",),
    "spanish": ("spain",),
    "portuguese": ("portugal",),
    "dutch": ("netherlands", "holland"),
    "belgian": ("belgium",),
    "swiss": ("switzerland",),
    "austrian": ("austria",),
    "swedish": ("sweden",),
    "norwegian": ("norway",),
    "danish": ("denmark",),
    "finnish": ("finland",),
    "polish": ("poland",),
    "russian": ("russia",),
    "greek": ("greece",),
    "mexican": ("mexico",),
    "brazilian": ("brazil",),
    "argentine": ("argentina",),
    "argentinian": ("argentina",),
    "japanese": ("japan",),
    "chinese": ("china",),
    "korean": ("korea",),
    "indian": ("india",),
    "filipino": ("philippines",),
}
# A word of letters and digits run together ("the1974", "1990s"), read apart into its runs.
_GLUED = re.compile(r"^(?=.*[a-z])(?=.*\d)[a-z\d]+$")
_RUNS = re.compile(r"[a-z]+|\d+")
# What may be glued to a name without being part of it: "the1974 World Cup".
_ARTICLES = frozenset({"the", "a", "an"})
# Latin letters that Unicode decomposition leaves whole.
_LATIN_FOLD = str.maketrans(
    {"ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "æ": "ae", "œ": "oe", "ı": "i", "ß": "ss"}
)
_LATIN_END = 0x250  # Basic Latin to Latin Extended-B: the letters whose accents are stripped
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


# spaCy components neither NER nor the tagger's proper nouns need (en_core_web_sm's NER has its
# own token vectors; the tagger and attribute_ruler give ``pos_``).
def words(text: str) -> list[str]:
    """Case-folded words of ``text``, Latin accents stripped ("Beyoncé's" -> ["beyonce", "s"])."""
    out: list[str] = []
    word: list[str] = []
    base = ""  # the letter the next combining mark belongs to
    for ch in unicodedata.normalize("NFKD", text.casefold().translate(_LATIN_FOLD)):
        if unicodedata.category(ch).startswith("M"):
            if word and ord(base) >= _LATIN_END:
                word.append(ch)  # a mark of another script is part of its word
            continue
        if ch.isalnum():
            base = ch
            if _CJK.match(ch):
                out.extend(["".join(word), ch] if word else [ch])
                word = []
            else:
                word.append(ch)
            continue
        if word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def evidence_words(evidence: Iterable[Evidence]) -> set[str]:
    """The words of the sentences read and of their page titles."""
    out: set[str] = set()
    for e in evidence:
        out.update(words(detokenize(e.text)))
        out.update(words(page_to_title(e.sentence.page)))
    return out


def one_slip(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one letter added, dropped or changed, or two neighbours
    swapped (Damerau-Levenshtein distance 1)."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]])
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = next((i for i in range(len(short)) if short[i] != long_[i]), len(short))
    return short[i:] == long_[i + 1 :]


def _plain(word: str, found: set[str]) -> bool:
    return word in found or (word.endswith("s") and word[:-1] in found)


def _found(word: str, found: set[str]) -> bool:
    """Whether the sentences' words ``found`` name ``word``: itself, its singular, its runs of
    letters and of digits where they are run together (a leading article may be left out: "the1974"
    needs "1974"; "1990s" needs "1990"), or a word one slip from it (five letters or more, letters
    only, the same first letter)."""
    if _plain(word, found):
        return True
    if _GLUED.match(word):
        runs = _RUNS.findall(word)
        if runs[0] in _ARTICLES and len(runs) > 1:
            runs = runs[1:]
        return all(_plain(r, found) or (r == "s" and i > 0) for i, r in enumerate(runs))
    if len(word) >= 5 and word.isalpha():
        return any(f[:1] == word[:1] and len(f) >= 4 and one_slip(word, f) for f in found)
    return False


def _described(token: str) -> bool:
    """Whether a token of a name is a description: letters, none of them capitals, no digits, and
    not a month ("city", "well-known"; not "March", "march", "1990s", "iPhone")."""
    return (
        any(c.isalpha() for c in token)
        and not any(c.isupper() or c.isdigit() for c in token)
        and not MONTHS.intersection(words(token))
    )


def _name_words(text: str) -> list[str]:
    """The words of an entity's text that make it a name: without its descriptions (lower-case
    words) when it has a capitalised word or a number ("the Crows in Adelaide city" -> crows,
    adelaide; "k.d. lang" keeps every word)."""
    tokens = text.split()
    if any(c.isupper() or c.isdigit() for c in text):
        tokens = [t for t in tokens if not _described(t)]
    return [w for w in words(" ".join(tokens)) if w not in FUNCTION_WORDS]


def missing_entities(entities: Iterable[tuple[str, str]], found: set[str]) -> list[str]:
    """The entities (text, spaCy type) with a word that ``found`` lacks, in claim order, once each."""
    out: list[str] = []
    for text, kind in entities:
        if kind in SKIPPED_TYPES or text in out:
            continue
        needed = _name_words(text)
        if kind == "DATE":
            needed = [w for w in needed if w in MONTHS or any(c.isdigit() for c in w)]
        nation = needed[0] if len(needed) == 1 else ""
        nation = nation if nation in NATIONALITIES else nation[:-1]  # "Americans"
        if nation in NATIONALITIES:
            country = NATIONALITIES[nation]
            if any(all(w in found for w in name.split()) for name in country):
                continue
        if not all(_found(w, found) for w in needed):
            out.append(text)
    return out


def claim_names(claim: ParsedClaim) -> list[tuple[str, str]]:
    """A parsed claim's named entities as (text, spaCy type), then each run of proper nouns no
    entity covers as (text, "PROPN") ("Spider-Man": a hyphen with no space around it joins two
    proper nouns)."""
    toks = claim.toks
    out = [(e.text, e.label) for e in claim.ents]
    covered = {i for e in claim.ents for i in range(e.start, e.end)}

    def name(i: int) -> bool:
        return 0 <= i < len(toks) and toks[i].pos == "PROPN" and i not in covered

    start = None
    for i in range(len(toks) + 1):
        joins = (
            start is not None
            and i < len(toks)
            and toks[i].text == "-"
            and not toks[i - 1].ws
            and not toks[i].ws
            and name(i + 1)
        )
        if name(i) or joins:
            start = i if start is None else start
        elif start is not None:
            text = "".join(t.text + t.ws for t in toks[start : i - 1]) + toks[i - 1].text
            out.append((text, "PROPN"))
            start = None
    return out
