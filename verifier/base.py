"""The verifier protocol and the training example type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from garag.types import Evidence, Label, Verdict

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
