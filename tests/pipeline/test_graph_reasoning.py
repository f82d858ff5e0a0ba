"""Propagation (GA-RAG eqs. 2-4) and personalized PageRank on tiny hand-computed graphs."""

from __future__ import annotations

import networkx as nx
import pytest

from garag.config import ConfigError, PropagationConfig
from garag.types import Evidence, SentenceId, Triplet
from pipeline.graph_reasoning import (
    build_fact_graph,
    entity_node,
    fact_node,
    initial_scores,
    personalized_pagerank,
    propagate,
    rank_facts,
)


def _path_graph() -> nx.Graph:
    # a -1- b -3- c, plus an isolated d.  Z_a = 1, Z_b = 1 + 3 = 4, Z_c = 3, Z_d = 0.
    g = nx.Graph()
    g.add_edge("a", "b", weight=1.0)
    g.add_edge("b", "c", weight=3.0)
    g.add_node("d")
    return g


def test_propagate_matches_hand_computation() -> None:
    g = _path_graph()
    s = propagate(g, {"a": 1.0, "d": 1.0}, gamma=0.5, iterations=1)
    # t=1: a = 0.5*1 + 0.5*(w_ba/Z_b*s_b = 1/4*0) = 0.5
    #      b = 0.5*0 + 0.5*(w_ab/Z_a*s_a + w_cb/Z_c*s_c = 1/1*1 + 3/3*0) = 0.5
    #      c = 0.5*0 + 0.5*(w_bc/Z_b*s_b = 3/4*0) = 0
    #      d = 0.5*1 + 0.5*0 (isolated: no neighbours) = 0.5
    assert s == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.0, "d": 0.5})
    s = propagate(g, {"a": 1.0, "d": 1.0}, gamma=0.5, iterations=2)
    # t=2 from (0.5, 0.5, 0, 0.5):
    #      a = 0.25 + 0.5*(1/4*0.5) = 0.3125
    #      b = 0.25 + 0.5*(1/1*0.5 + 3/3*0) = 0.5
    #      c = 0.0 + 0.5*(3/4*0.5) = 0.1875
    #      d = 0.25
    assert s == pytest.approx({"a": 0.3125, "b": 0.5, "c": 0.1875, "d": 0.25})
    # the connected part keeps its mass (0.3125 + 0.5 + 0.1875 = 1): column-normalised transfer
    assert s["a"] + s["b"] + s["c"] == pytest.approx(1.0)


def test_propagate_gamma_zero_and_bad_values() -> None:
    g = _path_graph()
    assert propagate(g, {"a": 0.7}, gamma=0.0, iterations=5)["a"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="gamma"):
        propagate(g, {}, gamma=1.5, iterations=1)
    with pytest.raises(ValueError, match="iterations"):
        propagate(g, {}, gamma=0.5, iterations=-1)


def test_initial_scores_eq2() -> None:
    ev = [Evidence(SentenceId("P", i), "x", s) for i, s in enumerate([10.0, 5.0, 0.0])]
    s0 = initial_scores(ev, alpha=0.8, beta=0.2)
    # sims min-max: 1, 0.5, 0 -> 0.8*1 + 0.2/1 = 1.0; 0.8*0.5 + 0.2/2 = 0.5; 0 + 0.2/3
    assert [s0[e.sentence] for e in ev] == pytest.approx([1.0, 0.5, 0.2 / 3])
    s0 = initial_scores(ev, 0.8, 0.2, sims={e.sentence: 0.5 for e in ev})
    assert s0[ev[2].sentence] == pytest.approx(0.4 + 0.2 / 3)
    with pytest.raises(ValueError, match="sims"):
        initial_scores(ev, 0.8, 0.2, sims={ev[0].sentence: 1.0})


def _two_facts() -> tuple[list[Evidence], list[Triplet]]:
    f1, f2 = SentenceId("P1", 0), SentenceId("P2", 0)
    ev = [Evidence(f1, "A rel B .", 1.0), Evidence(f2, "Something else .", 0.0)]
    return ev, [Triplet("A", "rel", "B", 0.9, f1)]


def test_graph_structure() -> None:
    ev, trips = _two_facts()
    g = build_fact_graph(ev, trips, PropagationConfig(), extra_edges=[("B", "P2", 2.0)])
    f1 = fact_node(ev[0].sentence)
    assert set(g.neighbors(f1)) == {entity_node("P1"), entity_node("A"), entity_node("B")}
    assert g[entity_node("A")][entity_node("B")]["weight"] == pytest.approx(0.9)  # relation * conf
    assert g[entity_node("P1")][entity_node("A")]["weight"] == pytest.approx(0.5)  # co-occurrence
    assert g[entity_node("B")][entity_node("P2")]["weight"] == pytest.approx(1.0)  # path 0.5 * 2
    with pytest.raises(ValueError, match="not among the evidence"):
        build_fact_graph(ev[1:], trips, PropagationConfig())


def test_rank_facts_eq4() -> None:
    ev, trips = _two_facts()
    cfg = PropagationConfig(gamma=0.0)  # s(T) = s0, so eq. 4 can be checked alone
    r = rank_facts(ev, trips, cfg)
    # nodes: f1, f2, P1, A, B, P2 (6) -> degree centrality = degree / 5: f1 has 3 -> 0.6, f2 has 1 -> 0.2
    # s0: f1 = 0.8*1 + 0.2/1 = 1.0; f2 = 0.8*0 + 0.2/2 = 0.1
    # final f1 = 0.7*1.0 + 0.15*0.6 + 0.15*0.9 = 0.925; f2 = 0.7*0.1 + 0.15*0.2 + 0 = 0.1
    assert [f.sentence for f in r] == [ev[0].sentence, ev[1].sentence]
    assert r[0].score == pytest.approx(0.925) and r[1].score == pytest.approx(0.1)
    assert r[0].centrality == pytest.approx(0.6) and r[0].confidence == pytest.approx(0.9)
    assert r[0].triplets == tuple(trips)


def test_propagation_lifts_connected_fact() -> None:
    # f3 (ranked last) shares entity X with the top fact f1; f2 is unconnected.  Eq. 3 lifts f3 above f2.
    s = [SentenceId("P", i) for i in range(3)]
    ev = [Evidence(s[0], "", 1.0), Evidence(s[1], "", 0.5), Evidence(s[2], "", 0.4)]
    trips = [Triplet("X", "r", "Y", 1.0, s[0]), Triplet("X", "r", "Z", 1.0, s[2])]
    cfg = PropagationConfig(gamma=0.8, iterations=4, page_weight=0.0, lambda2=0.0, lambda3=0.0)
    plain = rank_facts(ev, trips, PropagationConfig(gamma=0.0, page_weight=0.0, lambda2=0.0, lambda3=0.0))
    assert [f.sentence for f in plain] == s
    lifted = rank_facts(ev, trips, cfg)
    assert [f.sentence for f in lifted].index(s[2]) < [f.sentence for f in lifted].index(s[1])


def test_ppr_sanity() -> None:
    g = _path_graph()
    pr = personalized_pagerank(g, {"c": 1.0}, damping=0.85)
    assert sum(pr.values()) == pytest.approx(1.0)
    # restart at c: a (two hops away) gets least; the isolated d gets nothing
    assert min(pr["b"], pr["c"]) > pr["a"] > 0 and pr["d"] == pytest.approx(0.0, abs=1e-9)
    # the PPR variant restarts at the claim's entities: naming P2 lifts the fact on page P2
    ev, trips = _two_facts()
    cfg = PropagationConfig(method="ppr", ppr_entity_weight=5.0, lambda2=0.0, lambda3=0.0)
    without = {f.sentence: f.score for f in rank_facts(ev, trips, cfg)}
    with_p2 = {f.sentence: f.score for f in rank_facts(ev, trips, cfg, claim_entities=["P2"])}
    assert with_p2[ev[1].sentence] > without[ev[1].sentence]
    assert max(with_p2.values()) == pytest.approx(0.7)  # best fact's PPR is scaled to 1, times lambda1


def test_config_validation_names_key() -> None:
    with pytest.raises(ConfigError, match="propagation.gamma"):
        PropagationConfig(gamma=2.0)
    with pytest.raises(ConfigError, match="propagation.method"):
        PropagationConfig(method="hits")
