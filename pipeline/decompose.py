"""Rule-based claim decomposition: claim -> yes/no subquestions, without an LLM.

The claim is parsed with spaCy and split into its simple facts, each turned
into a yes/no question (Chen et al., NAACL 2024 use an LLM for this; these
rules cover the common shapes):

* coordinated verbs share the subject: "X was born in Y and served as Z" ->
  "Was X born in Y?", "Did X serve as Z?";
* coordinated noun phrases: "X starred in A and B" -> one question per member;
* relative clauses: "X, who founded Y, ..." -> "Did X found Y?" plus the main
  clause without the relative clause;
* appositions: "X, a lawyer, ..." -> "Is X a lawyer?";
* entity pairs: for two named entities, the dependency path between them is
  kept as the predicate: "Obama starred in a film directed by Spielberg" ->
  "Obama starred in film directed by Spielberg?".

Questions are normalised and deduplicated by their content words; a question
with the same content words as the whole claim is dropped (the claim is
already a retrieval query).  ``dedupe_questions`` is shared with the LLM
decomposer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

import Stemmer

from garag.config import DecompositionConfig
from garag.nlp import load_spacy, parse, parse_in_chunks

_QUESTION_FILLER = {"did", "does", "do", "is", "was", "are", "were", "the", "a", "an", "it", "true", "that"}
_NON_ENTITY_TYPES = {"DATE", "TIME", "CARDINAL", "ORDINAL", "PERCENT", "MONEY", "QUANTITY"}
_PAIR_TYPES = {"PERSON", "ORG", "GPE", "LOC", "WORK_OF_ART", "EVENT", "FAC", "PRODUCT", "LAW"}
_SENTENCE_PUNCT = {",", ".", ";", ":", "!", "?"}
_PATH_POS = {"VERB", "AUX", "ADP", "NOUN", "PROPN", "ADJ", "PART", "NUM"}
_DROP_DEPS = {"relcl", "appos", "cc", "conj"}
_STEMMER = Stemmer.Stemmer("english")


def _normalise(claim: str) -> str:
    """The claim as the decomposer reads it: runs of whitespace made one space, ends stripped."""
    return re.sub(r"\s+", " ", claim).strip()


def _dropped(tok: Any) -> bool:
    """Children left out of a simple clause: relative clauses, appositions, coordination, commas."""
    return tok.dep_ in _DROP_DEPS or (tok.dep_ == "punct" and tok.text in _SENTENCE_PUNCT)


def normalize_question(text: str) -> str:
    """One line, single spaces, no space before punctuation, capitalised, ending in one "?"."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" ([,.;:!?%)])", r"\1", text).replace("( ", "(")
    text = text.rstrip(" .,;:!?")
    if not text:
        return ""
    return text[0].upper() + text[1:] + "?"


def question_key(text: str) -> tuple[str, ...]:
    """Content words of a question or claim, sorted: equal keys = the same question."""
    words = re.findall(r"\w+", text.casefold())
    return tuple(sorted({_STEMMER.stemWord(w) for w in words if w not in _QUESTION_FILLER}))


def dedupe_questions(questions: Iterable[str], claim: str, max_questions: int) -> list[str]:
    """Normalise; drop empties, duplicates and restatements of the claim; keep ``max_questions``."""
    if max_questions < 0:
        raise ValueError(f"max_questions must be >= 0, got {max_questions}")
    seen = {question_key(claim)}
    out: list[str] = []
    for q in questions:
        q = normalize_question(q)
        key = question_key(q)
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(q)
        if len(out) >= max_questions:
            break
    return out


class RuleDecomposer:
    """spaCy rule decomposer (implements ``Decomposer``); needs no LLM.

    Args:
        config: decomposition settings (max questions, entity pairs, spaCy model).
        link: optional entity linker, mention -> corpus page id; used by ``claim_entities``.
    """

    name = "rule"

    def __init__(
        self, config: DecompositionConfig | None = None, link: Callable[[str], str | None] | None = None
    ):
        self.config = config or DecompositionConfig()
        self._link = link

    def load(self) -> RuleDecomposer:
        """Load the spaCy pipeline (once per process, :func:`garag.nlp.load_spacy`), so that a missing
        model is reported here rather than at the first claim; idempotent."""
        load_spacy(self.config.spacy_model)
        return self

    def _parse(self, text: str) -> Any:
        """spaCy's parse of ``text`` (a pipeline asks for a claim's questions, simple facts and names,
        the decision model for its polarity and names: :func:`garag.nlp.parse` parses it once)."""
        return parse([text], self.config.spacy_model)[0]

    def subclaims_batch(self, claims: Sequence[str]) -> list[list[str]]:
        """:meth:`subclaims` of each claim, the claims parsed together a chunk at a time
        (:func:`garag.nlp.parse_in_chunks`: one ``nlp.pipe`` per chunk instead of one call per
        claim; :meth:`subclaims` finds each claim's parse kept)."""
        parses = parse_in_chunks([_normalise(c) for c in claims], self.config.spacy_model)
        return [self.subclaims(c) for c, _ in zip(claims, parses, strict=True)]

    def decompose(self, claim: str) -> list[str]:
        """At most ``max_questions`` deduplicated yes/no subquestions; empty for a single simple fact.

        Raises:
            TypeError: the claim is not a string.
        """
        if not isinstance(claim, str):
            raise TypeError(f"claim: expected str, got {type(claim).__name__}")
        claim = _normalise(claim)
        if not claim or self.config.max_questions == 0:
            return []
        doc = self._parse(claim)
        questions = [_question(c) for c in _clauses(doc)]
        if self.config.entity_pairs:
            questions.extend(_entity_pair_questions(doc, self.config.max_entity_pairs))
        return dedupe_questions(questions, claim, self.config.max_questions)

    def subclaims(self, claim: str) -> list[str]:
        """The claim's simple facts as declarative sentences (the Verify steps of a rule program).

        Same clauses as :meth:`decompose` (coordination, relative clauses, appositions), not
        turned into questions, and read as sentences: quotation marks, empty or unpaired brackets
        and "both" are left out, a member split from a plural subject takes a singular verb
        ("A and B are both in C" -> "A is in C"), and a clause that says nothing after its verb
        ("B and C were not.", "X is co-.") or denies an apposition ("X, not Y") is dropped.
        Deduplicated by content words; empty for an empty claim.
        """
        claim = _normalise(claim)
        if not claim:
            return []
        doc = self._parse(claim)
        out: list[str] = []
        seen: set[tuple[str, ...]] = set()
        for tokens, pred in _clauses(doc):
            toks = [t for t in tokens if t.text not in _SENTENCE_PUNCT]
            if pred is _IS and _denied(toks):
                continue
            toks = _tidy(toks)
            if not _states_something(toks, pred):
                continue
            text = _join(_agreeing_words(toks, pred), toks).strip()
            key = question_key(text)
            if not key or key in seen:
                continue
            seen.add(key)
            out.append(text[0].upper() + text[1:] + ".")
        return out

    def claim_entities(self, claim: str) -> list[str]:
        """The claim's named entities and proper-noun phrases (page ids where the linker knows them)."""
        doc = self._parse(claim)
        names = [e.text for e in doc.ents if e.label_ not in _NON_ENTITY_TYPES]
        names += [nc.text for nc in doc.noun_chunks if nc.root.pos_ == "PROPN"]
        out: list[str] = []
        for n in names:
            n = re.sub(r"^(?:the|a|an) ", "", n.strip(), flags=re.IGNORECASE)
            linked = (self._link(n) if self._link else None) or n
            if linked not in out:
                out.append(linked)
        return out


# -- clauses -----------------------------------------------------------------------------------


def _subtree_without(tok: Any, drop: Callable[[Any], bool]) -> list[Any]:
    """Tokens of ``tok``'s subtree in order, leaving out the subtrees of children where ``drop`` is true."""
    out = [tok]
    for c in tok.children:
        if not drop(c):
            out.extend(_subtree_without(c, drop))
    return sorted(out, key=lambda t: t.i)


def _np(tok: Any) -> list[Any]:
    """A noun phrase without its relative clauses, appositions and coordination."""
    return _subtree_without(tok, _dropped)


def _subject_of(verb: Any) -> Any | None:
    for c in verb.children:
        if c.dep_ in ("nsubj", "nsubjpass", "csubj"):
            return c
    if verb.dep_ == "conj":
        return _subject_of(verb.head)
    return None


def _run_on_subjects(doc: Any) -> dict[int, Any]:
    """Clauses joined by "and" whose second subject the parser took for a member of the first
    clause's object: in "Paris is in France and Berlin is in Germany." spaCy's small model makes
    "Berlin" a conjunct of "France" and the second "is" a subjectless clause under the first.
    Returns ``{verb index: its subject}`` for each finite verb without a subject of its own that
    directly follows such a conjunct (the conjunct preceded by a coordinating word).  Finite: present
    tense, a modal, or a past-tense auxiliary ("was"); a past-tense full verb may be a participle
    that modifies the conjunct ("... meat, oil and blubber called whaling"), so it is left alone."""
    out: dict[int, Any] = {}
    for verb in doc:
        finite = verb.tag_ in ("VBZ", "VBP", "MD") or (verb.tag_ == "VBD" and verb.pos_ == "AUX")
        if not finite or verb.dep_ not in ("advcl", "conj", "ccomp") or verb.i == 0:
            continue
        if any(c.dep_ in ("nsubj", "nsubjpass", "csubj") for c in verb.children):
            continue
        last = doc[verb.i - 1]
        member = next((t for t in (last, *last.ancestors) if t.dep_ == "conj"), None)
        if member is None or member.pos_ not in ("NOUN", "PROPN") or member.head.i > member.i:
            continue
        first = member.left_edge.i
        if member.right_edge.i != verb.i - 1 or first == 0 or doc[first - 1].pos_ != "CCONJ":
            continue
        out[verb.i] = member
    return out


def _clauses(doc: Any) -> list[tuple[list[Any], Any]]:
    """Simple clauses as (tokens in order, predicate); the predicate is used to form the question."""
    clauses: list[tuple[list[Any], Any]] = []
    run_on = _run_on_subjects(doc)
    taken = {s.i for s in run_on.values()}

    def body_of(verb: Any) -> list[Any]:
        return _subtree_without(
            verb, lambda c: _dropped(c) or c.dep_ in ("nsubj", "nsubjpass") or c.i in run_on
        )

    for tok in doc:
        if tok.i in run_on:
            clauses.extend(_expand_coordination(_np(run_on[tok.i]) + body_of(tok), tok, taken))
        elif tok.dep_ == "ROOT" or (tok.dep_ == "conj" and tok.pos_ in ("VERB", "AUX")):
            subj = _subject_of(tok)
            if subj is not None:
                clauses.extend(_expand_coordination(_np(subj) + body_of(tok), tok, taken))
        elif tok.dep_ == "relcl" and tok.head.pos_ in ("NOUN", "PROPN"):
            rel = [
                t
                for t in _subtree_without(tok, lambda c: c.dep_ in ("punct", "relcl"))
                if t.tag_ not in ("WDT", "WP")
            ]
            head = _np(tok.head)
            has_subj = any(
                c.dep_ in ("nsubj", "nsubjpass") and c.tag_ not in ("WDT", "WP") for c in tok.children
            )
            clauses.append((rel + head if has_subj else head + rel, tok))
        elif (
            tok.dep_ == "appos"
            and tok.head.pos_ in ("NOUN", "PROPN")
            and tok.ent_type_ not in _NON_ENTITY_TYPES
        ):
            clauses.append((_np(tok.head) + [_IS] + _np(tok), _IS))
    return clauses


_QUOTES = {'"', "\u201c", "\u201d", "``", "''"}
_BRACKETS = {"(": ")", "[": "]"}
_CLOSING = set(_BRACKETS.values())
_CONTENT_POS = {"NOUN", "PROPN", "ADJ", "NUM", "VERB", "ADV", "ADP", "PRON"}
_EMPTY_PREDICATES = {"not", "n't", "both", "also", "too", "either", "neither", "co", "each"}
_SINGULAR = {"are": "is", "were": "was", "have": "has", "do": "does"}


def _tidy(toks: list[Any]) -> list[Any]:
    """A clause's tokens as a sentence: no quotation marks, no "both", no empty or unpaired brackets."""
    toks = [
        t
        for t in toks
        if t.text not in _QUOTES
        and not (t.lower_ == "both" and t.dep_ != "nsubj")
        and not (t.dep_ == "neg" and t.head.pos_ in ("NOUN", "PROPN"))  # "A, not B": B's, not the clause's
    ]
    keep = [True] * len(toks)
    opened: list[int] = []
    for k, t in enumerate(toks):
        if t.text in _BRACKETS:
            opened.append(k)
        elif t.text in _CLOSING:
            if opened and _BRACKETS[toks[opened[-1]].text] == t.text:
                o = opened.pop()
                if not any(keep[j] and _has_word(toks[j]) for j in range(o + 1, k)):
                    keep[o : k + 1] = [False] * (k + 1 - o)  # no word left between them: "( – )"
            else:
                keep[k] = False
    for o in opened:
        keep[o] = False
    return [t for t, kept in zip(toks, keep, strict=True) if kept]


def _has_word(tok: Any) -> bool:
    return any(ch.isalnum() for ch in tok.text)


def _states_something(toks: list[Any], pred: Any) -> bool:
    """True when a word with content follows the clause's verb: "B were not." states nothing."""
    at = next((k for k, t in enumerate(toks) if t is pred), None)
    if at is None:
        at = next((k for k, t in enumerate(toks) if t.pos_ in ("VERB", "AUX")), None)
    if at is None:
        return False
    rest = toks[at + 1 :] if toks[at].pos_ == "AUX" else toks[at:]
    return any(t.pos_ in _CONTENT_POS and t.lower_ not in _EMPTY_PREDICATES and _has_word(t) for t in rest)


def _denied(toks: list[Any]) -> bool:
    """An apposition clause ("A is B") made from "A, not B": the claim denies it."""
    return any(
        t.dep_ == "appos" and any(c.dep_ == "neg" for c in (*t.children, *t.head.children)) for t in toks
    )


def _agreeing_words(toks: list[Any], pred: Any) -> list[str]:
    """The clause's words; where it keeps one member of a coordinated plural subject, a singular
    member takes the singular verb ("Tampa airport are" -> "Tampa airport is")."""
    words = [t.text for t in toks]
    subj = _subject_of(pred)  # None for an apposition's synthetic "is"
    if subj is None:
        return words
    members = [subj, *(c for c in subj.children if c.dep_ == "conj")]
    kept = [m for m in members if any(t.i == m.i for t in toks)]
    if len(members) < 2 or len(kept) != 1 or kept[0].tag_ not in ("NN", "NNP"):
        return words
    for k, t in enumerate(toks):
        if t.lower_ in _SINGULAR and (t.i == pred.i or (t.i > subj.i and t.head.i == pred.i)):
            words[k] = _SINGULAR[t.lower_]
            break
    return words


class _Word:
    """A synthetic token ("is") inserted into an appositive clause."""

    def __init__(self, text: str) -> None:
        self.text = self.lemma_ = self.lower_ = text
        self.whitespace_ = " "
        self.dep_, self.pos_, self.tag_, self.i = "ROOT", "AUX", "VBZ", -1
        self.children: list[Any] = []


_IS = _Word("is")


def _expand_coordination(
    tokens: list[Any], pred: Any, taken: Container[int] = frozenset()
) -> list[tuple[list[Any], Any]]:
    """One clause per member of the first coordinated noun phrase ("in A and B" -> "in A", "in B");
    ``taken``: conjuncts that are another clause's subject (:func:`_run_on_subjects`), not members."""
    for t in tokens:
        conjs = [
            c for c in t.children if c.dep_ == "conj" and c.pos_ in ("NOUN", "PROPN") and c.i not in taken
        ]
        if not conjs or t.pos_ not in ("NOUN", "PROPN"):
            continue
        members = [t, *conjs]
        span = {x.i for m in members for x in m.subtree} | {x.i for x in t.subtree}
        start = min(span)
        before = [x for x in tokens if x.i < start and x.i not in span]
        after = [x for x in tokens if x.i > max(span)]
        return [(before + _np(m) + after, pred) for m in members]
    return [(tokens, pred)]


def _question(clause: tuple[list[Any], Any]) -> str:
    """Yes/no question from a declarative clause: front the auxiliary, or add do-support."""
    tokens, pred = clause
    toks = [t for t in tokens if t.text not in _SENTENCE_PUNCT]
    words = [t.text for t in toks]
    aux_idx = next(
        (
            i
            for i, t in enumerate(toks)
            if (t.dep_ in ("aux", "auxpass") and t.head.i == pred.i) or (t.i == pred.i and t.pos_ == "AUX")
        ),
        None,
    )
    if aux_idx is not None and aux_idx > 0:
        aux = words.pop(aux_idx)
        toks.pop(aux_idx)
        if toks[0].pos_ != "PROPN":
            words[0] = words[0][:1].lower() + words[0][1:]
        return _join([aux.capitalize(), *words], [None, *toks])
    pos = next((i for i, t in enumerate(toks) if t.i == pred.i), None)
    if pos is not None and pred.pos_ == "VERB":
        do = {"VBZ": "Does", "VBP": "Do"}.get(pred.tag_, "Did")
        words[pos] = pred.lemma_
        return _join([do, *words], [None, *toks])
    return "Is it true that " + _join(words, toks)


def _join(words: list[str], toks: list[Any]) -> str:
    """Join words with single spaces, except where the source had none ("Coster-Waldau")."""
    out = []
    for k, w in enumerate(words):
        out.append(w)
        t, nxt = toks[k], toks[k + 1] if k + 1 < len(toks) else None
        glued = t is not None and nxt is not None and t.i >= 0 and nxt.i == t.i + 1 and not t.whitespace_
        out.append("" if glued else " ")
    return "".join(out).strip()


def _entity_pair_questions(doc: Any, max_pairs: int) -> list[str]:
    ents = [e for e in doc.ents if e.label_ in _PAIR_TYPES]
    out: list[str] = []
    for a, b in itertools.islice(itertools.combinations(ents, 2), max_pairs):
        path = _path_words(a, b)
        out.append(f"{a.text} {' '.join(path)} {b.text}" if path else f"Is {a.text} related to {b.text}")
    return out


def _path_words(a: Any, b: Any) -> list[str]:
    """Words on the dependency path between two spans' roots (the predicate linking them)."""
    up_a = [a.root, *a.root.ancestors]
    up_b = [b.root, *b.root.ancestors]
    common = next((t for t in up_a if t in up_b), None)
    if common is None:
        return []
    path = up_a[: up_a.index(common) + 1] + up_b[: up_b.index(common)]
    inside = set(range(a.start, a.end)) | set(range(b.start, b.end))
    keep = {t.i for t in path if t.i not in inside and t.pos_ in _PATH_POS}
    keep |= {c.i for t in path if t.i in keep for c in t.children if c.dep_ in ("neg", "auxpass", "prt")}
    doc: Sequence[Any] = a.doc
    return [doc[i].text for i in sorted(keep)]
