"""LLM implementations of the Decomposer and TripletExtractor roles.

Both ask for JSON of a pydantic schema through ``LLMClient.chat_json`` and fall
back (counted in the client's stats) to an optional rule-based stage when a
reply stays invalid, times out or fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from garag.llm import LLMClient
from garag.llm.client import Structured
from garag.text import detokenize, page_to_title
from garag.types import Evidence, Triplet
from pipeline.programs import (
    Program,
    ProgramError,
    RuleProgrammer,
    parse_step_lines,
    program_from_steps,
    program_or_fallback,
)
from pipeline.protocols import Decomposer, TripletExtractor
from prompts import PromptFile, load_prompt

logger = logging.getLogger(__name__)

LLM_TRIPLET_CONFIDENCE = 0.7  # the model gives no calibrated confidence; below a clean syntactic parse
_SPACE_RE = re.compile(r"\s+")


class Subquestions(BaseModel):
    """Reply of the decomposition prompt."""

    questions: list[Annotated[str, Field(max_length=200)]] = Field(max_length=10)


class TripletItem(BaseModel):
    """One extracted fact; ``sentence`` is the 1-based number in the prompt."""

    sentence: int
    subject: str = Field(max_length=120)
    relation: str = Field(max_length=80)
    object: str = Field(max_length=120)


class TripletBatch(BaseModel):
    """Reply of the triplet prompt."""

    triplets: list[TripletItem] = Field(max_length=40)


def _norm(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip()


def clean_questions(questions: Sequence[str], claim: str, limit: int) -> list[str]:
    """Strip, end with "?", drop empties and restatements of the claim, dedup (case-insensitive), cap."""
    seen = {_norm(claim).rstrip(".?!").casefold()}
    out: list[str] = []
    for q in questions:
        q = _norm(q).strip("\"' ")
        if not q:
            continue
        key = q.rstrip(".?!").casefold()
        if key in seen:
            continue
        seen.add(key)
        out.append(q.rstrip(".!") + ("" if q.endswith("?") else "?"))
        if len(out) >= limit:
            break
    return out


class LLMDecomposer:
    """Claim -> at most ``max_questions`` yes/no subquestions from the few-shot decomposition prompt.

    Args:
        client: a loaded LLMClient.
        max_questions: upper bound on subquestions.
        fallback: a Decomposer used when the reply is unusable (None = no subquestions).
        prompt: the decomposition prompt (default: ``prompts/decompose.yaml``).
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        max_questions: int = 5,
        fallback: Decomposer | None = None,
        prompt: PromptFile | None = None,
    ) -> None:
        if max_questions < 0:
            raise ValueError(f"max_questions must be >= 0, got {max_questions}")
        self.client = client
        self.max_questions = max_questions
        self.fallback = fallback
        self.prompt = prompt if prompt is not None else load_prompt("decompose")

    def decompose(self, claim: str) -> list[str]:
        if not claim.strip():
            raise ValueError("decompose: the claim is empty")
        if self.max_questions == 0:
            return []
        messages = self.prompt.render(claim=_norm(claim), max_questions=self.max_questions)
        reply = self.client.chat_json("decompose", messages, Subquestions, prompt_sha=self.prompt.sha256)
        if reply.value is None:
            if self.fallback is None:
                return []
            return self.fallback.decompose(claim)[: self.max_questions]
        return clean_questions(reply.value.questions, claim, self.max_questions)


class ProgramStepReply(BaseModel):
    """One step of the program prompt's reply."""

    op: Literal["Verify", "Question"]
    text: str = Field(min_length=1, max_length=300)


class ProgramReply(BaseModel):
    """Reply of the program prompt."""

    steps: list[ProgramStepReply] = Field(min_length=1, max_length=8)


class LLMProgrammer:
    """Claim -> reasoning program from the few-shot program prompt (``prompts/program.yaml``).

    The reply is ``Verify: ...`` / ``Question: ...`` lines (a prompt with ``reply: lines``, the
    default prompt) or schema-constrained JSON (``reply: json``), then validated as a program
    (slots answered before use, at least one Verify step, at most ``accept_steps``); an unusable
    reply gives the rule program instead.  ``counts`` tallies "llm" and "fallback" programs.

    Args:
        client: a loaded LLMClient (cached, so a rerun asks nothing again).
        fallback: the rule programmer.
        max_steps: the steps the prompt asks for at most.
        accept_steps: a reply of up to this many steps is used (0: ``max_steps``).
        max_tokens: a step-lines reply is cut at this many tokens and then unusable (None: the
            client's ``llm.max_tokens``).
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        fallback: RuleProgrammer,
        max_steps: int = 4,
        prompt: PromptFile | None = None,
        accept_steps: int = 0,
        max_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.fallback = fallback
        self.max_steps = max_steps
        self.accept_steps = max(max_steps, accept_steps)
        self.max_tokens = max_tokens or None
        self.prompt = prompt if prompt is not None else load_prompt("program")
        self.counts: dict[str, int] = {}

    def _messages(self, claim: str) -> list:
        return self.prompt.render(claim=_norm(claim), max_steps=self.max_steps)

    def _lines_program(self, text: Structured[str]) -> Program:
        if text.value is None:
            raise ProgramError(f"the model gave no program ({text.reason})")
        return parse_step_lines(text.value, self.accept_steps)

    def _lines_options(self) -> dict:
        # a reply that begins a line past accept_steps is unusable whatever follows: stop there
        return {
            "prompt_sha": self.prompt.sha256,
            "max_tokens": self.max_tokens,
            "max_lines": self.accept_steps,
        }

    def _ask(self, claim: str) -> Program:
        messages = self._messages(claim)
        if self.prompt.reply == "lines":  # plain step lines: no grammar, about half the tokens of JSON
            return self._lines_program(self.client.chat_text("program", messages, **self._lines_options()))
        reply = self.client.chat_json("program", messages, ProgramReply, prompt_sha=self.prompt.sha256)
        if reply.value is None:
            raise ProgramError("the model gave no valid program")
        return program_from_steps([(s.op, s.text) for s in reply.value.steps], self.accept_steps)

    def program(self, claim: str) -> Program:
        if not claim.strip():
            raise ValueError("program: the claim is empty")
        return program_or_fallback(self._ask, self.fallback, claim, self.counts)

    def programs(self, claims: Sequence[str]) -> list[Program]:
        """``program`` for many claims; with a step-lines prompt the model is asked for all of them
        at once (``LLMClient.chat_text_many``: decoded together on the in-process model)."""
        if any(not c.strip() for c in claims):
            raise ValueError("program: the claim is empty")
        if self.prompt.reply != "lines" or len(claims) < 2:
            return [self.program(c) for c in claims]
        texts = self.client.chat_text_many(
            "program", [self._messages(c) for c in claims], **self._lines_options()
        )
        return [
            program_or_fallback(lambda _c, t=t: self._lines_program(t), self.fallback, c, self.counts)
            for c, t in zip(claims, texts, strict=True)
        ]


def format_sentences(evidence: Sequence[Evidence]) -> str:
    """``[n] Page title: sentence`` lines (1-based), de-tokenised for the model."""
    return "\n".join(
        f"[{i}] {page_to_title(e.sentence.page)}: {detokenize(e.text)}" for i, e in enumerate(evidence, 1)
    )


def triplets_from_reply(batch: TripletBatch, evidence: Sequence[Evidence]) -> tuple[list[Triplet], int]:
    """Map a reply's sentence numbers back to sentence ids.

    Returns:
        The triplets (empty fields and duplicates dropped) and how many items named a
        sentence number that was not in the prompt.
    """
    out: list[Triplet] = []
    seen: set[tuple] = set()
    bad = 0
    for item in batch.triplets:
        if not 1 <= item.sentence <= len(evidence):
            bad += 1
            continue
        s, r, o = _norm(item.subject), _norm(item.relation), _norm(item.object)
        if not (s and r and o):
            continue
        source = evidence[item.sentence - 1].sentence
        key = (s.casefold(), r.casefold(), o.casefold(), source)
        if key in seen:
            continue
        seen.add(key)
        out.append(Triplet(s, r, o, LLM_TRIPLET_CONFIDENCE, source, extractor="llm"))
    return out, bad


class LLMTripletExtractor:
    """Evidence -> triplets, ``batch_size`` sentences per call, calls in parallel, replies cached.

    Args:
        client: a loaded LLMClient (its ``llm.concurrency`` bounds parallel calls).
        batch_size: sentences per call (default: ``client.config.triplet_batch``).
        fallback: a TripletExtractor run on the sentences of a batch whose reply is unusable.
        prompt: the triplet prompt (default: ``prompts/triplets.yaml``).
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        batch_size: int | None = None,
        fallback: TripletExtractor | None = None,
        prompt: PromptFile | None = None,
    ) -> None:
        size = client.config.triplet_batch if batch_size is None else batch_size
        if size < 1:
            raise ValueError(f"batch_size must be >= 1, got {size}")
        self.client = client
        self.batch_size = size
        self.fallback = fallback
        self.prompt = prompt if prompt is not None else load_prompt("triplets")

    def extract(self, evidence: Sequence[Evidence]) -> list[Triplet]:
        unique = list({e.sentence: e for e in evidence}.values())
        batches = [unique[i : i + self.batch_size] for i in range(0, len(unique), self.batch_size)]
        if not batches:
            return []
        requests = [self.prompt.render(sentences=format_sentences(b)) for b in batches]
        replies = self.client.chat_json_many(
            "triplets", requests, TripletBatch, prompt_sha=self.prompt.sha256
        )
        out: list[Triplet] = []
        for batch, reply in zip(batches, replies, strict=True):
            if reply.value is None:
                if self.fallback is not None:
                    out.extend(self.fallback.extract(batch))
                continue
            triplets, bad = triplets_from_reply(reply.value, batch)
            if bad:
                logger.debug("triplets: %d item(s) named a sentence outside the batch", bad)
            out.extend(triplets)
        return out
