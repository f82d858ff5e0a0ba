"""Model inputs shared by inference and training: premises and (premise, claim) encodings.

The verifier and the trainer must build exactly the same text and token
layout, so both call these functions.  The premise comes first and the claim
second (MNLI's order), and only the premise is ever truncated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from garag.text import detokenize, page_to_title
from garag.types import Evidence

# A claim longer than this share of ``max_length`` tokens is truncated too (otherwise
# "only_first" truncation fails because the premise alone cannot make room).
_MAX_CLAIM_SHARE = 0.5
PREMISE_SEPARATOR = " "
# Recorded with trained models and in their artifact hash: change it whenever the input layout changes.
PREMISE_FORMAT = "garag-premise-v1: 'Title: sentence' joined by spaces; premise first, claim second"


def evidence_text(evidence: Evidence) -> str:
    """One evidence sentence as the model reads it: ``"Page title: de-tokenised sentence"``."""
    return f"{page_to_title(evidence.sentence.page)}: {detokenize(evidence.text)}"


def build_premise(evidence: Sequence[Evidence], top_k: int | None = None) -> str:
    """The premise for concat mode: the first ``top_k`` sentences, each with its page title.

    Args:
        evidence: ranked evidence, best first.
        top_k: how many sentences to use; None = all.

    Returns:
        The sentences joined by a space (an empty string for no evidence).
    """
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    chosen = evidence if top_k is None else evidence[:top_k]
    return PREMISE_SEPARATOR.join(evidence_text(e) for e in chosen)


def encode_pairs(tokenizer: Any, premises: Sequence[str], claims: Sequence[str], max_length: int) -> Any:
    """Tokenise (premise, claim) pairs into one padded batch of tensors.

    The premise is truncated so the claim stays whole; a claim longer than half
    of ``max_length`` tokens (rare) is shortened together with its premise.

    Args:
        tokenizer: a Hugging Face tokenizer.
        premises: one premise per pair.
        claims: one claim per pair.
        max_length: tokens per pair, special tokens included.

    Returns:
        A ``BatchEncoding`` of PyTorch tensors padded to the longest pair.
    """
    if len(premises) != len(claims):
        raise ValueError(f"{len(premises)} premises but {len(claims)} claims")
    if not premises:
        raise ValueError("encode_pairs needs at least one pair")
    claim_lengths = [len(ids) for ids in tokenizer(list(claims), add_special_tokens=False)["input_ids"]]
    limit = int(max_length * _MAX_CLAIM_SHARE)
    groups: dict[str, list[int]] = {"only_first": [], "longest_first": []}
    for i, n in enumerate(claim_lengths):
        groups["only_first" if n <= limit else "longest_first"].append(i)
    features: list[dict | None] = [None] * len(premises)
    for strategy, idx in groups.items():
        if not idx:
            continue
        enc = tokenizer(
            [premises[i] for i in idx],
            [claims[i] for i in idx],
            truncation=strategy,
            max_length=max_length,
        )
        for j, i in enumerate(idx):
            features[i] = {key: values[j] for key, values in enc.items()}
    return tokenizer.pad(features, padding=True, return_tensors="pt")
