"""The LLM judge: a chat model's Yes or No on whether the sentences read support the whole claim.

Where ``verifier.llm_judge`` applies (``two_way``: HoVer's 2-way verdicts; ``always``: FEVER's 3-way
ones too), every claim that the verifier, the 2-way threshold and the entity check would still call
SUPPORTED is shown to the configured chat model (``llm``; the local Qwen2.5-Coder-1.5B by default)
with the sentences its verdict rests on, in the zero-shot prompt ``prompts/judge.yaml``.  A reply
whose first word is "No" withholds SUPPORTED (the verdict becomes the likelier of REFUTES and NOT
ENOUGH INFO, as the entity check does) and the explanation says so; "Yes" keeps the verdict.  A
reply that starts with neither (or a call that fails or times out) keeps the verdict too, and is
counted as unusable.

Only SUPPORTS verdicts are asked, so the judge costs one short LLM call per claim at most.  The
prompts are decoded ``llm.batch`` at a time; one whose batch ran past ``llm.timeout_s`` or failed is
asked again on its own.  Replies are cached like every LLM stage's (``llm/responses.sqlite``), so a
rerun asks nothing again, except where a call still timed out or failed: those are not cached, and
a rerun asks again (and may decide otherwise).

Run hashes carry the judge prompt's sha256 and ``garag.config.models.LLM_JUDGE_VERSION`` whenever the
judge is on: raise it with any change here that decides other verdicts from the same replies.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from garag.text import detokenize, page_to_title
from garag.types import Evidence, Label, Verdict
from prompts import PromptFile, load_prompt

logger = logging.getLogger(__name__)
ANSWERS = {"yes": True, "no": False}
_FIRST_WORD = re.compile(r"[A-Za-z]+")
# "Yes" / "No" and an end mark fit in 4 tokens; a longer reply is cut there and its first word read.
MAX_TOKENS = 4
# What the explanation gains where the model said No, or gave no usable answer (benchmarks read them).
SAID_NO = "LLM judge: asked if the sentences read support all of the claim, the model said No."
UNUSABLE = "LLM judge: no usable answer; the verdict stands."


def answer(text: str) -> bool | None:
    """True for a reply whose first word is yes, False for no (any case), None otherwise."""
    m = _FIRST_WORD.search(text)
    return ANSWERS.get(m.group(0).casefold()) if m else None


def evidence_lines(evidence: Sequence[Evidence]) -> str:
    """One "- Title: sentence" line per sentence read."""
    return "\n".join(f"- {page_to_title(e.sentence.page)}: {detokenize(e.text)}" for e in evidence)


class LLMJudge:
    """Asks the chat model about each SUPPORTS verdict and withholds it where the model says No.

    Args:
        client: a loaded :class:`garag.llm.LLMClient` (cached).
        prompt: the judge prompt (default ``prompts/judge.yaml``).

    Attributes:
        counts: "yes", "no" and "unusable" replies so far.
    """

    stage = "judge"

    def __init__(self, client: Any, prompt: PromptFile | None = None) -> None:
        self.client = client
        self.prompt = prompt if prompt is not None else load_prompt("judge")
        self.counts = {"yes": 0, "no": 0, "unusable": 0}

    def ask(self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]]) -> list[bool | None]:
        """The model's answer for each claim and its sentences (None: unusable)."""
        requests = [
            self.prompt.render(claim=" ".join(c.split()), evidence=evidence_lines(ev))
            for c, ev in zip(claims, evidence, strict=True)
        ]
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
        self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]], verdicts: Sequence[Verdict]
    ) -> list[Verdict]:
        """The verdicts with SUPPORTS withheld where the model answers No."""
        out = list(verdicts)
        todo = [i for i, v in enumerate(verdicts) if v.label is Label.SUPPORTS]
        if not todo:
            return out
        said = self.ask([claims[i] for i in todo], [evidence[i] for i in todo])
        for i, yes in zip(todo, said, strict=True):
            v = verdicts[i]
            if yes is False:
                out[i] = Verdict(v.likelier_unsupported(), f"{v.explanation} {SAID_NO}", v.evidence, v.scores)
            elif yes is None:
                out[i] = Verdict(v.label, f"{v.explanation} {UNUSABLE}", v.evidence, v.scores)
        return out
