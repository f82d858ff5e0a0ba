"""Short, template-based explanations that name the deciding sentences (pure functions).

Every explanation states the verdict with the probability behind it and cites
sentences as FEVER ``(page, line)`` ids; quoted text is the stored sentence,
de-tokenised and shortened, never paraphrased.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from garag.text import detokenize
from garag.types import Evidence, Label, SentenceId
from verifier.aggregate import CONFLICT, LOW_CONFIDENCE, SentenceAggregate
from verifier.labels import LABEL_ORDER

QUOTE_CHARS = 200
_CONCAT_NAMED = 2  # top-ranked sentences named in a concat-mode explanation
_VERB = {Label.SUPPORTS: "entails", Label.REFUTES: "contradicts"}
_PLURAL_VERB = {Label.SUPPORTS: "entail", Label.REFUTES: "contradict"}
_PROB_NAME = {Label.SUPPORTS: "entailment", Label.REFUTES: "contradiction"}


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """De-tokenised sentence in double quotes, cut at a word boundary to about ``limit`` characters."""
    plain = detokenize(text)
    if len(plain) > limit:
        cut = plain[:limit].rsplit(" ", 1)[0] if " " in plain[:limit] else plain[:limit]
        plain = cut.rstrip(" ,;:") + "..."
    return f'"{plain}"'


def cite(sentence: SentenceId) -> str:
    """``(Page_Id, 3)``: a FEVER sentence id as written in explanations."""
    return f"({sentence.page}, {sentence.line})"


def _head(label: Label, p: float) -> str:
    return f"{label.value} (p={p:.2f})"


def _sentences(n: int) -> str:
    return "1 sentence" if n == 1 else f"{n} sentences"


def explain_no_evidence() -> str:
    """Explanation for a claim that came with no evidence at all."""
    return f"{Label.NOT_ENOUGH_INFO.value}: no evidence sentences were retrieved for the claim."


def explain_sentence(label: Label, p: float, evidence: Evidence) -> str:
    """``SUPPORTS (p=0.93): "X" (Page, 3) entails the claim.`` for one deciding sentence."""
    if label is Label.NOT_ENOUGH_INFO:
        raise ValueError("explain_sentence is for SUPPORTS or REFUTES")
    return f"{_head(label, p)}: {quote(evidence.text)} {cite(evidence.sentence)} {_VERB[label]} the claim."


def explain_aggregate(agg: SentenceAggregate, evidence: Sequence[Evidence]) -> str:
    """Explanation of a per_sentence verdict.

    Args:
        agg: the aggregation outcome (its indices point into ``evidence``).
        evidence: the sentences that were scored, in the order they were scored.
    """
    p = agg.scores[agg.label]
    if agg.label is not Label.NOT_ENOUGH_INFO:
        return explain_sentence(agg.label, p, evidence[agg.decisive])
    if agg.reason == CONFLICT:
        sup, ref = evidence[agg.best_support], evidence[agg.best_refute]
        return (
            f"{_head(agg.label, p)}: conflicting evidence: {cite(sup.sentence)} entails the claim "
            f"(p={agg.entailment:.2f}) but {cite(ref.sentence)} contradicts it (p={agg.contradiction:.2f}); "
            f"neither leads by the margin {agg.nei_margin:.2f}."
        )
    closest = agg.decisive
    closest_label = Label.SUPPORTS if agg.entailment >= agg.contradiction else Label.REFUTES
    n = len(evidence)
    subject = "the only evidence sentence" if n == 1 else f"none of the {n} evidence sentences"
    verb = "neither supports nor refutes" if n == 1 else "supports or refutes"
    threshold = f" with p >= {agg.min_confidence:.2f}" if agg.reason == LOW_CONFIDENCE else ""
    return (
        f"{_head(agg.label, p)}: {subject} {verb} the claim{threshold}; closest: "
        f"{cite(evidence[closest].sentence)}, {_PROB_NAME[closest_label]} "
        f"p={agg.scores[closest_label]:.2f}."
    )


def explain_learned(
    label: Label, proba: Mapping[Label, float], agg: SentenceAggregate, evidence: Sequence[Evidence]
) -> str:
    """Explanation of a verdict of the learned claim-level aggregator (per_sentence mode).

    The aggregator weighs all read sentences, so the explanation names the
    sentence that entails (or contradicts) the claim most strongly on its own,
    with that sentence's own probability; for NEI, the closest sentence.

    Args:
        label: the aggregator's verdict.
        proba: the aggregator's verdict probabilities.
        agg: the per-sentence maxima (:func:`aggregate_sentence_probs`) over ``evidence``.
        evidence: the sentences that were scored, in the order they were scored.
    """
    head = _head(label, proba[label])
    how = f"claim-level aggregator over {_sentences(len(evidence))}"
    i = agg.sentence_for(label)
    if label is not Label.NOT_ENOUGH_INFO:
        return (
            f"{head}: {quote(evidence[i].text)} {cite(evidence[i].sentence)} {_VERB[label]} the claim "
            f"(p={agg.scores[label]:.2f} alone; {how})."
        )
    closest_label = Label.SUPPORTS if agg.entailment >= agg.contradiction else Label.REFUTES
    return (
        f"{head}: no evidence sentence decides the claim ({how}); closest: "
        f"{cite(evidence[i].sentence)}, {_PROB_NAME[closest_label]} p={agg.scores[closest_label]:.2f}."
    )


def explain_concat(
    label: Label,
    scores: Mapping[Label, float],
    evidence: Sequence[Evidence],
    sentence_probs: np.ndarray | None = None,
) -> str:
    """Explanation of a concat-mode verdict, where the model read the sentences together.

    No single sentence decides in concat mode, so the explanation says the
    sentences were read together and names the top-ranked ones; when
    ``sentence_probs`` (each sentence scored alone) is given, it names the
    strongest single sentence for the verdict instead.

    Args:
        label: the verdict.
        scores: verdict probabilities of the concatenated premise.
        evidence: the sentences in the premise, in premise order (non-empty).
        sentence_probs: optional ``(len(evidence), 3)`` per-sentence probabilities in LABEL_ORDER.
    """
    if not evidence:
        return explain_no_evidence()
    together = f"the evidence ({_sentences(len(evidence))} read together)"
    head = _head(label, scores[label])
    if label is Label.NOT_ENOUGH_INFO:
        body = f"{together} neither supports nor refutes the claim"
    else:
        body = f"{together} {_VERB[label]} the claim"
    if sentence_probs is not None:
        probs = np.asarray(sentence_probs, dtype=np.float64)
        if probs.shape != (len(evidence), len(LABEL_ORDER)):
            raise ValueError(f"sentence_probs must have shape ({len(evidence)}, 3), got {probs.shape}")
        if label is Label.NOT_ENOUGH_INFO:
            col_s, col_r = LABEL_ORDER.index(Label.SUPPORTS), LABEL_ORDER.index(Label.REFUTES)
            decisive = probs[:, [col_s, col_r]]
            i, j = np.unravel_index(int(np.argmax(decisive)), decisive.shape)
            closest = Label.SUPPORTS if j == 0 else Label.REFUTES
            return (
                f"{head}: {body}; closest single sentence: {cite(evidence[i].sentence)}, "
                f"{_PROB_NAME[closest]} p={decisive[i, j]:.2f}."
            )
        col = LABEL_ORDER.index(label)
        i = int(np.argmax(probs[:, col]))
        return (
            f"{head}: {body}; strongest single sentence: {quote(evidence[i].text)} "
            f"{cite(evidence[i].sentence)}, {_PROB_NAME[label]} p={probs[i, col]:.2f} alone."
        )
    named = evidence[:_CONCAT_NAMED]
    if label is Label.NOT_ENOUGH_INFO:
        listed = "; ".join(cite(e.sentence) for e in named)
    else:
        listed = "; ".join(f"{quote(e.text)} {cite(e.sentence)}" for e in named)
    return f"{head}: {body}; top-ranked: {listed}."
