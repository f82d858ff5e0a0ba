"""Roles of the graph-augmented stages: one small Protocol each.

Rule-based and LLM implementations of a role are interchangeable; the
pipeline picks one by config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from garag.types import Evidence, Triplet


@runtime_checkable
class Decomposer(Protocol):
    """Claim -> yes/no subquestions (Chen et al., NAACL 2024), used as extra retrieval queries."""

    name: str

    def decompose(self, claim: str) -> list[str]:
        """At most the configured number of subquestions, deduplicated; may be empty."""
        ...


@runtime_checkable
class TripletExtractor(Protocol):
    """Evidence sentences -> (subject, relation, object, confidence, source) facts."""

    name: str

    def extract(self, evidence: Sequence[Evidence]) -> list[Triplet]:
        """Facts from every sentence; each Triplet's ``source`` is the sentence it came from."""
        ...
