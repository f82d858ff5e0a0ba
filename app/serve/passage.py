"""A passage -> its check-worthy claims, each with its character offsets in the passage.

Sentences come from spaCy (the config's ``decomposition.spacy_model``), with the
offsets of their first and last non-space characters, so that ``passage[start:end]``
is the sentence exactly as written.  A sentence is check-worthy when it states
something an encyclopedia can confirm or refute: a name, a number or a date, and a
verb; not a question, an instruction, an opinion, a first-person or a hedged
statement, and at least :data:`MIN_WORDS` words.  Each sentence's ``reason`` says
which rule decided.

:class:`RuleClaimSplitter` makes one claim per check-worthy sentence, its text the
sentence as written.  :class:`LLMClaimSplitter` (for configs with an LLM) asks the
model to restate each check-worthy sentence as standalone claims (pronouns resolved
from the sentence before it); a claim keeps its sentence's offsets.  A reply that is
unusable, or a claim that shares no content word with its sentence (a small model's
invention), falls back to the sentence itself.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import BaseModel, Field

from garag.nlp import load_spacy

logger = logging.getLogger(__name__)

MIN_WORDS = 4
# a claim of a passage is checked in the same way as a claim of /v1/verify (models.MAX_CLAIM_CHARS)
MAX_SENTENCE_CHARS = 2000

_FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves".split())
# verbs and words that make a sentence the writer's view rather than a fact about the world
_OPINION_LEMMAS = frozenset(
    "think believe feel guess suppose reckon hope wish love hate like prefer recommend "
    "should ought must opinion".split()
)
_OPINION_WORDS = frozenset(
    "best worst greatest beautiful ugly amazing awesome terrible awful boring "
    "wonderful overrated underrated".split()
)
_HEDGES = frozenset(
    "maybe perhaps probably possibly might may could allegedly reportedly supposedly apparently "
    "likely unlikely rumoured rumored seemingly arguably".split()
)
_QUESTION_WORDS = frozenset("who whom whose what which when where why how".split())
_CHECKABLE_ENTS = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LANGUAGE", "LAW",
     "DATE", "TIME", "CARDINAL", "ORDINAL", "PERCENT", "MONEY", "QUANTITY"}
)  # fmt: skip
_WORD_RE = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Sentence:
    """One sentence of a passage: ``passage[start:end] == text``; ``reason`` says why it is (not)
    check-worthy."""

    text: str
    start: int
    end: int
    checkworthy: bool
    reason: str


@dataclass(frozen=True)
class PassageClaim:
    """One claim to verify: ``text`` (the sentence as written, or the LLM's restatement of it),
    the offsets of its sentence, and how it was made ("sentence" or "llm")."""

    text: str
    start: int
    end: int
    sentence: int
    reason: str
    source: str = "sentence"


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def judge_sentence(span: Any) -> tuple[bool, str]:
    """Whether a spaCy sentence span is check-worthy, and the rule that said so."""
    words = [t for t in span if not (t.is_punct or t.is_space)]
    lower = {t.lower_ for t in words}
    text = span.text.strip()
    if not words:
        return False, "no words"
    if text.rstrip("\"')]”’ ").endswith("?") or (
        words[0].lower_ in _QUESTION_WORDS and words[0].tag_ in ("WDT", "WP", "WP$", "WRB")
    ):
        return False, "a question"
    if len(words) < MIN_WORDS:
        return False, f"too short (fewer than {MIN_WORDS} words)"
    if len(text) > MAX_SENTENCE_CHARS:
        return False, f"longer than {MAX_SENTENCE_CHARS} characters"
    if lower & _FIRST_PERSON:
        return False, "first person (the writer's own experience)"
    if any(t.lemma_.lower() in _OPINION_LEMMAS for t in words) or lower & _OPINION_WORDS:
        return False, "an opinion"
    hedges = [t.text for t in words if t.lower_ in _HEDGES]
    if hedges:
        return False, f"hedged ({hedges[0]!r})"
    if not any(t.pos_ in ("VERB", "AUX") for t in words):
        return False, "no verb"
    root = span.root
    if root.tag_ == "VB" and not any(c.dep_ in ("nsubj", "nsubjpass", "expl") for c in root.children):
        return False, "an instruction"
    names = [e.text for e in span.ents if e.label_ in _CHECKABLE_ENTS]
    if names:
        return True, "states a fact about " + ", ".join(dict.fromkeys(names))
    if any(t.like_num or t.pos_ == "PROPN" for t in words):
        return True, "states a fact with a name or number"
    return False, "nothing checkable (no name, number or date)"


def split_sentences(passage: str, nlp: Any) -> list[Sentence]:
    """The passage's sentences with their offsets and check-worthiness (empty ones dropped)."""
    out = []
    for span in nlp(passage).sents:
        start, end = _trimmed(passage, span.start_char, span.end_char)
        if start == end:
            continue
        ok, reason = judge_sentence(span)
        out.append(Sentence(passage[start:end], start, end, ok, reason))
    return out


class RuleClaimSplitter:
    """One claim per check-worthy sentence, its text the sentence as written.

    Args:
        spacy_model: the spaCy pipeline (loaded once per process by :func:`garag.nlp.load_spacy`).
    """

    name = "rule"

    def __init__(self, spacy_model: str) -> None:
        self.spacy_model = spacy_model
        self._nlp: Any = None

    def load(self) -> RuleClaimSplitter:
        if self._nlp is None:
            self._nlp = load_spacy(self.spacy_model)
        return self

    def sentences(self, passage: str) -> list[Sentence]:
        return split_sentences(passage, self.load()._nlp)

    def claims(self, sentences: Sequence[Sentence]) -> list[PassageClaim]:
        return [
            PassageClaim(s.text, s.start, s.end, i, s.reason)
            for i, s in enumerate(sentences)
            if s.checkworthy
        ]


class PassageClaims(BaseModel):
    """Reply of the passage-claims prompt."""

    claims: list[Annotated[str, Field(max_length=300)]] = Field(max_length=5)


def _content(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.casefold()) if len(w) > 3 or w.isdigit()}


class LLMClaimSplitter:
    """Each check-worthy sentence restated by the LLM as standalone claims (``prompts/passage_claims``).

    Args:
        client: a loaded :class:`garag.llm.LLMClient` (its cache answers a passage asked again).
        rule: the rule splitter: the sentences, and the claims where a reply is unusable.
        max_claims: at most this many claims per sentence.
    """

    name = "llm"

    def __init__(self, client: Any, rule: RuleClaimSplitter, max_claims: int = 3) -> None:
        from prompts import load_prompt

        self.client, self.rule, self.max_claims = client, rule, max_claims
        self.prompt = load_prompt("passage_claims")
        self.fallbacks = 0  # sentences whose claims are the sentence itself

    def sentences(self, passage: str) -> list[Sentence]:
        return self.rule.sentences(passage)

    def claims(self, sentences: Sequence[Sentence]) -> list[PassageClaim]:
        out: list[PassageClaim] = []
        for base in self.rule.claims(sentences):
            before = sentences[base.sentence - 1].text if base.sentence > 0 else ""
            texts = self._ask(base.text, before)
            if not texts:
                self.fallbacks += 1
                out.append(base)
                continue
            out.extend(replace(base, text=t, source="llm") for t in texts)
        return out

    def _ask(self, sentence: str, before: str) -> list[str]:
        messages = self.prompt.render(
            sentence=sentence, context=before or "(none)", max_claims=self.max_claims
        )
        reply = self.client.chat_json(
            "passage_claims", messages, PassageClaims, prompt_sha=self.prompt.sha256
        )
        if reply.value is None:
            return []
        return usable_claims(reply.value.claims, sentence, before, self.max_claims)


def _numbers(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text) if w.isdigit()}


def _names(sentence: str) -> set[str]:
    """Capitalised words after the first: the names a sentence's claims must keep."""
    words = _WORD_RE.findall(sentence)[1:]
    return {w.casefold() for w in words if w[:1].isupper()}


def usable_claims(claims: Sequence[str], sentence: str, before: str, limit: int) -> list[str]:
    """The model's claims for ``sentence`` that are the writer's, or none (then the sentence is used).

    A claim is dropped when it is a question, shorter than 3 words, shares no content word with the
    sentence, takes most of its content words from elsewhere, or states a number that neither the
    sentence nor ``before`` has (a small model copies its examples' dates).  If the claims left do not
    together keep every number and name of the sentence, part of what the writer said would go
    unchecked: none are used.
    """
    words = _content(sentence) | _content(before)
    numbers = _numbers(sentence) | _numbers(before)
    keep: list[str] = []
    for claim in claims:
        claim = " ".join(claim.split())
        content = _content(claim)
        if len(claim.split()) < 3 or claim.endswith("?") or not content & _content(sentence):
            continue
        if len(content & words) < 0.6 * len(content) or not _numbers(claim) <= numbers or claim in keep:
            continue
        keep.append(claim)
    keep = keep[:limit]
    said = {w.casefold() for c in keep for w in _WORD_RE.findall(c)}
    if not keep or not (_numbers(sentence) | _names(sentence)) <= said:
        return []
    return keep
