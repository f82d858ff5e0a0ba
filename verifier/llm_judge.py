"""The LLM judge: a chat model's Yes or No on whether the sentences read support the whole claim.

Where ``verifier.llm_judge`` applies (``two_way``: HoVer's 2-way verdicts; ``always``: FEVER's 3-way
ones too), every claim that the verifier, the 2-way threshold and the entity check would still call
SUPPORTED is shown to the configured chat model (``llm``; the local Qwen2.5-Coder-1.5B by default)
with the sentences its verdict rests on, in the zero-shot prompt ``prompts/judge.yaml``.  A reply
whose first word is "No" withholds SUPPORTED (the verdict becomes the likelier of REFUTES and NOT
ENOUGH INFO, as the entity check does) and the explanation says so; "Yes" keeps the verdict.  A
reply that starts with neither (or a call that fails or times out) keeps the verdict too, and is
counted as unusable.

With ``verifier.llm_judge_parts`` > 0 (parts mode), on 2-way data (HoVer's multi-hop claims), the
judge reads the model's probability of Yes instead of its reply, for the claim and for each of its
simple facts, and withholds SUPPORTED where the claim's is below 0.5 or a part's below the setting
(``LLMJudge``); FEVER's 3-way verdicts (``always``) keep the greedy answer on the whole claim.

Only SUPPORTS verdicts are asked, so the judge costs one short LLM call per claim at most (in parts
mode one prompt read for the claim and one for each part, on one evidence prefix).  The
prompts are decoded ``llm.batch`` at a time; one whose batch ran past ``llm.timeout_s`` or failed is
asked again on its own.  Replies are cached like every LLM stage's (``llm/responses.sqlite``), so a
rerun asks nothing again, except where a call still timed out or failed: those are not cached, and
a rerun asks again (and may decide otherwise).

Run hashes carry the judge prompt's sha256 and :data:`LLM_JUDGE_VERSION` (:func:`judge_hash_fields`)
whenever the judge is on: raise it with any change here that decides other verdicts from the same replies.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from garag.llm.base import LLMUnavailableError
from garag.text import detokenize, page_to_title
from garag.types import Evidence, Label, Verdict
from prompts import PromptFile, load_prompt

logger = logging.getLogger(__name__)
# How this module reads replies and what it withholds, in run hashes whenever the judge is on (with its
# prompt's sha256).  Raise it when the judge decides other verdicts from the same replies.
LLM_JUDGE_VERSION = "llm-judge-v1"
ANSWERS = {"yes": True, "no": False}
_FIRST_WORD = re.compile(r"[A-Za-z]+")
# "Yes" / "No" and an end mark fit in 4 tokens; a longer reply is cut there and its first word read.
MAX_TOKENS = 4
# What the explanation gains where the model said No, or gave no usable answer.
SAID_NO = "LLM judge: asked if the sentences read support all of the claim, the model said No."
UNUSABLE = "LLM judge: no usable answer; the verdict stands."
PART_NO = 'LLM judge: asked about each part of the claim, the model gave "{part}" P(Yes) {p:.2f} < {t:g}.'
WHOLE_NO = (
    "LLM judge: asked if the sentences read support all of the claim, the model gave P(Yes) {p:.2f} < 0.5."
)


def judge_hash_fields(llm_judge: str) -> dict[str, str]:
    """What a run hash adds to the verifier section for ``verifier.llm_judge`` (nothing when off): the
    prompt's sha256 and :data:`LLM_JUDGE_VERSION`, so saved predictions are not resumed under another
    prompt or reading."""
    if llm_judge == "never":
        return {}
    return {"llm_judge_prompt": load_prompt("judge").sha256, "llm_judge_version": LLM_JUDGE_VERSION}


def withheld(explanation: str) -> bool:
    """Whether the judge withheld SUPPORTED from the verdict with this explanation."""
    return any(note.split("{", 1)[0] in explanation for note in (SAID_NO, PART_NO, WHOLE_NO))


def answer(text: str) -> bool | None:
    """True for a reply whose first word is yes, False for no (any case), None otherwise."""
    m = _FIRST_WORD.search(text)
    return ANSWERS.get(m.group(0).casefold()) if m else None


def evidence_lines(evidence: Sequence[Evidence]) -> str:
    """One "- Title: sentence" line per sentence read."""
    return "\n".join(f"- {page_to_title(e.sentence.page)}: {detokenize(e.text)}" for e in evidence)


class LLMJudge:
    """Asks the chat model about each SUPPORTS verdict and withholds it where the model doubts it.

    With ``parts`` (``verifier.llm_judge_parts`` > 0) the judge reads the model's probability of
    Yes instead of its greedy answer, for the claim and for each of its simple facts (``parts``:
    the rule decomposer's sub-claims, asked when there are two or more), on the same sentences,
    and withholds SUPPORTED where the claim's is below 0.5 (about the greedy answer) or a part's is
    below ``parts_threshold``: a multi-hop claim whose one changed fact the model lets pass when
    asked about the whole claim is caught when that fact is asked about alone.

    Args:
        client: a loaded :class:`garag.llm.LLMClient` (cached).
        prompt: the judge prompt (default ``prompts/judge.yaml``).
        parts: claim -> its simple facts; None asks about the whole claim only (greedy answer).
        parts_threshold: the smallest probability of Yes a part may have.

    Attributes:
        counts: "yes", "no" and "unusable" replies so far; in parts mode "yes" and "no" are for
            the whole claim, and "no_part" counts the claims withheld for a part after a "yes".
    """

    stage = "judge"

    def __init__(
        self,
        client: Any,
        prompt: PromptFile | None = None,
        parts: Callable[[str], list[str]] | None = None,
        parts_threshold: float = 0.0,
    ) -> None:
        self.client = client
        self.prompt = prompt if prompt is not None else load_prompt("judge")
        self.parts = parts
        self.parts_threshold = parts_threshold
        self.counts = {"yes": 0, "no": 0, "unusable": 0} | ({"no_part": 0} if parts is not None else {})

    def _render(self, claim: str, evidence: Sequence[Evidence]) -> Any:
        return self.prompt.render(claim=" ".join(claim.split()), evidence=evidence_lines(evidence))

    def ask_parts(self, claim: str, evidence: Sequence[Evidence]) -> tuple[float, list[tuple[str, float]]]:
        """The probability of Yes for the whole claim and for each of its parts (none for a claim
        of one fact), asked together so that the sentences are read once."""
        parts = self.parts(claim) if self.parts is not None else []
        parts = parts if len(parts) >= 2 else []
        asked = [self._render(c, evidence) for c in (claim, *parts)]
        p = self.client.yes_probability_many(self.stage, asked, self.prompt.sha256)
        return p[0], list(zip(parts, p[1:], strict=True))

    def _judge_parts(self, claim: str, evidence: Sequence[Evidence], v: Verdict) -> Verdict:
        try:
            whole, parts = self.ask_parts(claim, evidence)
        except LLMUnavailableError:  # the backend cannot give probabilities: a setting to change
            raise
        except Exception as e:  # one claim the model could not read (e.g. past llm.n_ctx): it stands
            logger.warning("LLM judge: %s; the verdict stands", e)
            self.counts["unusable"] += 1
            return v.noted(UNUSABLE)
        if whole < 0.5:
            self.counts["no"] += 1
            return v.noted(WHOLE_NO.format(p=whole), withhold=True)
        self.counts["yes"] += 1
        low = [(c, p) for c, p in parts if p < self.parts_threshold]
        if not low:
            return v
        self.counts["no_part"] += 1
        c, p = min(low, key=lambda x: x[1])
        return v.noted(PART_NO.format(part=c, p=p, t=self.parts_threshold), withhold=True)

    def ask(self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]]) -> list[bool | None]:
        """The model's answer for each claim and its sentences (None: unusable)."""
        requests = [self._render(c, ev) for c, ev in zip(claims, evidence, strict=True)]
        options = {"prompt_sha": self.prompt.sha256, "max_tokens": MAX_TOKENS, "max_lines": 1}
        # a prompt whose batched group ran past llm.timeout_s was asked again on its own by the
        # client (LLMClient.chat_text_many): a timeout here is the prompt's own
        replies = self.client.chat_text_many(self.stage, requests, **options)
        out = []
        for reply in replies:
            said = answer(reply.value if reply.value is not None else reply.raw)
            self.counts["unusable" if said is None else "yes" if said else "no"] += 1
            out.append(said)
        if None in out:
            logger.warning(
                "LLM judge: %d of %d replies unusable; those verdicts stand", out.count(None), len(out)
            )
        return out

    def apply(
        self,
        claims: Sequence[str],
        evidence: Sequence[Sequence[Evidence]],
        verdicts: Sequence[Verdict],
        two_way_data: bool = True,
    ) -> list[Verdict]:
        """The verdicts with SUPPORTS withheld where the model answers No (parts mode, on 2-way
        data only: where the claim's P(Yes) is below 0.5 or a part's below ``parts_threshold``)."""
        out = list(verdicts)
        todo = [i for i, v in enumerate(verdicts) if v.label is Label.SUPPORTS]
        if not todo:
            return out
        if self.parts is not None and two_way_data:
            for i in todo:
                out[i] = self._judge_parts(claims[i], evidence[i], verdicts[i])
            return out
        said = self.ask([claims[i] for i in todo], [evidence[i] for i in todo])
        for i, yes in zip(todo, said, strict=True):
            if yes is False:
                out[i] = verdicts[i].noted(SAID_NO, withhold=True)
            elif yes is None:
                out[i] = verdicts[i].noted(UNUSABLE)
        return out
