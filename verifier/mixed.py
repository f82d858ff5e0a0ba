"""Two verifiers' verdicts mixed into one: ``(1 - w) * first + w * second`` on the verdict scores.

MiniLM-L6 and all-mpnet-base-v2 err on different claims.  On FEVER's report part all-mpnet-base-v2
alone reaches accuracy 0.810 but NEI recall 0.665 (MiniLM's 0.693); their claim-level probabilities
mixed half and half reach 0.822 with every label's recall above MiniLM's (the weight picked on
the tune part: docs/results-history.md).  ``verifier.mix_weight`` turns the
mix on (``verifier.mix_train`` or ``verifier.mix_model`` names the second verifier).

The mixed verdict's label is the likeliest of the mixed scores.  Its evidence and explanation are
those of the first verifier whose own label agrees with it (the first one's when neither does:
that text then argues for another label), after a head giving the mixed label and both verifiers'
labels and probabilities.  Both verifiers must give probabilities: a per-sentence verifier with the
rule aggregator (no claim aggregator beside the model) gives thresholded maxima, and is refused.
The second verifier reads as many sentences as the first (``top_k`` follows the first's, which the
service changes per request).
"""

from __future__ import annotations

from collections.abc import Sequence

from garag.types import Evidence, Verdict
from verifier.base import Verifier
from verifier.labels import LABEL_ORDER


class MixedVerifier:
    """``verify_batch`` of two verifiers, their scores mixed (see the module docstring)."""

    name = "mixed"

    def __init__(self, first: Verifier, second: Verifier, weight: float) -> None:
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"mix weight {weight} is outside [0, 1]")
        for which, v in (("first", first), ("second", second)):
            config = getattr(v, "config", None)
            if getattr(config, "mode", "") == "per_sentence" and getattr(v, "aggregation", "") == "rule":
                raise ValueError(
                    f"verifier.mix_weight: the {which} verifier ({getattr(v, 'model_path', '?')}) decides "
                    "by the rule aggregator, whose scores are not probabilities; mix verifiers with a claim "
                    "aggregator (garag's own) or in concat mode"
                )
        self.first = first
        self.second = second
        self.weight = float(weight)

    def load(self) -> MixedVerifier:
        for v in (self.first, self.second):
            getattr(v, "load", lambda: None)()
        return self

    def verify(self, claim: str, evidence: Sequence[Evidence]) -> Verdict:
        return self.verify_batch([claim], [evidence])[0]

    def verify_batch(self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]]) -> list[Verdict]:
        one, two = getattr(self.first, "config", None), getattr(self.second, "config", None)
        if one is not None and two is not None and two.top_k != one.top_k:
            two.top_k = one.top_k  # read the same sentences (the service sets the first's per request)
        first = self.first.verify_batch(claims, evidence)
        second = self.second.verify_batch(claims, evidence)
        return [self._mix(a, b) for a, b in zip(first, second, strict=True)]

    def _mix(self, a: Verdict, b: Verdict) -> Verdict:
        if not a.scores or not b.scores or not (a.evidence or b.evidence):  # nothing read: nothing to mix
            return a
        w = self.weight
        scores = {lab: (1 - w) * a.scores.get(lab, 0.0) + w * b.scores.get(lab, 0.0) for lab in LABEL_ORDER}
        label = max(LABEL_ORDER, key=lambda lab: scores[lab])  # ties: LABEL_ORDER's order
        source = a if a.label is label or b.label is not label else b
        head = (
            f"{label.value} (p={scores[label]:.2f}, two verifiers mixed {1 - w:.2f} / {w:.2f}: "
            f"{_said(a)}, {_said(b)})."
        )
        return Verdict(label, f"{head} {source.explanation}", source.evidence, scores)


def _said(v: Verdict) -> str:
    return f"{v.label.value} p={v.scores.get(v.label, 0.0):.2f}"
