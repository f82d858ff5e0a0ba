"""Small frozen dataclasses passed between stages.

JSON conversion happens at the edges only (readers, writers, the CLI).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum


class Label(str, Enum):
    """FEVER's three verdicts; the values are FEVER's strings."""

    SUPPORTS = "SUPPORTS"
    REFUTES = "REFUTES"
    NOT_ENOUGH_INFO = "NOT ENOUGH INFO"


@dataclass(frozen=True, order=True)
class SentenceId:
    """Exactly FEVER's evidence pointer: raw page id and sentence number."""

    page: str
    line: int

    def to_json(self) -> list:
        return [self.page, self.line]


@dataclass(frozen=True)
class Sentence:
    """One non-empty sentence of the corpus."""

    id: SentenceId
    text: str
    links: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContrastOf:
    """A claim of a contrast set (``garag contrast``): the claim ``source`` itself (``change``
    "original") or its twin made by a change that keeps every name (``change`` names it)."""

    change: str
    source: int | str


@dataclass(frozen=True)
class Claim:
    """A claim to verify.

    Attributes:
        id: the dataset's claim id (FEVER: int).
        text: the claim as written.
        label: the dataset's own label string, or None for blind test files.
        evidence: gold evidence sets; any one complete set suffices (HoVer has one).
        num_hops: number of evidence pages for multi-hop datasets, else None.
        contrast: in a contrast set, which claim this one is or was made from.
    """

    id: int | str
    text: str
    label: str | None = None
    evidence: tuple[tuple[SentenceId, ...], ...] = ()
    num_hops: int | None = None
    contrast: ContrastOf | None = None

    @property
    def verifiable(self) -> bool:
        """True when the claim has at least one non-empty gold evidence set."""
        return any(len(s) > 0 for s in self.evidence)


@dataclass(frozen=True)
class Hit:
    """A retrieved sentence.

    Attributes:
        sentence: the FEVER ``(page, line)`` id.
        score: higher is better; comparable only within one retriever's list.
        retriever: name of the retriever that produced this hit ("fused" after fusion).
        query: the query text that found it, when several queries were used.
        sources: for fused hits, the retrievers that found the sentence.
    """

    sentence: SentenceId
    score: float
    retriever: str
    query: str | None = None
    sources: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Evidence:
    """A sentence handed to a verifier, with its rank-stage score.

    Attributes:
        sentence: FEVER ``(page, line)`` id.
        text: the sentence as stored (FEVER's PTB tokens for FEVER; verifiers de-tokenise).
        score: retrieval or graph-ranking score (higher is better).
    """

    sentence: SentenceId
    text: str
    score: float = 0.0


@dataclass(frozen=True)
class Verdict:
    """A verifier's decision.

    Attributes:
        label: the verdict.
        explanation: short text naming the deciding sentence ids; no invented facts.
        evidence: predicted evidence ids, at most 5 for FEVER scoring, best first.
        scores: label -> probability (or score) for each of the three labels.
    """

    label: Label
    explanation: str
    evidence: tuple[SentenceId, ...] = ()
    scores: dict[Label, float] = field(default_factory=dict)

    def likelier_unsupported(self) -> Label:
        """REFUTES or NOT ENOUGH INFO, whichever scores higher: the verdict when SUPPORTS is withheld.
        A tie (an LLM verdict scores one label only) goes to NOT ENOUGH INFO."""
        refute = float(self.scores.get(Label.REFUTES, 0.0))
        nei = float(self.scores.get(Label.NOT_ENOUGH_INFO, 0.0))
        return Label.REFUTES if refute > nei else Label.NOT_ENOUGH_INFO

    def noted(self, note: str, withhold: bool = False) -> Verdict:
        """This verdict with ``note`` added to its explanation; with ``withhold``, SUPPORTS withheld
        too: the label becomes :meth:`likelier_unsupported` and the SUPPORTS score moves to it, so
        that what reads the scores (the decision model) sees the doubt."""
        if not withhold:
            return Verdict(self.label, f"{self.explanation} {note}", self.evidence, self.scores)
        label = self.likelier_unsupported()
        scores = dict(self.scores)
        scores[label] = float(scores.get(label, 0.0)) + float(scores.get(Label.SUPPORTS, 0.0))
        scores[Label.SUPPORTS] = 0.0
        return Verdict(label, f"{self.explanation} {note}", self.evidence, scores)


@dataclass(frozen=True)
class Triplet:
    """A fact extracted from one evidence sentence.

    Attributes:
        subject: subject phrase (or the linked corpus entity, a page id, when known).
        relation: relation phrase (e.g. the verb lemma with its preposition).
        object: object phrase (or linked page id).
        confidence: extractor's confidence in [0, 1].
        source: the sentence the fact comes from.
        extractor: which extractor produced it ("syntactic", "llm").
    """

    subject: str
    relation: str
    object: str
    confidence: float
    source: SentenceId
    extractor: str = "syntactic"


def unique_evidence(evidence: Sequence[Evidence]) -> list[Evidence]:
    """Evidence in the given order with repeated sentence ids dropped (first occurrence kept)."""
    seen: set[SentenceId] = set()
    out = []
    for e in evidence:
        if e.sentence not in seen:
            seen.add(e.sentence)
            out.append(e)
    return out
