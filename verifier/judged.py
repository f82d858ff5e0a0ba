"""The LLM judge as a verifier component: another verifier's verdicts, then the judge's word on them.

``verifier.llm_judge`` (never / two_way / always) used to be a step after the verdict that
overrode it.  As a component it wraps whatever verifier the config names, so the pipeline asks no
question about it: the judge asks about the verdicts the inner verifier calls SUPPORTED, on the
sentences shown with the verdict, and where it says No the verdict's SUPPORTS score goes to the
likelier other label (:meth:`garag.types.Verdict.noted`).  The decision model
(:mod:`verifier.decision`) reads those judged scores like any verifier's and decides the label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from garag.types import Evidence, Verdict
from verifier.base import RankedFacts, Verifier, read_evidence
from verifier.llm_judge import LLMJudge


@dataclass(frozen=True)
class JudgedInput:
    """What the judged verifier is given for one claim: the sentences shown with the verdict, which
    the judge reads whatever form the inner verifier reads them in, and that form."""

    shown: tuple[Evidence, ...]
    given: Sequence[Any]


class JudgedVerifier:
    """``inner``'s verdicts with SUPPORTS withheld where the LLM judge doubts them.

    Args:
        inner: the verifier whose verdicts are judged (it reads the evidence as it would alone).
        judge: the loaded judge (its ``counts`` are the run's Yes / No / unusable answers).
        two_way_data: whether the data has 2-way labels (the judge's parts mode acts there only).
    """

    def __init__(self, inner: Verifier, judge: LLMJudge, *, two_way_data: bool) -> None:
        self.inner = inner
        self.judge = judge
        self.two_way_data = two_way_data
        self.name = f"{inner.name}+judge"

    def load(self) -> JudgedVerifier:
        self.inner.load()
        return self

    def inputs(
        self, evidence: Sequence[Evidence], ranking: RankedFacts | None, top_k: int
    ) -> tuple[list[Evidence], JudgedInput]:
        """What ``inner`` reads (see :func:`verifier.base.read_evidence`), with the sentences shown."""
        shown, given = read_evidence(self.inner, evidence, ranking, top_k)
        return shown, JudgedInput(tuple(shown), given)

    def verify(self, claim: str, evidence: JudgedInput | Sequence[Evidence]) -> Verdict:
        return self.verify_batch([claim], [evidence])[0]

    def verify_batch(
        self, claims: Sequence[str], evidence: Sequence[JudgedInput | Sequence[Evidence]]
    ) -> list[Verdict]:
        """``inner``'s verdicts, judged on the sentences each one read: those of its
        :meth:`inputs`, or the evidence itself where it is given as a list of sentences (a
        reasoning program's steps)."""
        given = [e.given if isinstance(e, JudgedInput) else e for e in evidence]
        read = [list(e.shown) if isinstance(e, JudgedInput) else list(e) for e in evidence]
        verdicts = self.inner.verify_batch(claims, given)
        return self.judge.apply(claims, read, verdicts, two_way_data=self.two_way_data)
