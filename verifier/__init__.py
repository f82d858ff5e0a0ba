"""Verifiers: claim + ranked evidence -> Verdict (SUPPORTS / REFUTES / NOT ENOUGH INFO).

Heavy dependencies (torch, transformers) are imported only when a model is loaded or trained.
"""

from __future__ import annotations

from verifier.aggregate import SentenceAggregate, aggregate_sentence_probs
from verifier.base import TrainExample, Verifier
from verifier.inputs import build_premise, encode_pairs, evidence_text
from verifier.labels import LABEL_ORDER, resolve_label_map
from verifier.nli import NLIVerifier

__all__ = [
    "LABEL_ORDER",
    "NLIVerifier",
    "SentenceAggregate",
    "TrainExample",
    "Verifier",
    "aggregate_sentence_probs",
    "build_premise",
    "encode_pairs",
    "evidence_text",
    "resolve_label_map",
]
