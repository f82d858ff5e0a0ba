"""A claim's polarity: the negation of its main clause, inserted or removed.

Used to make contrast claims (:mod:`training.contrast`) and, at verification time, the claim's
positive form, whose verdict the decision model reads beside the claim's own
(:mod:`verifier.decision`).  Each function takes a parsed claim (:class:`garag.claim_parse.ParsedClaim`)
and returns the changed text and a short description of the edit, or None when the rule does not apply.
"""

from __future__ import annotations

import random
import re

from garag.claim_parse import ParsedClaim, coordinated, pieces, render
from garag.types import Label

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
