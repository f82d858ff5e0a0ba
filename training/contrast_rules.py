"""Contrast rules that keep every name: negation, numbers and relation words (see :mod:`training.contrast`).

Each change is a pure function of a parsed claim (:class:`training.contrast_parse.ParsedClaim`),
the claim's label, its evidence texts and a seeded ``random.Random``; it returns the changed text
and a short description of the edit, or None when the rule does not apply.  Labels are decided in
:mod:`training.contrast`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from garag.types import Label
from training.contrast_parse import YEAR_RE, ParsedClaim, coordinated, pieces, put, render

# --- negation ---------------------------------------------------------------------------------

NEGATABLE_AUX = frozenset(
    {"is", "are", "was", "were", "has", "have", "had", "can", "will", "does", "do", "did"}
)
CONTRACTED = {
    "is": "isn't", "are": "aren't", "was": "wasn't", "were": "weren't", "has": "hasn't", "have": "haven't",
    "had": "hadn't", "can": "can't", "will": "won't", "does": "doesn't", "do": "don't", "did": "didn't",
}  # fmt: skip
# Words that already negate (or make the claim negative-polar): insertion would stack negations.
NEGATIVE_WORDS = frozenset(
    {"not", "n't", "never", "no", "none", "nobody", "nothing", "neither", "nor", "nowhere", "cannot"}
    | {"rarely", "seldom", "hardly", "barely", "scarcely", "without"}
)
# Positive-polarity words: "was once a colony" -> "wasn't once a colony" reads as another claim.
POSITIVE_POLARITY = frozenset({"some", "somewhere", "someone", "something", "somebody", "once", "already"})
# Quantified subjects ("All X are Y"): "not" would be ambiguous in scope.
QUANTIFIERS = frozenset({"all", "every", "each", "some", "many", "most", "few", "both", "any", "several"})
# "not only", "not until", ...: removing "not" leaves another meaning or no sentence.
AFTER_NOT_BLOCKS = frozenset(
    {"only", "just", "all", "always", "even", "until", "yet", "quite", "entirely", "necessarily"}
    | {"every", "merely", "simply", "exactly", "least", "once", "one", "single"}
)
# Negative-polarity words: "has not released any albums" cannot lose its "not" ("a single" neither).
NEGATIVE_POLARITY = frozenset({"any", "anything", "anyone", "anybody", "ever", "yet", "either", "anymore"})
DO_SUPPORT = {"VBZ": "does", "VBD": "did", "VBP": "do"}
NEGATION_CONTRACTION_SHARE = 0.3

IRREGULAR_PAST = dict(
    pair.split(":")
    for pair in (
        "be:was have:had do:did go:went win:won lose:lost write:wrote make:made take:took give:gave "
        "find:found become:became begin:began come:came get:got know:knew leave:left meet:met run:ran "
        "see:saw sell:sold sing:sang speak:spoke teach:taught think:thought build:built buy:bought "
        "fight:fought hold:held lead:led grow:grew break:broke bring:brought choose:chose draw:drew "
        "drive:drove eat:ate fall:fell feel:felt fly:flew forget:forgot hear:heard keep:kept lend:lent "
        "let:let put:put read:read ride:rode rise:rose say:said seek:sought send:sent set:set shoot:shot "
        "sit:sat spend:spent stand:stood steal:stole swim:swam tell:told throw:threw understand:understood "
        "wear:wore cast:cast hit:hit cut:cut shut:shut spread:spread bear:bore beat:beat catch:caught "
        "feed:fed hang:hung hide:hid shake:shook sink:sank strike:struck wake:woke withdraw:withdrew "
        "undergo:underwent overcome:overcame undertake:undertook rebuild:rebuilt rewrite:rewrote pay:paid "
        "mean:meant flee:fled freeze:froze deal:dealt light:lit quit:quit split:split lay:laid"
    ).split()
)
DOUBLING_VERBS = frozenset(
    "admit commit occur prefer refer control compel permit submit omit regret equip transfer patrol "
    "propel rebel acquit".split()
)
_VOWELS = "aeiou"


def past_tense(base: str) -> str | None:
    """Simple past of a verb's base form (a small irregular table, then the regular rules), or None."""
    if base in IRREGULAR_PAST:
        return IRREGULAR_PAST[base]
    if not base.isalpha() or len(base) < 2:
        return None
    if base.endswith("e"):
        return base + "d"
    if base.endswith("y") and base[-2] not in _VOWELS:
        return base[:-1] + "ied"
    groups = re.findall(f"[{_VOWELS}]+", base)
    cvc = (
        base[-1] not in _VOWELS + "wxy" and base[-2] in _VOWELS and (len(base) < 3 or base[-3] not in _VOWELS)
    )
    if cvc and (len(groups) == 1 or base in DOUBLING_VERBS):
        return base + base[-1] + "ed"
    return base + "ed"


def third_person(base: str) -> str | None:
    """Third-person singular present of a base form, or None."""
    special = {"be": "is", "have": "has", "do": "does", "go": "goes"}
    if base in special:
        return special[base]
    if not base.isalpha():
        return None
    if base.endswith(("s", "sh", "ch", "x", "z", "o")):
        return base + "es"
    if base.endswith("y") and len(base) > 1 and base[-2] not in _VOWELS:
        return base[:-1] + "ies"
    return base + "s"


def _negation_blocked(p: ParsedClaim, label: Label) -> bool:
    """A label flip is only safe for one clause with an unquantified subject, coordination only when
    the source is SUPPORTS (not (A and B) does not decide A and B when A and B is false or unknown)."""
    if p.root is None or p.toks[0].lower in QUANTIFIERS:
        return True
    if label is not Label.SUPPORTS and coordinated(p):
        return True
    subjects = [i for i, t in enumerate(p.toks) if t.dep in ("nsubj", "nsubjpass") and t.head == p.root]
    return any(p.toks[j].lower in QUANTIFIERS for s in subjects for j in p.children(s, "det", "predet"))


def insert_negation(p: ParsedClaim, label: Label, rng: random.Random) -> tuple[str, str] | None:
    """Negate the main clause: "not" after its first auxiliary or copula, else do-support."""
    if _negation_blocked(p, label) or any(t.lower in NEGATIVE_WORDS | POSITIVE_POLARITY for t in p.toks):
        return None
    root = p.toks[p.root]
    edit = pieces(p)
    auxes = [i for i in p.children(p.root, "aux", "auxpass") if i < p.root]
    if auxes or (root.lemma == "be" and root.pos in ("AUX", "VERB")):
        i = auxes[0] if auxes else p.root
        word = p.toks[i].lower
        if word not in NEGATABLE_AUX or p.toks[i].text != word:
            return None  # a capitalised "Can" is a title's ("You Can Count on Me"), or a question
        if rng.random() < NEGATION_CONTRACTION_SHARE:
            edit[i] = (CONTRACTED[word], p.toks[i].ws)
            return render(edit), f"{word} -> {CONTRACTED[word]}"
        negated = p.toks[i].text + ("not" if word == "can" else " not")
        edit[i] = (negated, p.toks[i].ws)
        return render(edit), f"{word} -> {negated.lower()}"
    do = DO_SUPPORT.get(root.tag)
    base = root.lemma.lower()
    if do is None or root.pos != "VERB" or not base.isalpha() or root.text[0].isupper() or p.root == 0:
        return None
    if root.tag == "VBD" and base == root.lower and root.lower.endswith("ed"):
        return None  # the lemmatizer failed
    if rng.random() < NEGATION_CONTRACTION_SHARE:
        neg = CONTRACTED[do]
    else:
        neg = do + " not"
    edit[p.root] = (f"{neg} {base}", root.ws)
    return render(edit), f"{root.text} -> {neg} {base}"


def remove_negation(p: ParsedClaim, label: Label) -> tuple[str, str] | None:
    """Drop the main clause's only negation ("is not" -> "is", "does not sing" -> "sings", "never" -> "")."""
    if _negation_blocked(p, label):
        return None
    negs = [i for i, t in enumerate(p.toks) if t.lower in NEGATIVE_WORDS]
    if len(negs) != 1 or p.toks[negs[0]].dep != "neg" or p.toks[negs[0]].head != p.root or negs[0] == 0:
        return None  # a negation inside a relative clause is not the claim's polarity
    words = [t.lower for t in p.toks]
    if any(w in NEGATIVE_POLARITY for w in words) or "a single" in " ".join(words):
        return None
    n = negs[0]
    neg = p.toks[n]
    if n + 1 < len(p.toks) and p.toks[n + 1].lower in AFTER_NOT_BLOCKS:
        return None
    edit = pieces(p)
    if neg.lower == "never":
        edit[n] = ("", "")
        return render(edit), "never -> (removed)"
    if neg.lower not in ("not", "n't"):
        return None
    a = n - 1
    aux = p.toks[a]
    word = {"ca": "can", "wo": "will"}.get(aux.lower, aux.lower)
    if word not in NEGATABLE_AUX:
        return None
    if word in ("does", "do", "did") and p.toks[p.root].tag == "VB" and p.root > n:
        base = p.toks[p.root].lower
        form = {"does": third_person, "did": past_tense}.get(word, lambda b: b)(base)
        if form is None:
            return None
        edit[a] = edit[n] = ("", "")
        edit[p.root] = (form, p.toks[p.root].ws)
        return render(edit), f"{aux.text} {neg.text} {base} -> {form}"
    if word in ("does", "do", "did") and p.root != a:
        return None  # "did not" without a verb to inflect
    edit[a] = (aux.text if word == aux.lower else word, neg.ws)
    edit[n] = ("", "")
    return render(edit), f"{aux.text} {neg.text} -> {word}"


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
