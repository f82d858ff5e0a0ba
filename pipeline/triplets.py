"""Syntactic triplet extraction: spaCy dependencies -> (subject, relation, object) facts.

Patterns, each with a base confidence (the confidence heuristic):

============================  =====================================  =====
pattern                       example -> triplet                      base
============================  =====================================  =====
subject-verb-object           "X directed Y" -> X | direct | Y        0.90
copula with attribute         "X is an actor" -> X | be | actor       0.85
passive with agent            "Y was directed by X" -> Y | directed   0.85
                              by | X
dative / object predicate     "X named Y president"                   0.80
prepositional object          "X was born in Z" -> X | born in | Z    0.75
adjectival complement         "X is American" -> X | be | American    0.70
apposition                    "X, a lawyer, ..." -> X | be | lawyer   0.70
============================  =====================================  =====

The base is multiplied by 0.9 when the subject is inherited (a conjunct verb,
``xcomp`` or relative clause takes its subject from its head), by 0.85 when a
pronoun subject (he/she/it/they) was replaced by the sentence's page title
(FEVER sentences are about their page, so this is usually right), by 0.5 when
a pronoun is left unresolved, and by 0.9 when a phrase was cut to
``max_phrase_tokens``.  Negated verbs get the relation ``not <verb>`` so that
refuting evidence keeps its polarity.  Relations are verb lemmas plus particle
and preposition; passive verbs keep their participle ("born in", "directed
by"), which reads better than the lemma ("bear in").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from garag.config import TripletConfig
from garag.lru import LRU
from garag.nlp import load_spacy
from garag.text import detokenize, page_to_title
from garag.types import Evidence, SentenceId, Triplet

logger = logging.getLogger(__name__)

_PRONOUNS = {"he", "she", "it", "they"}
_OTHER_PRONOUNS = {"him", "her", "them", "we", "i", "you", "us", "me", "this", "these", "those", "one"}
_REL_TAGS = {"WDT", "WP", "WP$"}
_CLAUSE_DEPS = {"ROOT", "conj", "relcl", "acl", "advcl", "ccomp", "xcomp", "pcomp", "parataxis"}
_MODIFIER_DEPS = {"compound", "amod", "nummod", "poss", "nmod", "quantmod", "flat", "case"}
_OBJECT_BASE = {"dobj": 0.9, "attr": 0.85, "dative": 0.8, "oprd": 0.8, "acomp": 0.7}
_DISAMBIG_RE = re.compile(r"\s*\([^()]*\)\s*$")

Link = Callable[[str], "str | None"]


def page_subject(page: str) -> str:
    """Readable subject for a FEVER page id: ``Liverpool_-LRB-band-RRB-`` -> ``Liverpool``."""
    return _DISAMBIG_RE.sub("", page_to_title(page)).strip()


class SyntacticExtractor:
    """spaCy dependency-pattern triplet extractor (implements ``TripletExtractor``).

    Args:
        config: extraction settings (model name, batch size, limits).
        link: optional entity linker, mention text -> corpus page id (or None when unknown);
            linked subjects/objects are replaced by the page id.
    """

    name = "syntactic"

    CACHE_SENTENCES = 20_000  # sentences whose facts are kept (least recently used dropped first)

    def __init__(
        self,
        config: TripletConfig | None = None,
        link: Link | None = None,
        cache_sentences: int = CACHE_SENTENCES,
    ) -> None:
        self.config = config or TripletConfig()
        self._link = link
        self._nlp: Any = None
        # A sentence's facts depend on its id and text only: program steps and claims of a batch
        # share most of their evidence pools, so each sentence is parsed once.
        self._cache: LRU[tuple[SentenceId, str], list[Triplet]] = LRU(cache_sentences)

    def load(self) -> SyntacticExtractor:
        """Load the spaCy pipeline (shared per process); idempotent."""
        if self._nlp is None:
            self._nlp = load_spacy(self.config.spacy_model)
        return self

    def extract(self, evidence: Sequence[Evidence]) -> list[Triplet]:
        """Facts from every evidence sentence, grouped by sentence in input order.

        Raises:
            TypeError: an item is not an ``Evidence``.
        """
        for i, ev in enumerate(evidence):
            if not isinstance(ev, Evidence):
                raise TypeError(f"evidence[{i}]: expected Evidence, got {type(ev).__name__}")
        self.load()
        keys = [(ev.sentence, ev.text) for ev in evidence]
        link_cache: dict[str, str] = {}

        def parse(todo: list[tuple[SentenceId, str]]) -> list[list[Triplet]]:
            docs = self._nlp.pipe([detokenize(text) for _, text in todo], batch_size=self.config.batch_size)
            return [self._from_doc(doc, key[0], link_cache) for key, doc in zip(todo, docs, strict=True)]

        return [t for facts in self._cache.values(keys, parse) for t in facts]

    @property
    def parsed(self) -> int:
        """Sentences parsed so far (cache misses)."""
        return self._cache.computed

    # -- per sentence ---------------------------------------------------------------------------

    def _from_doc(self, doc: Any, source: SentenceId, link_cache: dict[str, str]) -> list[Triplet]:
        ent_of = {i: ent for ent in doc.ents for i in range(ent.start, ent.end)}
        best: dict[tuple[str, str, str], float] = {}
        for subj, rel, obj, conf in _raw_triplets(doc, ent_of, source, self.config):
            if not subj or not obj or not rel or subj.casefold() == obj.casefold():
                continue
            key = (self._linked(subj, link_cache), rel, self._linked(obj, link_cache))
            best[key] = max(best.get(key, 0.0), conf)
        ranked = sorted(best.items(), key=lambda kv: -kv[1])  # stable: ties keep sentence order
        return [
            Triplet(s, r, o, round(c, 4), source, self.name)
            for (s, r, o), c in ranked[: self.config.max_per_sentence]
            if c >= self.config.min_confidence
        ]

    def _linked(self, phrase: str, cache: dict[str, str]) -> str:
        if self._link is None:
            return phrase
        if phrase not in cache:
            cache[phrase] = self._link(phrase) or phrase
        return cache[phrase]


def _raw_triplets(
    doc: Any, ent_of: dict, source: SentenceId, config: TripletConfig
) -> list[tuple[str, str, str, float]]:
    """(subject, relation, object, confidence) candidates of one parsed sentence."""
    found: list[tuple[str, str, str, float]] = []
    for tok in doc:
        if _is_apposition(tok):
            s, s_conf = _subject_phrase(tok.head, ent_of, source, config)
            o, o_cut = _phrase(tok, ent_of, config.max_phrase_tokens)
            found.append((s, "be", o, 0.7 * s_conf * (0.9 if o_cut else 1.0)))
        if not _is_predicate(tok):
            continue
        subjects = _subjects(tok)
        if not subjects:
            continue
        relation = _relation(tok)
        for obj_tok, rel, base in _objects(tok, relation):
            o, o_cut = _phrase(obj_tok, ent_of, config.max_phrase_tokens)
            o_conf = 0.5 if obj_tok.lower_ in _PRONOUNS | _OTHER_PRONOUNS else 1.0
            for subj_tok, inherited in subjects:
                s, s_conf = _subject_phrase(subj_tok, ent_of, source, config)
                conf = base * s_conf * o_conf * (0.9 if inherited else 1.0) * (0.9 if o_cut else 1.0)
                found.append((s, rel, o, conf))
    return found


def _is_predicate(tok: Any) -> bool:
    if tok.pos_ == "VERB":
        return tok.dep_ in _CLAUSE_DEPS
    # Copula "be" as the clause head ("X is an actor"): spaCy tags it AUX with an attr/acomp child.
    return tok.pos_ == "AUX" and tok.dep_ in _CLAUSE_DEPS and tok.lemma_ == "be"


def _passive(verb: Any) -> bool:
    if verb.dep_ == "acl" and verb.tag_ == "VBN":
        return True
    return any(c.dep_ in ("auxpass", "nsubjpass") for c in verb.children)


def _relation(verb: Any) -> str:
    word = verb.lower_ if _passive(verb) else verb.lemma_.lower()
    parts = [word] + [c.lower_ for c in verb.children if c.dep_ == "prt"]
    if any(c.dep_ == "neg" for c in verb.children):
        parts.insert(0, "not")
    return " ".join(parts)


def _with_conjuncts(tok: Any) -> list[Any]:
    out, stack = [], [tok]
    while stack:
        t = stack.pop(0)
        out.append(t)
        stack.extend(c for c in t.children if c.dep_ == "conj" and c.pos_ in ("NOUN", "PROPN", "PRON", "NUM"))
    return out


def _subjects(verb: Any, depth: int = 0) -> list[tuple[Any, bool]]:
    """Subject tokens of a predicate, with a flag for subjects taken from the head clause."""
    direct = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")]
    if direct:
        out = []
        for s in direct:
            if s.tag_ in _REL_TAGS and verb.dep_ == "relcl":
                out.append((verb.head, True))  # "the actor who starred ..." -> the actor
            else:
                out.extend((t, False) for t in _with_conjuncts(s))
        return out
    if depth > 3:
        return []
    if verb.dep_ in ("relcl", "acl") and verb.head.pos_ in ("NOUN", "PROPN"):
        return [(verb.head, True)]
    if verb.dep_ in ("conj", "xcomp", "advcl") and verb.head is not verb:
        return [(t, True) for t, _ in _subjects(verb.head, depth + 1)]
    return []


def _objects(verb: Any, relation: str) -> list[tuple[Any, str, float]]:
    out: list[tuple[Any, str, float]] = []
    is_copula = verb.lemma_ == "be"
    for c in verb.children:
        dep = c.dep_
        if dep in ("attr", "acomp") and not is_copula:
            continue
        if dep in _OBJECT_BASE:
            target = verb.head if c.tag_ in _REL_TAGS and verb.dep_ == "relcl" else _named(c)
            out.extend((t, relation, _OBJECT_BASE[dep]) for t in _with_conjuncts(target))
        elif dep in ("prep", "agent"):
            base = 0.85 if dep == "agent" else 0.75
            rel = f"{relation} {c.lower_}"
            for p in c.children:
                if p.dep_ == "pobj":
                    out.extend((t, rel, base) for t in _with_conjuncts(_named(p)))
    return out


def _named(tok: Any) -> Any:
    """ "the film Titanic": spaCy makes the name an apposition of "film"; the name is the better object."""
    for c in tok.children:
        if c.dep_ == "appos" and c.pos_ == "PROPN" and c.i == tok.i + 1:
            return c
    return tok


def _is_apposition(tok: Any) -> bool:
    """ "X, a lawyer, ..." but not parentheticals ("X (born 1961)") nor dates, nor "the film Titanic"."""
    if tok.dep_ != "appos" or tok.head.pos_ not in ("NOUN", "PROPN") or tok.ent_type_ in ("DATE", "CARDINAL"):
        return False
    left = tok.left_edge.i
    if left > 0 and tok.doc[left - 1].text in ("(", "["):
        return False
    return not (tok.pos_ == "PROPN" and tok.i == tok.head.i + 1)


def _subject_phrase(tok: Any, ent_of: dict, source: SentenceId, config: TripletConfig) -> tuple[str, float]:
    """Subject text and its confidence factor (pronoun resolution, truncation)."""
    if tok.lower_ in _PRONOUNS:
        if config.resolve_pronouns:
            return page_subject(source.page), 0.85
        return tok.text, 0.5
    if tok.lower_ in _OTHER_PRONOUNS:
        return tok.text, 0.5
    text, cut = _phrase(tok, ent_of, config.max_phrase_tokens)
    return text, 0.9 if cut else 1.0


def _phrase(tok: Any, ent_of: dict, max_tokens: int) -> tuple[str, bool]:
    """Noun phrase around a head token: its named entity, or head plus modifiers; (text, truncated)."""
    ent = ent_of.get(tok.i)
    if ent is not None and ent.root.i == tok.i or (ent is not None and tok.pos_ == "PROPN"):
        return re.sub(r"^(?:the|a|an) ", "", ent.text.strip(), flags=re.IGNORECASE), False
    keep = {tok.i}
    for c in tok.children:
        if c.dep_ in _MODIFIER_DEPS:
            keep.update(t.i for t in c.subtree)
        elif c.dep_ == "prep" and c.lower_ == "of":
            keep.update(t.i for t in c.subtree)
    lo, hi = min(keep), max(keep)
    doc = tok.doc
    while lo < tok.i and (doc[lo].pos_ in ("DET", "PUNCT", "CCONJ") or doc[lo].dep_ in ("det", "punct")):
        lo += 1
    while hi > tok.i and doc[hi].pos_ in ("PUNCT", "CCONJ"):
        hi -= 1
    cut = hi - lo + 1 > max_tokens
    if cut:
        lo = max(lo, tok.i - max_tokens + 1)
        hi = min(hi, lo + max_tokens - 1)
    return doc[lo : hi + 1].text.strip(), cut
