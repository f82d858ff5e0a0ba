"""LLM verifier: claim + numbered evidence (optionally with graph triplet lines) -> cited verdict.

The model must cite the evidence ids ("[3]") it relies on.  Ids that were not in
the prompt are flagged (counted as ``invalid_citations``) and dropped from the
explanation and the evidence.  FEVER's predicted evidence is the cited sentences
first, then the rest of the ranked evidence, at most five.  When the reply is
unusable (invalid after one repair, timeout, backend failure) the optional
fallback verifier (e.g. the NLI verifier) decides, and that is counted too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, field_validator

from garag.llm import LLMClient
from garag.text import detokenize, page_to_title
from garag.types import Evidence, Label, SentenceId, Verdict
from prompts import PromptFile, load_prompt
from verifier.base import MAX_PREDICTED_EVIDENCE, RankedFacts
from verifier.explain import cite

logger = logging.getLogger(__name__)

STAGE = "verdict"
_BRACKETS_RE = re.compile(r"\[([^\[\]]{1,40})\]")
_SPACES_RE = re.compile(r"[ \t]{2,}")
_LABEL_ALIASES = {
    "NEI": "NOT ENOUGH INFO",
    "NOT_ENOUGH_INFO": "NOT ENOUGH INFO",
    "NOTENOUGHINFO": "NOT ENOUGH INFO",
}


class VerdictReply(BaseModel):
    """Reply of the verdict prompt."""

    label: Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    explanation: str = Field(max_length=800)
    evidence: list[str] = Field(default_factory=list, max_length=10)

    @field_validator("label", mode="before")
    @classmethod
    def _normalise_label(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        label = " ".join(value.strip().upper().replace("_", " ").split())
        return _LABEL_ALIASES.get(label.replace(" ", "_"), label)

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence_as_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [str(v) for v in value]
        return value


@dataclass(frozen=True)
class PromptEvidence:
    """One evidence item as the verdict prompt shows it.

    Attributes:
        ref: the id the model cites, e.g. "[3]".
        sentence: the FEVER sentence it stands for.
        text: the sentence (FEVER PTB text is de-tokenised when shown).
        triplets: optional "subject | relation | object" lines from the graph.
        score: ranking score (higher is better).
    """

    ref: str
    sentence: SentenceId
    text: str
    triplets: tuple[str, ...] = ()
    score: float = 0.0

    def to_evidence(self) -> Evidence:
        return Evidence(self.sentence, self.text, self.score)


def prompt_evidence(
    evidence: Sequence[Evidence], triplet_lines: Mapping[SentenceId, Sequence[str]] | None = None
) -> list[PromptEvidence]:
    """Number ranked evidence "[1]".."[n]" (duplicates dropped), attaching triplet lines per sentence."""
    out: list[PromptEvidence] = []
    seen: set[SentenceId] = set()
    for e in evidence:
        if e.sentence in seen:
            continue
        seen.add(e.sentence)
        lines = tuple(triplet_lines.get(e.sentence, ())) if triplet_lines else ()
        out.append(PromptEvidence(f"[{len(out) + 1}]", e.sentence, e.text, lines, e.score))
    return out


def format_evidence(items: Sequence[PromptEvidence]) -> str:
    """``[n] Title (page, line): sentence`` blocks, triplet lines indented below."""
    blocks = []
    for it in items:
        head = f"{it.ref} {page_to_title(it.sentence.page)} ({it.sentence.page}, {it.sentence.line}): "
        blocks.append(head + detokenize(it.text))
        blocks.extend(f"    - {t}" for t in it.triplets)
    return "\n".join(blocks) if blocks else "(no evidence)"


def _normal_ref(token: str) -> str:
    return f"[{token.strip().strip('[]').strip()}]"


def cited_refs(reply: VerdictReply) -> list[str]:
    """Ids the reply cites, in order: its ``evidence`` list, then ``[n]`` marks in the explanation."""
    refs = [_normal_ref(r) for r in reply.evidence if r.strip().strip("[]").strip()]
    for group in _BRACKETS_RE.findall(reply.explanation):
        refs.extend(_normal_ref(part) for part in group.split(",") if part.strip())
    return list(dict.fromkeys(refs))


def resolve_refs(explanation: str, ids: Mapping[str, SentenceId]) -> str:
    """Replace the prompt's ids by sentence ids: "[2] and [1, 9]" -> "(B, 1) and (A, 0)" when
    ``ids`` maps "[1]" to (A, 0) and "[2]" to (B, 1); ids not in ``ids`` (invented) are dropped,
    and a bracket group left with none disappears.  The prompt's numbers mean nothing to a
    reader of the output; ``(page, line)`` is how every explanation cites evidence."""

    def sub(m: re.Match[str]) -> str:
        parts = [_normal_ref(p) for p in m.group(1).split(",") if p.strip()]
        return ", ".join(dict.fromkeys(cite(ids[p]) for p in parts if p in ids))

    text = _BRACKETS_RE.sub(sub, explanation)
    return _SPACES_RE.sub(" ", text).replace(" .", ".").replace(" ,", ",").strip()


def predicted_evidence(cited: Sequence[SentenceId], ranked: Sequence[SentenceId]) -> tuple[SentenceId, ...]:
    """Cited ids first, then the ranked rest, unique, at most five (FEVER)."""
    return tuple(dict.fromkeys([*cited, *ranked]))[:MAX_PREDICTED_EVIDENCE]


class FallbackVerifier(Protocol):
    def verify(self, claim: str, evidence: Sequence[Evidence]) -> Verdict: ...


@dataclass(frozen=True)
class LLMVerdict:
    """A verdict with what happened on the way.

    Attributes:
        verdict: the result.
        cited: valid ids the model cited.
        flagged: ids the model cited that were not in the prompt (dropped).
        fallback: the verdict came from the fallback (or the no-fallback default).
        reason: "" or why the LLM reply was unusable ("timeout", "error", "invalid").
    """

    verdict: Verdict
    cited: tuple[str, ...] = ()
    flagged: tuple[str, ...] = ()
    fallback: bool = False
    reason: str = ""


class LLMVerifier:
    """Verifier role over a chat model.

    Args:
        client: an LLMClient (``load()`` loads it).
        fallback: any object with ``verify(claim, evidence) -> Verdict`` (e.g. NLIVerifier),
            used when the LLM reply is unusable; None = NOT ENOUGH INFO.
        max_evidence: evidence items shown to the model.
        prompt: the verdict prompt (default: ``prompts/verdict.yaml``).
        triplets_per_fact: graph triplet lines shown under each sentence (graph mode).
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        fallback: FallbackVerifier | None = None,
        max_evidence: int = 10,
        prompt: PromptFile | None = None,
        triplets_per_fact: int = 3,
    ) -> None:
        if max_evidence < 1:
            raise ValueError(f"max_evidence must be >= 1, got {max_evidence}")
        self.client = client
        self.fallback = fallback
        self.max_evidence = max_evidence
        self.prompt = prompt if prompt is not None else load_prompt("verdict")
        self.triplets_per_fact = triplets_per_fact

    def load(self) -> LLMVerifier:
        self.client.load()
        loader = getattr(self.fallback, "load", None)
        if callable(loader):
            loader()
        return self

    def inputs(
        self, evidence: Sequence[Evidence], ranking: RankedFacts | None, top_k: int
    ) -> tuple[list[Evidence], list[PromptEvidence]]:
        """The first ``max_evidence`` sentences (not ``top_k``: every prompt token costs), numbered
        for the prompt with the graph's triplet lines where there is a graph ranking."""
        shown = list(evidence[: self.max_evidence])
        lines = ranking.triplet_lines(self.triplets_per_fact) if ranking is not None else None
        return shown, prompt_evidence(shown, lines)

    def verify(self, claim: str, evidence: Sequence[Evidence] | Sequence[PromptEvidence]) -> Verdict:
        return self.verify_detailed(claim, evidence).verdict

    def verify_batch(
        self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence] | Sequence[PromptEvidence]]
    ) -> list[Verdict]:
        if len(claims) != len(evidence):
            raise ValueError(f"verify_batch: {len(claims)} claims but {len(evidence)} evidence lists")
        return [self.verify(c, e) for c, e in zip(claims, evidence, strict=True)]

    def verify_detailed(
        self, claim: str, evidence: Sequence[Evidence] | Sequence[PromptEvidence]
    ) -> LLMVerdict:
        """The verdict plus cited and flagged ids and whether it fell back."""
        if not claim.strip():
            raise ValueError("verify: the claim is empty")
        items = [e for e in evidence if isinstance(e, PromptEvidence)]
        if len(items) != len(evidence):
            items = prompt_evidence([e for e in evidence if isinstance(e, Evidence)])
        refs = [it.ref for it in items]
        if len(set(refs)) != len(refs):
            raise ValueError(f"verify: evidence ids must be unique, got {refs}")
        ranked = [it.sentence for it in items]
        if not items:
            verdict = Verdict(
                Label.NOT_ENOUGH_INFO, "No evidence was retrieved.", (), _one_hot(Label.NOT_ENOUGH_INFO)
            )
            return LLMVerdict(verdict)
        shown = items[: self.max_evidence]
        messages = self.prompt.render(claim=" ".join(claim.split()), evidence=format_evidence(shown))
        reply = self.client.chat_json(STAGE, messages, VerdictReply, prompt_sha=self.prompt.sha256)
        if reply.value is None:
            return self._fall_back(claim, items, reply.reason)
        by_ref = {it.ref: it.sentence for it in shown}
        cited = cited_refs(reply.value)
        valid = [r for r in cited if r in by_ref]
        flagged = [r for r in cited if r not in by_ref]
        if flagged:
            self.client.stats.add(STAGE, invalid_citations=len(flagged))
            logger.info("verdict: dropped citations not in the prompt: %s", flagged)
        label = Label(reply.value.label)
        explanation = resolve_refs(reply.value.explanation, by_ref)  # drops the flagged ids
        explanation = explanation or f"The model answered {label.value}."
        verdict = Verdict(
            label, explanation, predicted_evidence([by_ref[r] for r in valid], ranked), _one_hot(label)
        )
        return LLMVerdict(verdict, tuple(valid), tuple(flagged))

    def _fall_back(self, claim: str, items: Sequence[PromptEvidence], reason: str) -> LLMVerdict:
        ranked = [it.sentence for it in items]
        if self.fallback is not None:
            self.client.stats.add(STAGE, verifier_fallbacks=1)
            v = self.fallback.verify(claim, [it.to_evidence() for it in items])
            note = f"[LLM verdict unavailable ({reason}); fallback verifier] "
            return LLMVerdict(
                Verdict(v.label, note + v.explanation, v.evidence, v.scores), fallback=True, reason=reason
            )
        verdict = Verdict(
            Label.NOT_ENOUGH_INFO,
            f"LLM verdict unavailable ({reason}) and no fallback verifier.",
            predicted_evidence((), ranked),
            {},
        )
        return LLMVerdict(verdict, fallback=True, reason=reason)


def _one_hot(label: Label) -> dict[Label, float]:
    return {lab: float(lab is label) for lab in Label}
