"""Per-claim fact graph and relevance propagation (GA-RAG eqs. 2-4, personalized PageRank).

Pure functions: no I/O, timers or logging.

The graph (undirected, weighted, ``networkx.Graph``):

* **fact nodes** ``("fact", SentenceId)``: one per evidence sentence, not one per
  triplet.  Retrieval similarity and rank (eq. 2), the verifier's evidence and
  FEVER's scoring are all per sentence, so ranking sentences directly avoids
  re-aggregating triplet scores; a fact's triplets hang off it as edges.
* **entity nodes** ``("ent", key)``: triplet subjects and objects, and the page
  each sentence belongs to (FEVER sentences are about their page), keyed by
  ``entity_key`` so "Barack_Obama" and "Barack Obama" meet.
* edges: fact - entity it mentions (``mention_weight``), fact - its page entity
  (``page_weight``), entity - entity for a triplet relation
  (``relation_weight * confidence``, summed over triplets), entity - entity
  co-occurring in one sentence without a relation (``cooccurrence_weight``),
  and optional extra edges such as GRAAL paths (``path_weight * weight``).
  Parallel contributions of one kind add up.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from garag.config import PropagationConfig
from garag.text import normalize_title
from garag.types import Evidence, SentenceId, Triplet, unique_evidence

Node = tuple[str, object]


@dataclass(frozen=True)
class RankedFact:
    """One evidence sentence after graph ranking.

    Attributes:
        sentence: FEVER ``(page, line)`` id.
        score: eq. 4 final score (higher is better).
        initial: eq. 2 score s0.
        propagated: eq. 3 score s(T) (or the max-scaled PPR score for ``method="ppr"``).
        centrality: degree centrality of the fact node.
        confidence: highest confidence among the sentence's triplets (0 without triplets).
        triplets: the sentence's triplets, best first.
    """

    sentence: SentenceId
    score: float
    initial: float
    propagated: float
    centrality: float
    confidence: float
    triplets: tuple[Triplet, ...] = ()


def entity_key(name: str) -> str:
    """Graph key of an entity name or page id: title-normalised, leading article dropped."""
    key = normalize_title(name, strip_disambiguation=False)
    return re.sub(r"^(?:the|a|an) ", "", key)


def fact_node(sid: SentenceId) -> Node:
    return ("fact", sid)


def entity_node(name: str) -> Node:
    return ("ent", entity_key(name))


def _add(g: nx.Graph, u: Node, v: Node, w: float, combine: str = "sum") -> None:
    if u == v or w <= 0:
        return
    if g.has_edge(u, v):
        old = g[u][v]["weight"]
        g[u][v]["weight"] = old + w if combine == "sum" else max(old, w)
    else:
        g.add_edge(u, v, weight=w)


def build_fact_graph(
    evidence: Sequence[Evidence],
    triplets: Iterable[Triplet],
    config: PropagationConfig,
    extra_edges: Iterable[tuple[str, str, float]] = (),
) -> nx.Graph:
    """Local graph of one claim's evidence (see the module docstring for nodes and weights).

    Args:
        evidence: the claim's evidence sentences (duplicates after the first are ignored).
        triplets: facts whose ``source`` is one of the evidence sentences.
        config: edge weights.
        extra_edges: ``(entity_a, entity_b, weight)`` such as GRAAL page-to-page paths.

    Raises:
        ValueError: a triplet's source is not among the evidence, or an extra edge weight is negative.
    """
    g = nx.Graph()
    evidence = unique_evidence(evidence)
    for ev in evidence:
        g.add_node(fact_node(ev.sentence))
        _add(g, fact_node(ev.sentence), entity_node(ev.sentence.page), config.page_weight, "max")
    by_source: dict[SentenceId, list[Triplet]] = {}
    for t in triplets:
        if not g.has_node(fact_node(t.source)):
            raise ValueError(f"triplet source {t.source} is not among the evidence sentences")
        by_source.setdefault(t.source, []).append(t)
    for sid, facts in by_source.items():
        f = fact_node(sid)
        related: set[frozenset] = set()
        for t in facts:
            s, o = entity_node(t.subject), entity_node(t.object)
            _add(g, f, s, config.mention_weight, "max")
            _add(g, f, o, config.mention_weight, "max")
            _add(g, s, o, config.relation_weight * t.confidence)
            related.add(frozenset((s, o)))
        ents = sorted({n for n in g.neighbors(f) if n[0] == "ent"}, key=str)
        for a, b in itertools.combinations(ents, 2):
            if frozenset((a, b)) not in related:
                _add(g, a, b, config.cooccurrence_weight)
    for a, b, w in extra_edges:
        if w < 0:
            raise ValueError(f"extra edge ({a!r}, {b!r}) has negative weight {w}")
        _add(g, entity_node(a), entity_node(b), config.path_weight * w)
    return g


def initial_scores(
    evidence: Sequence[Evidence], alpha: float, beta: float, sims: Mapping[SentenceId, float] | None = None
) -> dict[SentenceId, float]:
    """GA-RAG eq. 2: ``s0 = alpha*sim(q, d) + beta/rank`` with rank 1 for the first evidence sentence.

    Args:
        evidence: best first.
        sims: query-sentence similarity in [0, 1] per sentence (e.g. dense cosine); None = the
            evidence scores min-max scaled to [0, 1] (all 1.0 when they are all equal).

    Raises:
        ValueError: ``sims`` lacks one of the evidence sentences.
    """
    evidence = unique_evidence(evidence)
    if sims is None:
        scores = [ev.score for ev in evidence]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
        sims = {ev.sentence: (ev.score - lo) / (hi - lo) if hi > lo else 1.0 for ev in evidence}
    missing = [ev.sentence for ev in evidence if ev.sentence not in sims]
    if missing:
        raise ValueError(f"sims: no similarity for {len(missing)} evidence sentence(s), e.g. {missing[0]}")
    return {ev.sentence: alpha * sims[ev.sentence] + beta / rank for rank, ev in enumerate(evidence, start=1)}


def propagate(g: nx.Graph, s0: Mapping[Node, float], gamma: float, iterations: int) -> dict[Node, float]:
    """GA-RAG eq. 3: ``s_i(t+1) = (1-gamma)*s_i(t) + gamma*sum_j w_ji/Z_j * s_j(t)`` for T iterations.

    ``Z_j`` is node j's total edge weight, so each node passes its whole score
    share to its neighbours in proportion to the edge weights; an isolated node
    passes nothing.  Nodes missing from ``s0`` start at 0.
    """
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    nodes = list(g.nodes)
    if not nodes:
        return {}
    w = nx.to_scipy_sparse_array(g, nodelist=nodes, weight="weight", format="csr")
    z = np.asarray(w.sum(axis=0)).ravel()
    inv = np.divide(1.0, z, out=np.zeros_like(z, dtype=float), where=z > 0)
    p = w.multiply(inv[None, :]).tocsr()  # p[i, j] = w_ji / Z_j
    s = np.array([float(s0.get(n, 0.0)) for n in nodes])
    for _ in range(iterations):
        s = (1.0 - gamma) * s + gamma * (p @ s)
    return dict(zip(nodes, s.tolist(), strict=True))


def personalized_pagerank(
    g: nx.Graph, personalization: Mapping[Node, float], damping: float
) -> dict[Node, float]:
    """PageRank restarting at ``personalization`` (normalised; uniform when it is all zero)."""
    if not 0 < damping < 1:
        raise ValueError(f"damping must be in (0, 1), got {damping}")
    if g.number_of_nodes() == 0:
        return {}
    pers = {n: float(personalization.get(n, 0.0)) for n in g.nodes}
    if any(v < 0 for v in pers.values()):
        raise ValueError("personalization values must be >= 0")
    if sum(pers.values()) <= 0:
        pers = None
    return nx.pagerank(g, alpha=damping, personalization=pers, weight="weight", max_iter=200, tol=1e-10)


def combine_scores(
    propagated: float, centrality: float, confidence: float, lambda1: float, lambda2: float, lambda3: float
) -> float:
    """GA-RAG eq. 4: ``lambda1*s(T) + lambda2*centrality + lambda3*conf``."""
    return lambda1 * propagated + lambda2 * centrality + lambda3 * confidence


def rank_facts(
    evidence: Sequence[Evidence],
    triplets: Sequence[Triplet],
    config: PropagationConfig,
    sims: Mapping[SentenceId, float] | None = None,
    claim_entities: Iterable[str] = (),
    extra_edges: Iterable[tuple[str, str, float]] = (),
) -> list[RankedFact]:
    """Rank a claim's evidence sentences over its fact graph; best first, ties in evidence order.

    Args:
        evidence: retrieved sentences, best first (their order gives eq. 2's rank).
        triplets: facts extracted from these sentences.
        config: coefficients and method ("garag": eq. 3; "ppr": personalized PageRank).
        sims: optional query-sentence similarities for eq. 2 (see ``initial_scores``).
        claim_entities: names or page ids of the claim's entities; "ppr" restarts there
            (with ``ppr_entity_weight`` of the restart mass; the rest goes to facts by s0).
        extra_edges: ``(entity_a, entity_b, weight)``, e.g. GRAAL paths.
    """
    evidence = unique_evidence(evidence)
    if not evidence:
        return []
    g = build_fact_graph(evidence, triplets, config, extra_edges)
    s0 = initial_scores(evidence, config.alpha, config.beta, sims)
    scores = node_scores(g, {fact_node(sid): v for sid, v in s0.items()}, config, claim_entities)
    prop = {sid: scores[fact_node(sid)] for sid in s0}
    centrality = nx.degree_centrality(g) if g.number_of_nodes() > 1 else {n: 0.0 for n in g.nodes}
    by_source: dict[SentenceId, list[Triplet]] = {}
    for t in triplets:
        by_source.setdefault(t.source, []).append(t)
    out = []
    for ev in evidence:
        sid = ev.sentence
        facts = tuple(sorted(by_source.get(sid, []), key=lambda t: -t.confidence))
        conf = facts[0].confidence if facts else 0.0
        c = centrality[fact_node(sid)]
        score = combine_scores(prop[sid], c, conf, config.lambda1, config.lambda2, config.lambda3)
        out.append(RankedFact(sid, score, s0[sid], prop[sid], c, conf, facts))
    order = sorted(range(len(out)), key=lambda i: (-out[i].score, i))
    return [out[i] for i in order]


def node_scores(
    g: nx.Graph, s0: Mapping[Node, float], config: PropagationConfig, claim_entities: Iterable[str] = ()
) -> dict[Node, float]:
    """The propagated score of every node: eq. 3 from the fact scores ``s0`` ("garag"), or personalized
    PageRank restarting at the facts and the claim's entities, scaled so the best fact has 1 ("ppr")."""
    if config.method == "garag":
        return propagate(g, s0, config.gamma, config.iterations)
    pers = _restart(s0, [entity_node(e) for e in claim_entities if g.has_node(entity_node(e))], config)
    pr = personalized_pagerank(g, pers, config.damping)
    top = max((pr[n] for n in s0), default=0.0)
    return {n: v / top if top > 0 else 0.0 for n, v in pr.items()}


def fact_graph_view(
    facts: Sequence[RankedFact], config: PropagationConfig, claim_entities: Iterable[str] = ()
) -> dict:
    """A ranked fact graph as JSON-able nodes and edges, for drawing: the local graph rebuilt from the
    facts' sentences and triplets, every node with its propagated score (fact nodes: the same
    ``propagated`` as their :class:`RankedFact`, plus the eq. 4 ``score``).

    Node ids are ``fact:<page>:<line>`` and ``ent:<key>``; edge kinds are "page" (a fact and its
    page's entity), "mention", "relation" (with the triplets' relations) and "cooccurrence".
    """
    if not facts:
        return {"nodes": [], "edges": []}
    evidence = [Evidence(f.sentence, "", f.initial) for f in facts]
    triplets = [t for f in facts for t in f.triplets]
    g = build_fact_graph(evidence, triplets, config)
    entities = list(claim_entities)
    scores = node_scores(g, {fact_node(f.sentence): f.initial for f in facts}, config, entities)
    claim_keys = {entity_key(e) for e in entities}
    ranked = {fact_node(f.sentence): f for f in facts}
    relations: dict[frozenset, list[str]] = {}
    for t in triplets:
        pair = frozenset((entity_node(t.subject), entity_node(t.object)))
        relations.setdefault(pair, []).append(t.relation)

    def node_id(n: Node) -> str:
        if n[0] == "fact":
            sid = n[1]
            return f"fact:{sid.page}:{sid.line}"  # type: ignore[union-attr]
        return f"ent:{n[1]}"

    nodes = []
    for n in g.nodes:
        if n[0] == "fact":
            f = ranked[n]
            nodes.append(
                {"id": node_id(n), "kind": "fact", "label": f"{f.sentence.page} ({f.sentence.line})",
                 "page": f.sentence.page, "line": f.sentence.line, "score": f.score,
                 "propagated": scores[n]}
            )  # fmt: skip
        else:
            nodes.append(
                {"id": node_id(n), "kind": "entity", "label": str(n[1]), "score": scores[n],
                 "propagated": scores[n], "claim": n[1] in claim_keys}
            )  # fmt: skip
    edges = []
    for u, v, data in g.edges(data=True):
        if u[0] == "fact" or v[0] == "fact":
            fact, ent = (u, v) if u[0] == "fact" else (v, u)
            kind = "page" if entity_node(fact[1].page) == ent else "mention"  # type: ignore[union-attr]
            rel: list[str] = []
        else:
            rel = sorted(set(relations.get(frozenset((u, v)), [])))
            kind = "relation" if rel else "cooccurrence"
        edges.append(
            {"source": node_id(u), "target": node_id(v), "kind": kind, "weight": float(data["weight"]),
             "relations": rel}
        )  # fmt: skip
    return {"nodes": nodes, "edges": edges}


def _restart(s0: Mapping[Node, float], entities: list[Node], config: PropagationConfig) -> dict[Node, float]:
    """PPR restart vector: facts by s0 (mass 1), claim entities equally (mass ``ppr_entity_weight``)."""
    total = sum(s0.values())
    pers = {n: v / total for n, v in s0.items()} if total > 0 else {}
    for e in entities:
        pers[e] = pers.get(e, 0.0) + config.ppr_entity_weight / len(entities)
    return pers
