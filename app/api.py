"""garag's Python API: load a configured pipeline once, verify claims with it.

    import garag
    checker = garag.load("configs/graph.yaml")
    print(checker.verify("The Beatles were formed in Liverpool."))

``load`` builds (or reuses) the indexes of the config's corpus and loads its trained verifier;
training is a separate, explicit step (``garag train-verifier``, or ``load(..., train=True)``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from garag.config import Config, load_config, with_overrides
from garag.text import detokenize
from garag.types import Claim, Label, SentenceId


@dataclass(frozen=True)
class EvidenceSentence:
    """One sentence a verdict rests on.

    Attributes:
        page: FEVER page id (``(page, line)`` is what the FEVER scorer reads).
        line: sentence number on the page.
        text: the sentence as people write it (FEVER's ``-LRB-`` and spaced punctuation undone).
        raw_text: the sentence as stored in the corpus.
    """

    page: str
    line: int
    text: str
    raw_text: str

    def to_json(self) -> dict[str, Any]:
        return {"page": self.page, "line": self.line, "text": self.text, "raw_text": self.raw_text}


@dataclass(frozen=True)
class ClaimVerdict:
    """What garag decided for one claim.

    Attributes:
        claim: the claim as given.
        label: SUPPORTS, REFUTES or NOT ENOUGH INFO (HoVer-style configs: SUPPORTS or
            NOT ENOUGH INFO for NOT_SUPPORTED).
        explanation: why, naming the deciding sentences.
        evidence: the predicted evidence, best first, with its text.
        scores: label -> the verifier's score for it (higher is likelier; not a distribution when
            the claim's label is aggregated from its sentences).
        timings: wall seconds per stage (``decomposition``, ``retrieval``, ``triplets``, ``graph``,
            ``verification``) and ``total``.
    """

    claim: str
    label: Label
    explanation: str
    evidence: tuple[EvidenceSentence, ...]
    scores: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (labels as FEVER's strings)."""
        return {
            "claim": self.claim,
            "label": self.label.value,
            "explanation": self.explanation,
            "evidence": [e.to_json() for e in self.evidence],
            "scores": self.scores,
            "timings": self.timings,
        }

    def __str__(self) -> str:
        lines = [f"{self.label.value}: {self.claim}", f"  {self.explanation}"]
        lines += [f"  [{e.page}, {e.line}] {e.text}" for e in self.evidence]
        return "\n".join(lines)


class FactChecker:
    """A built pipeline that verifies claims given as text.

    Use :func:`load`; the constructor takes an already built ``VerificationPipeline``.
    """

    def __init__(self, config: Config, pipeline: Any) -> None:
        self.config = config
        self.pipeline = pipeline

    def verify(self, claim: str) -> ClaimVerdict:
        """Verify one claim (retrieval over the config's corpus, then the verdict)."""
        return self.verify_many([claim])[0]

    def verify_many(self, claims: Iterable[str], batch_size: int = 32) -> list[ClaimVerdict]:
        """Verify claims in batches of ``batch_size``; verdicts in the order given.

        Raises:
            ValueError: a claim that is not a non-empty string (its position named).
        """
        texts = list(claims)
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"claim {i + 1}: expected a non-empty string, got {text!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out: list[ClaimVerdict] = []
        for start in range(0, len(texts), batch_size):
            batch = [
                Claim(id=start + i, text=t.strip()) for i, t in enumerate(texts[start : start + batch_size])
            ]
            began = time.perf_counter()
            results = self.pipeline.run(batch)
            per_claim = (time.perf_counter() - began) / len(batch)
            out += [self._verdict(r, per_claim) for r in results]
        return out

    def _verdict(self, result: Any, total: float) -> ClaimVerdict:
        verdict = result.verdict
        return ClaimVerdict(
            claim=result.claim.text,
            label=verdict.label,
            explanation=verdict.explanation,
            evidence=tuple(self._sentence(sid) for sid in verdict.evidence),
            scores={label.value: float(p) for label, p in verdict.scores.items()},
            timings={**{k: round(v, 4) for k, v in result.seconds.items()}, "total": round(total, 4)},
        )

    def _sentence(self, sid: SentenceId) -> EvidenceSentence:
        found = self.pipeline.store.get(sid)
        raw = found.text if found is not None else ""
        return EvidenceSentence(sid.page, sid.line, detokenize(raw), raw)


def load(
    config: str | Path | Config | None = None,
    overrides: Sequence[str] = (),
    *,
    train: bool = False,
    progress: bool = False,
) -> FactChecker:
    """A :class:`FactChecker` for ``config`` (a YAML file, or a :class:`garag.config.Config`).

    Args:
        config: the configuration (None: garag's defaults); ``overrides`` are ``key.path=value``
            strings as for ``--set``.
        train: train the config's verifier first where it is not trained yet (minutes to an hour
            on a CPU); by default an untrained verifier is an error naming the command that trains it.
        progress: show progress bars while indexes are built.

    Raises:
        garag.config.ConfigError: a bad config file or override.
        verifier.trained.VerifierNotTrainedError: the verifier is not trained and ``train`` is False.
    """
    from pipeline.verification import VerificationPipeline

    if isinstance(config, Config):
        cfg = with_overrides(config, overrides)
    else:
        cfg = load_config(config, list(overrides))
    if train:
        from training.verifier import ensure_verifiers

        ensure_verifiers(cfg, progress=progress)
    pipeline = VerificationPipeline(cfg, progress=progress).build()
    return FactChecker(cfg, pipeline)
