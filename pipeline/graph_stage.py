"""The graph-augmented stages between retrieval and the verifier.

Decomposition gives extra retrieval queries; after retrieval, triplets are
extracted from the claim's evidence pool, the pool is ranked over its local
fact graph (GA-RAG eqs. 2-4 or personalized PageRank), and the verifier reads
the graph-ranked evidence (NLI) or the evidence with its triplet lines (LLM).
Stages are picked by config (``decomposition``, ``triplets``, ``propagation``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from garag.config import Config
from garag.text import normalize_title
from garag.types import Evidence, SentenceId
from pipeline.graph_reasoning import RankedFact, rank_facts
from pipeline.linearize import ranked_evidence
from pipeline.protocols import Decomposer, TripletExtractor

Link = Callable[[str], "str | None"]
# cosine similarities of the claim to each evidence sentence, or None when no encoder is at hand
Similarity = Callable[[str, Sequence[Evidence]], "dict[SentenceId, float] | None"]


@dataclass(frozen=True)
class GraphRanking:
    """What the graph stage made of one claim's evidence pool.

    Attributes:
        evidence: the pool re-ranked by the graph, best first (scores are eq. 4 scores).
        facts: the ranked fact nodes with their triplets.
        seconds: wall seconds of "triplets" and "graph".
        claim_entities: the claim's entities (names or page ids).
        covered: those of them that are nodes of the local graph: a triplet's subject or object,
            or the title of a pool sentence's page (case and spacing ignored).
        pool: the sentences the local graph was built from.
    """

    evidence: tuple[Evidence, ...]
    facts: tuple[RankedFact, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    claim_entities: tuple[str, ...] = ()
    covered: tuple[str, ...] = ()
    pool: tuple[SentenceId, ...] = ()

    def to_json(self) -> dict:
        """The graph's summary in a prediction record (GA-RAG graph coverage and completeness)."""
        return {
            "entities": list(self.claim_entities),
            "covered": list(self.covered),
            "pool": [s.to_json() for s in self.pool],
            "facts": len(self.facts),
            "triplets": sum(len(f.triplets) for f in self.facts),
        }

    def triplet_lines(self, per_fact: int = 3) -> dict[SentenceId, list[str]]:
        """``subject | relation | object (confidence)`` lines per sentence, for the LLM prompt."""
        return {
            f.sentence: [
                f"{t.subject} | {t.relation} | {t.object} ({t.confidence:.2f})" for t in f.triplets[:per_fact]
            ]
            for f in self.facts
        }


def make_decomposer(
    config: Config, client: object | None = None, link: Link | None = None
) -> Decomposer | None:
    """The configured decomposer (loaded), or None for ``decomposition.method: none``."""
    method = config.decomposition.method
    if method == "none":
        return None
    from pipeline.decompose import RuleDecomposer

    rule = RuleDecomposer(config.decomposition, link=link).load()
    if method == "rule":
        return rule
    if client is None:
        raise ValueError("decomposition.method 'llm' needs an LLM client (config section 'llm')")
    from pipeline.llm_stages import LLMDecomposer

    # the rule decomposer answers when the LLM reply is unusable (counted by the client)
    return LLMDecomposer(client, config.decomposition.max_questions, fallback=rule)


def make_extractor(
    config: Config, client: object | None = None, link: Link | None = None
) -> TripletExtractor:
    """The configured triplet extractor (loaded)."""
    from pipeline.triplets import SyntacticExtractor

    method = config.triplets.method
    syntactic = SyntacticExtractor(config.triplets, link=link).load()
    if method == "syntactic":
        return syntactic
    if client is None:
        raise ValueError(f"triplets.method {method!r} needs an LLM client (config section 'llm')")
    from pipeline.llm_stages import LLMTripletExtractor

    llm = LLMTripletExtractor(client, fallback=syntactic)
    if method == "llm":
        return llm
    return HybridExtractor(syntactic, llm, config.triplets.hybrid_min_triplets)


class HybridExtractor:
    """Syntactic triplets first; the LLM only for sentences with fewer than ``min_triplets`` facts."""

    name = "hybrid"

    def __init__(self, syntactic: TripletExtractor, llm: TripletExtractor, min_triplets: int) -> None:
        self.syntactic, self.llm, self.min_triplets = syntactic, llm, min_triplets

    def extract(self, evidence: Sequence[Evidence]) -> list:
        found = self.syntactic.extract(evidence)
        counts: dict[SentenceId, int] = {}
        for t in found:
            counts[t.source] = counts.get(t.source, 0) + 1
        sparse = [e for e in evidence if counts.get(e.sentence, 0) < self.min_triplets]
        return found + (self.llm.extract(sparse) if sparse else [])


class GraphStage:
    """Triplets + local graph ranking for one claim at a time (cheap to construct; ``load()`` loads spaCy)."""

    def __init__(
        self,
        config: Config,
        extractor: TripletExtractor | None = None,
        similarity: Similarity | None = None,
        claim_entities: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.config = config
        self.extractor = extractor
        self.similarity = similarity
        self.claim_entities = claim_entities

    def load(self) -> GraphStage:
        if self.extractor is None:
            self.extractor = make_extractor(self.config)
        return self

    def rank(self, claim: str, pool: Sequence[Evidence]) -> GraphRanking:
        """Rank ``pool`` (retrieved sentences, best first) over the claim's fact graph."""
        if self.extractor is None:
            raise RuntimeError("GraphStage.load() must run first")
        if not pool:
            return GraphRanking((), (), {"triplets": 0.0, "graph": 0.0})
        t0 = time.perf_counter()
        triplets = self.extractor.extract(pool)
        t1 = time.perf_counter()
        sims = self.similarity(claim, pool) if self.similarity is not None else None
        entities = self.claim_entities(claim) if self.claim_entities is not None else []
        facts = rank_facts(pool, triplets, self.config.propagation, sims=sims, claim_entities=entities)
        ranked = ranked_evidence(facts, pool)
        t2 = time.perf_counter()
        nodes = {normalize_title(e.sentence.page) for e in pool}
        nodes |= {_node_key(x) for f in facts for t in f.triplets for x in (t.subject, t.object)}
        covered = tuple(e for e in entities if _node_key(e) in nodes or normalize_title(e) in nodes)
        return GraphRanking(
            tuple(ranked),
            tuple(facts),
            {"triplets": t1 - t0, "graph": t2 - t1},
            tuple(entities),
            covered,
            tuple(e.sentence for e in pool),
        )


def _node_key(name: str) -> str:
    return " ".join(name.casefold().split())


def cosine_similarity_fn(encode_query: Callable[[list[str]], np.ndarray], vectors: Callable) -> Similarity:
    """A :data:`Similarity` from a query encoder and a sentence-vector lookup (both L2-normalised).

    Args:
        encode_query: texts -> (n, d) normalised vectors.
        vectors: evidence -> (n, d) normalised vectors in the same order.
    """

    def similarity(claim: str, pool: Sequence[Evidence]) -> dict[SentenceId, float]:
        q = encode_query([claim])[0]
        m = vectors(pool)
        return {e.sentence: float(max(0.0, s)) for e, s in zip(pool, m @ q, strict=True)}

    return similarity
