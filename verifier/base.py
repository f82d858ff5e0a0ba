"""The verifier protocol, what a verifier reads of a claim's evidence, and the training example type."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from garag.types import Evidence, Label, SentenceId, Verdict

MAX_PREDICTED_EVIDENCE = 5  # FEVER scores at most five predicted sentences.


@runtime_checkable
class Verifier(Protocol):
    """Decides SUPPORTS / REFUTES / NOT ENOUGH INFO for a claim given ranked evidence.

    Constructors are cheap; ``load()`` loads models.  ``verify`` must only be
    called after ``load()``.
    """

    name: str

    def load(self) -> Verifier:
        """Load the model(s) (idempotent) and return self."""
        ...

    def verify(self, claim: str, evidence: Sequence[Evidence]) -> Verdict:
        """The verdict for one claim; ``evidence`` is ranked, best first."""
        ...

    def verify_batch(self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]]) -> list[Verdict]:
        """``verify`` for many claims (``evidence[i]`` belongs to ``claims[i]``)."""
        ...


class RankedFacts(Protocol):
    """What a verifier may read of the graph ranking of a claim's evidence (graph mode's
    ``pipeline.graph_stage.GraphRanking``; typed here so that verifiers never import the pipeline)."""

    def triplet_lines(self, per_fact: int = 3) -> Mapping[SentenceId, Sequence[str]]:
        """The graph's triplets as text lines per sentence, at most ``per_fact`` each."""
        ...


def read_evidence(
    verifier: Verifier, evidence: Sequence[Evidence], ranking: RankedFacts | None, top_k: int
) -> tuple[list[Evidence], Sequence[Any]]:
    """What ``verifier`` reads of a claim's ranked evidence: ``(shown, given)``, the sentences its
    verdict is shown with and what its ``verify_batch`` is given for them.

    A verifier decides this itself with an optional method ``inputs(evidence, ranking, top_k)``
    (the LLM verifier shows ``linearize.max_facts`` sentences with the graph's triplet lines), so
    that the pipeline never asks which kind of verifier it runs; any other reads the first
    ``top_k`` sentences (``verifier.top_k``) as they are.
    """
    inputs = getattr(verifier, "inputs", None)
    if inputs is not None:
        return inputs(evidence, ranking, top_k)
    shown = list(evidence[:top_k])
    return shown, shown


@dataclass(frozen=True)
class TrainExample:
    """One supervised example for fine-tuning the NLI verifier.

    Attributes:
        claim: the claim text.
        evidence: the premise sentences, in the order they are concatenated
            (empty evidence is allowed: the premise is then empty).
        label: the gold verdict.
        claim_id: the dataset's claim id, for tracing and claim-level splits.
    """

    claim: str
    evidence: tuple[Evidence, ...]
    label: Label
    claim_id: int | str | None = None

    def __post_init__(self) -> None:
        if not self.claim.strip():
            raise ValueError(f"TrainExample {self.claim_id!r}: empty claim")
        if not isinstance(self.label, Label):
            raise TypeError(f"TrainExample {self.claim_id!r}: label must be a Label, got {self.label!r}")
