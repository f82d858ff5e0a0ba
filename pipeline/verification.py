"""Baseline RAG: retrieval -> top-k evidence -> verifier -> verdict with evidence and explanation."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from garag.config import Config
from garag.datasets import Dataset
from garag.store import SentenceStore
from garag.types import Claim, Evidence, Hit, SentenceId, Verdict
from pipeline.retrieval import RetrievalPipeline, RetrievalResult
from pipeline.train_verifier import ensure_verifier
from verifier.base import Verifier

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimResult:
    """Everything the pipeline decided for one claim.

    Attributes:
        claim: the input claim.
        verdict: label, explanation, predicted evidence and label scores.
        retrieval: fused and per-retriever hits.
        evidence: the evidence the verifier read, in order.
        seconds: wall seconds per stage ("retrieval", "verification"), amortised over the batch.
    """

    claim: Claim
    verdict: Verdict
    retrieval: RetrievalResult
    evidence: tuple[Evidence, ...]
    seconds: dict[str, float] = field(default_factory=dict)


def gold_evidence(claim: Claim, store: SentenceStore) -> list[Evidence]:
    """Oracle evidence: the first gold set whose sentences all have text (else whatever text there is)."""
    best: list[Evidence] = []
    for group in claim.evidence:
        found = [Evidence(s.id, s.text, 1.0) for s in (store.get(sid) for sid in group) if s is not None]
        if len(found) == len(group):
            return found
        if len(found) > len(best):
            best = found
    return best


def hits_to_evidence(hits: Sequence[Hit], store: SentenceStore, k: int) -> list[Evidence]:
    """The first ``k`` hits as evidence with their text (hits without text are skipped)."""
    rows = [store.row_of(h.sentence) for h in hits[: k * 2]]
    known = [(h, r) for h, r in zip(hits[: k * 2], rows, strict=True) if r is not None][:k]
    sentences = store.sentences_by_rows([r for _, r in known])
    return [Evidence(h.sentence, s.text, h.score) for (h, _), s in zip(known, sentences, strict=True)]


class VerificationPipeline:
    """Retrieval plus a verifier.  ``build()`` builds or reuses every artifact (and trains the
    verifier on first use when ``verifier.model`` is empty)."""

    def __init__(self, config: Config, dataset: Dataset | None = None, progress: bool = True) -> None:
        self.config = config
        self.progress = progress
        self.retrieval = RetrievalPipeline(config, dataset, progress)
        self.verifier: Verifier | None = None
        self.model_path: str = ""

    @property
    def dataset(self) -> Dataset:
        return self.retrieval.dataset

    @property
    def store(self) -> SentenceStore:
        if self.retrieval.store is None:
            raise RuntimeError("VerificationPipeline.build() must run first")
        return self.retrieval.store

    def build(self, force: bool = False) -> VerificationPipeline:
        from verifier.nli import NLIVerifier

        self.retrieval.build(force=force)
        self.model_path = str(ensure_verifier(self.config, progress=self.progress))
        self.verifier = NLIVerifier(self.config.verifier, self.model_path).load()
        return self

    def run(self, claims: Sequence[Claim], oracle: bool = False) -> list[ClaimResult]:
        """Verify a batch of claims.

        Args:
            claims: the claims (their gold evidence is used only when ``oracle``).
            oracle: give the verifier the gold evidence of verifiable claims instead of
                the retrieved sentences (NEI claims keep retrieved evidence), to separate
                retrieval errors from verification errors.
        """
        if self.verifier is None:
            raise RuntimeError("VerificationPipeline.build() must run first")
        k = self.config.verifier.top_k
        t0 = time.perf_counter()
        retrieved = self.retrieval.retrieve_batch([c.text for c in claims])
        evidence = []
        for claim, res in zip(claims, retrieved, strict=True):
            if oracle and claim.verifiable:
                evidence.append(gold_evidence(claim, self.store))
            else:
                evidence.append(hits_to_evidence(res.fused, self.store, k))
        t1 = time.perf_counter()
        verdicts = self.verifier.verify_batch([c.text for c in claims], evidence)
        t2 = time.perf_counter()
        n = max(len(claims), 1)
        timing = {"retrieval": (t1 - t0) / n, "verification": (t2 - t1) / n}
        return [
            ClaimResult(c, v, r, tuple(e), dict(timing))
            for c, v, r, e in zip(claims, verdicts, retrieved, evidence, strict=True)
        ]

    def iter_results(
        self, claims: Sequence[Claim], batch_size: int = 32, oracle: bool = False
    ) -> Iterator[ClaimResult]:
        """``run`` over many claims in batches, yielding results in order."""
        for i in range(0, len(claims), batch_size):
            yield from self.run(claims[i : i + batch_size], oracle=oracle)


def predicted_evidence(result: ClaimResult, limit: int = 5) -> list[SentenceId]:
    """FEVER's ``predicted_evidence``: the verdict's evidence, then the top-ranked rest, at most ``limit``."""
    out = list(result.verdict.evidence[:limit])
    for h in result.retrieval.fused:
        if len(out) >= limit:
            break
        if h.sentence not in out:
            out.append(h.sentence)
    return out
