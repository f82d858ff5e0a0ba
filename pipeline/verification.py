"""One pipeline, two configurations (``pipeline.mode``).

* baseline RAG: retrieval -> top-k evidence -> verifier -> verdict with evidence and explanation;
* graph-augmented RAG: decomposition -> fused retrieval for the claim and its subquestions ->
  triplets -> local fact graph ranking (GA-RAG eqs. 2-4) -> graph-ranked evidence (NLI) or
  evidence with its triplet lines (LLM) -> verdict.

``pipeline.verifier`` names the verifier component (:mod:`verifier.registry`: the NLI classifier, the
LLM with the NLI classifier as fallback, or a registered one); ``verifier.llm_judge`` wraps it in the
LLM judge (:class:`verifier.judged.JudgedVerifier`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from garag.config import Config, ConfigError
from garag.datasets import Dataset
from garag.store import SentenceStore
from garag.types import Claim, Evidence, Hit, SentenceId, Verdict
from pipeline.graph_stage import GraphRanking, GraphStage, cosine_similarity_fn, make_decomposer
from pipeline.retrieval import RetrievalPipeline, RetrievalResult
from verifier.base import Verifier, read_evidence

if TYPE_CHECKING:
    from garag.llm import LLMClient
    from verifier.pair_memory import PairMemories

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimResult:
    """Everything the pipeline decided for one claim.

    Attributes:
        claim: the input claim.
        verdict: label, explanation, predicted evidence and label scores.
        retrieval: fused and per-retriever hits.
        evidence: the evidence the verifier read, in order.
        seconds: wall seconds per stage ("decomposition", "retrieval", "triplets", "graph",
            "verification"), amortised over the batch where a stage runs batched.
        subquestions: the claim's subquestions (extra retrieval queries).
        graph: graph mode: the ranked fact graph of the claim's evidence pool.
        llm: LLM verifier: calls, tokens and cache hits spent on this claim (batch average).
        program: reasoning programs: the program, each step's verdict and evidence ids, and
            how they were combined (see :func:`pipeline.reasoning.run_programs`).
    """

    claim: Claim
    verdict: Verdict
    retrieval: RetrievalResult
    evidence: tuple[Evidence, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    subquestions: tuple[str, ...] = ()
    graph: GraphRanking | None = None
    llm: dict | None = None
    program: dict | None = None


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


def build_with_pair_memories(pipe: Any, memories: PairMemories) -> Any:
    """``pipe.build()``, ``memories`` given first where the pipeline takes a pool of scored NLI pairs
    (:meth:`VerificationPipeline.share_pair_memories`; a factory may make another kind of pipeline)."""
    share = getattr(pipe, "share_pair_memories", None)
    if callable(share):
        share(memories)
    return pipe.build()


class VerificationPipeline:
    """Retrieval plus a verifier.  ``build()`` builds or reuses every artifact (and trains the
    verifier on first use when ``verifier.model`` is empty)."""

    def __init__(self, config: Config, dataset: Dataset | None = None, progress: bool = True) -> None:
        self.config = config
        self.progress = progress
        self.retrieval = RetrievalPipeline(config, dataset, progress)
        self.verifier: Verifier | None = None
        self.model_path: str = ""
        self.mix_model_path: str = ""  # verifier.mix_weight's second verifier, when there is one
        self.decomposer = None
        self.graph: GraphStage | None = None
        self.llm_client = None
        self.programmer = None
        self.answerer = None  # reasoning.answer_from: entity (pipeline.reasoning.EntityAnswerer), made on use
        self.decider = None  # the decision model (verifier.decision.Decider); None: the verifier's label
        self.llm_judge = None  # verifier.llm_judge where it applies (verifier.llm_judge.LLMJudge)
        self.pair_memories: PairMemories | None = None  # None: the NLI verifiers' own (share_pair_memories)

    @property
    def dataset(self) -> Dataset:
        return self.retrieval.dataset

    def share_pair_memories(self, memories: PairMemories) -> VerificationPipeline:
        """Have this pipeline's NLI verifiers remember scored pairs in ``memories`` (before ``build()``):
        pipelines given one pool, such as a comparison's systems, answer each other's pairs where
        they read them with the same checkpoint (:mod:`verifier.pair_memory`).

        Raises:
            RuntimeError: the pipeline is built already.
        """
        if self.verifier is not None:
            raise RuntimeError("share_pair_memories() must come before build()")
        self.pair_memories = memories
        return self

    @property
    def store(self) -> SentenceStore:
        if self.retrieval.store is None:
            raise RuntimeError("VerificationPipeline.build() must run first")
        return self.retrieval.store

    def build(self, force: bool = False) -> VerificationPipeline:
        """Build (or load) the indexes and load the trained verifier; nothing is trained here.

        Raises:
            verifier.trained.VerifierNotTrainedError: the verifier is not trained yet
                (``garag train-verifier``, or :func:`training.verifier.ensure_verifiers`).
        """
        from verifier.registry import VerifierContext, build_verifier
        from verifier.trained import mix_verifier_config, trained_verifier_path

        cfg = self.config
        if cfg.verifier.llm_judge_parts > 0 and cfg.llm.backend != "llama_cpp":  # before any training
            raise ConfigError(
                f"verifier.llm_judge_parts reads first-token probabilities, which llm.backend "
                f"{cfg.llm.backend} does not give; use llm.backend llama_cpp or llm_judge_parts 0"
            )
        self.retrieval.build(force=force)
        two_way_data = self.dataset.two_way
        self.model_path = trained_verifier_path(cfg)
        if cfg.verifier.mix_weight > 0:
            self.mix_model_path = trained_verifier_path(mix_verifier_config(cfg))
        stages_use_llm = (
            cfg.decomposition.method == "llm"
            or cfg.reasoning.programs == "llm"
            or (cfg.pipeline.mode == "graph" and cfg.triplets.method != "syntactic")
        )
        if stages_use_llm:  # the verifier and the judge make the client themselves where they need it
            self._llm()
        context = VerifierContext(
            cfg,
            self.model_path,
            self.mix_model_path,
            llm_client=self._llm,
            two_way_data=two_way_data,
            pair_memories=self.pair_memories,
        )
        self.verifier = build_verifier(cfg.pipeline.verifier, context)
        self.decomposer = make_decomposer(cfg, self.llm_client)
        self.decider = self._decider()
        if applies(cfg.verifier.llm_judge, two_way_data=two_way_data):
            self.verifier = self._judged(self.verifier)
        if cfg.reasoning.programs != "none":
            from pipeline.reasoning import make_programmer

            self.programmer = make_programmer(cfg, self.llm_client)
        if cfg.pipeline.mode == "graph":
            from pipeline.graph_stage import make_extractor

            self.graph = GraphStage(
                cfg,
                make_extractor(cfg, self.llm_client),
                similarity=self._similarity(),
                claim_entities=getattr(self.decomposer, "claim_entities", None),
            ).load()
        return self

    def _decider(self):  # noqa: ANN202 - verifier.decision.Decider | None
        """The decision model beside garag's verifier (:func:`verifier.decision.decision_for`) with its
        features: the claim's parts from the rule decomposer, per-sentence probabilities from the NLI
        verifier at ``self.model_path`` (the one the decision model was fitted with).  Nothing more is
        loaded where there is no decision model."""
        from verifier.decision import Decider, DecisionFeatures, decision_for
        from verifier.nli import NLIVerifier

        cfg = self.config
        model = decision_for(cfg.verifier.decision, self.model_path, cfg.verifier.top_k)
        if model is None:
            return None
        nli = (
            _find_nli(self.verifier, self.model_path)
            or NLIVerifier(cfg.verifier, self.model_path, self.pair_memories).load()
        )
        features = DecisionFeatures(nli.score_sentences, cfg.decomposition.spacy_model, cfg.verifier.top_k)
        return Decider(model, features, self._rule_decomposer().subclaims_batch)

    def _subclaims(self):  # noqa: ANN202 - str -> list[str]
        """The rule decomposer's sub-claims of a claim."""
        return self._rule_decomposer().subclaims

    def _rule_decomposer(self):  # noqa: ANN202 - pipeline.decompose.RuleDecomposer
        """The pipeline's own decomposer where it is the rule one, else a rule decomposer."""
        from pipeline.decompose import RuleDecomposer

        rule = self.decomposer if isinstance(self.decomposer, RuleDecomposer) else None
        return rule or RuleDecomposer(self.config.decomposition).load()

    def _llm(self) -> LLMClient:
        """The pipeline's LLM client, made and loaded on first use."""
        if self.llm_client is None:
            from garag.llm import LLMClient

            self.llm_client = LLMClient(self.config.llm, self.config.paths.cache_dir).load()
        return self.llm_client

    def _judged(self, verifier: Verifier) -> Verifier:
        """``verifier`` wrapped in the LLM judge (``verifier.llm_judge``), which asks about the
        verdicts it calls SUPPORTED; the decision model reads the judged scores."""
        from verifier.judged import JudgedVerifier
        from verifier.llm_judge import LLMJudge

        cfg, two_way_data = self.config, self.dataset.two_way
        parts = self._subclaims() if cfg.verifier.llm_judge_parts > 0 else None
        self.llm_judge = LLMJudge(self._llm(), parts=parts, parts_threshold=cfg.verifier.llm_judge_parts)
        return JudgedVerifier(verifier, self.llm_judge, two_way_data=two_way_data)

    def _similarity(self):
        """Claim-sentence cosine from the dense index, when the dense retriever is configured."""
        dense = self.retrieval.retrievers.get("dense")
        if dense is None:
            return None
        store = self.store

        def vectors(pool: Sequence[Evidence]):
            return dense.vectors([store.row_of(e.sentence) for e in pool])

        return cosine_similarity_fn(dense.encode_queries, vectors)

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
        cfg = self.config
        k = cfg.verifier.top_k
        n = max(len(claims), 1)
        texts = [c.text for c in claims]
        t0 = time.perf_counter()
        subq = [tuple(self.decomposer.decompose(t)) if self.decomposer else () for t in texts]
        t1 = time.perf_counter()
        retrieved = self.retrieval.retrieve_batch(texts, extra_queries=subq)
        t2 = time.perf_counter()
        timing = {"decomposition": (t1 - t0) / n, "retrieval": (t2 - t1) / n}
        evidence: list[list[Evidence]] = []
        inputs: list = []
        graphs: list[GraphRanking | None] = []
        for claim, res in zip(claims, retrieved, strict=True):
            ranking = None
            if oracle and claim.verifiable:
                ev = gold_evidence(claim, self.store)
            elif self.graph is not None:
                pool = hits_to_evidence(res.fused, self.store, max(k, cfg.pipeline.evidence_pool))
                ranking = self.graph.rank(claim.text, pool)
                ev = list(ranking.evidence)
            else:
                ev = hits_to_evidence(res.fused, self.store, k)
            graphs.append(ranking)
            shown, given = read_evidence(self.verifier, ev, ranking, k)  # the verifier decides what it reads
            evidence.append(shown)
            inputs.append(given)
        before = self.llm_client.stats.snapshot() if self.llm_client is not None else None
        t3 = time.perf_counter()
        verdicts = self.verifier.verify_batch(texts, inputs)
        t4 = time.perf_counter()
        timing["verification"] = (t4 - t3) / n
        programs: list[dict | None] = [None] * len(claims)
        checked = evidence  # what the entity check reads: every sentence the verdicts rest on
        if self.programmer is not None:
            from pipeline.reasoning import run_programs

            verdicts, programs, evidence, checked = run_programs(self, claims, verdicts, evidence, oracle)
            timing["reasoning"] = (time.perf_counter() - t4) / n
        t5 = time.perf_counter()
        if self.decider is not None:  # the final label: nothing after this changes it
            verdicts = self.decider.decide(texts, checked, verdicts, two_way=self.dataset.two_way)
        timing["verification"] += (time.perf_counter() - t5) / n
        llm = _usage_per_claim(before, self.llm_client.stats.snapshot(), n) if before is not None else None
        out = []
        for c, v, r, e, q, g, p in zip(
            claims, verdicts, retrieved, evidence, subq, graphs, programs, strict=True
        ):
            seconds = dict(timing)
            if g is not None:
                seconds.update(g.seconds)
            out.append(ClaimResult(c, v, r, tuple(e), seconds, q, g, llm, p))
        return out

    def gold_evidence(self, claim: Claim) -> list[Evidence]:
        """The claim's gold evidence with its text (see :func:`gold_evidence`)."""
        return gold_evidence(claim, self.store)

    def step_evidence(self, texts: Sequence[str]) -> list[list[Evidence]]:
        """Evidence for free-standing queries (program steps): retrieval, then the graph ranking in
        graph mode, the first ``verifier.top_k`` sentences."""
        k = self.config.verifier.top_k
        out = []
        for text, res in zip(texts, self.retrieval.retrieve_batch(list(texts)), strict=True):
            if self.graph is not None:
                pool = hits_to_evidence(res.fused, self.store, max(k, self.config.pipeline.evidence_pool))
                out.append(list(self.graph.rank(text, pool).evidence)[:k])
            else:
                out.append(hits_to_evidence(res.fused, self.store, k))
        return out

    def iter_results(
        self, claims: Sequence[Claim], batch_size: int = 32, oracle: bool = False
    ) -> Iterator[ClaimResult]:
        """``run`` over many claims in batches, yielding results in order."""
        for i in range(0, len(claims), batch_size):
            yield from self.run(claims[i : i + batch_size], oracle=oracle)


def _find_nli(verifier: object, model_path: str):  # noqa: ANN202 - verifier.nli.NLIVerifier | None
    """The NLI verifier at ``model_path`` inside a built component (itself, a mix's first, an LLM
    verifier's fallback, a judged verifier's inner one), so that its memory of scored pairs serves
    the decision too."""
    from verifier.nli import NLIVerifier

    seen: set[int] = set()
    todo = [verifier]
    while todo:
        v = todo.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, NLIVerifier) and v.model_path == model_path:
            return v
        todo.extend(getattr(v, name, None) for name in ("inner", "first", "fallback"))
    return None


def applies(switch: str, *, two_way_data: bool) -> bool:
    """Whether a never / two_way / always setting (``verifier.llm_judge``) acts on this data:
    ``two_way`` on 2-way labels only, ``always`` on any."""
    return switch == "always" or (switch == "two_way" and two_way_data)


def predicted_evidence(result: ClaimResult, limit: int = 5) -> list[SentenceId]:
    """FEVER's ``predicted_evidence``: the verdict's evidence, then the top-ranked rest, at most ``limit``."""
    out = list(result.verdict.evidence[:limit])
    for h in result.retrieval.fused:
        if len(out) >= limit:
            break
        if h.sentence not in out:
            out.append(h.sentence)
    return out


def _usage_per_claim(before: dict, after: dict, n: int) -> dict:
    """LLM counters (``LLMStats.snapshot()["total"]``) spent between two snapshots, per claim."""
    start, end = before.get("total", {}), after.get("total", {})
    return {k: (v - start.get(k, 0)) / n for k, v in end.items() if isinstance(v, (int, float))}
