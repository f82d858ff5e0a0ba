"""Per-sentence NLI probabilities -> one verdict (a pure function, no model)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from garag.types import Label
from verifier.labels import LABEL_ORDER

_SUPPORT = LABEL_ORDER.index(Label.SUPPORTS)
_REFUTE = LABEL_ORDER.index(Label.REFUTES)

ENTAILS = "entails"
CONTRADICTS = "contradicts"
LOW_CONFIDENCE = "low_confidence"
CONFLICT = "conflict"
_EPS = 1e-12  # so that e.g. 0.75 - 0.65 counts as a lead of 0.10


@dataclass(frozen=True)
class SentenceAggregate:
    """The outcome of aggregating per-sentence probabilities.

    Attributes:
        label: the verdict.
        scores: SUPPORTS = max entailment, REFUTES = max contradiction, NOT ENOUGH
            INFO = 1 - the larger of the two.  They are not normalised (they sum to
            1 + the smaller maximum); their argmax equals the verdict when
            ``min_confidence`` is 0.5 and ``nei_margin`` is 0.
        best_support: index of the sentence with the highest entailment probability.
        best_refute: index of the sentence with the highest contradiction probability.
        reason: ``"entails"``, ``"contradicts"``, ``"low_confidence"`` (neither maximum
            reaches ``min_confidence``) or ``"conflict"`` (the winner does not beat the
            other by ``nei_margin``).
        min_confidence: the threshold that was applied.
        nei_margin: the margin that was applied.
    """

    label: Label
    scores: dict[Label, float]
    best_support: int
    best_refute: int
    reason: str
    min_confidence: float
    nei_margin: float

    @property
    def entailment(self) -> float:
        return self.scores[Label.SUPPORTS]

    @property
    def contradiction(self) -> float:
        return self.scores[Label.REFUTES]

    @property
    def decisive(self) -> int:
        """The deciding sentence: the winner's best sentence; for NEI the closest one."""
        return self.sentence_for(self.label)

    def sentence_for(self, label: Label) -> int:
        """The sentence that speaks most for ``label``: the most entailing one for SUPPORTS, the
        most contradicting one for REFUTES; for NEI the closer of the two."""
        if label is Label.SUPPORTS:
            return self.best_support
        if label is Label.REFUTES:
            return self.best_refute
        return self.best_support if self.entailment >= self.contradiction else self.best_refute


def aggregate_sentence_probs(
    probs: np.ndarray, min_confidence: float = 0.5, nei_margin: float = 0.0
) -> SentenceAggregate:
    """Max entailment vs max contradiction over the sentences; NEI unless one clearly wins.

    The winner (the larger of the two maxima) is the verdict when it is at least
    ``min_confidence`` and exceeds the other by at least ``nei_margin`` (and
    strictly: an exact tie is NEI).

    Args:
        probs: ``(n_sentences, 3)`` probabilities in ``LABEL_ORDER``
            (SUPPORTS, NOT ENOUGH INFO, REFUTES), n >= 1.
        min_confidence: smallest winning probability that leaves NEI.
        nei_margin: smallest lead of the winner over the other maximum.

    Raises:
        ValueError: wrong shape, no sentences or probabilities outside [0, 1].
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] != len(LABEL_ORDER) or probs.shape[0] == 0:
        raise ValueError(f"expected probabilities of shape (n>=1, 3), got {probs.shape}")
    if not np.all(np.isfinite(probs)) or probs.min() < 0 or probs.max() > 1:
        raise ValueError("probabilities must be finite and in [0, 1]")
    best_support = int(np.argmax(probs[:, _SUPPORT]))
    best_refute = int(np.argmax(probs[:, _REFUTE]))
    entail = float(probs[best_support, _SUPPORT])
    contradict = float(probs[best_refute, _REFUTE])
    winner, top, other = (
        (Label.SUPPORTS, entail, contradict) if entail >= contradict else (Label.REFUTES, contradict, entail)
    )
    if top < min_confidence:
        label, reason = Label.NOT_ENOUGH_INFO, LOW_CONFIDENCE
    elif top <= other or top - other < nei_margin - _EPS:
        label, reason = Label.NOT_ENOUGH_INFO, CONFLICT
    else:
        label, reason = winner, ENTAILS if winner is Label.SUPPORTS else CONTRADICTS
    scores = {
        Label.SUPPORTS: entail,
        Label.NOT_ENOUGH_INFO: 1.0 - max(entail, contradict),
        Label.REFUTES: contradict,
    }
    return SentenceAggregate(
        label=label,
        scores=scores,
        best_support=best_support,
        best_refute=best_refute,
        reason=reason,
        min_confidence=min_confidence,
        nei_margin=nei_margin,
    )
