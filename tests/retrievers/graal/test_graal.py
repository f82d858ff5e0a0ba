"""GRAAL on a hand-made corpus whose answer is known by construction.

The Beatles -> Liverpool -> England: "The Beatles were formed in England" names
The_Beatles and England; the between vertex is Liverpool, joined to the first
by "The Beatles ... formed in Liverpool" and to the second by "Liverpool is a
city ... in Merseyside, England".  England's second sentence co-mentions
Merseyside and Monaco in two different clauses (an unrelated co-mention).
Real spaCy and the real MiniLM encoder throughout.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from garag.config import DenseConfig, GraalConfig
from garag.store import SentenceStore
from garag.types import SentenceId
from garag.wiki import corpus_fingerprint
from retrievers.base import IndexContext
from retrievers.embeddings import EmbeddingCache, SentenceEncoder
from retrievers.graal.aliases import AliasTable, mention_key, title_aliases
from retrievers.graal.builder import GraphBuilder
from retrievers.graal.graph_store import SENTENCE_FRAME, GraphStore
from retrievers.graal.linker import SpacyParser
from retrievers.graal.retriever import GraalRetriever

from .conftest import CORPUS

CLAIM = "The Beatles were formed in England."


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("graal-cache")


@pytest.fixture(scope="module")
def parser() -> SpacyParser:
    return SpacyParser()


@pytest.fixture(scope="module")
def embed(cache_dir: Path):  # noqa: ANN201
    return EmbeddingCache(SentenceEncoder("minilm", device="cpu"), cache_dir).encode_cached


def _retriever(store: SentenceStore, cache_dir: Path, parser: SpacyParser, **overrides) -> GraalRetriever:
    ctx = IndexContext(store, cache_dir, corpus_fingerprint(CORPUS), progress=False)
    overrides.setdefault("neighbour_pages", 0)  # GRAAL as published unless a test asks otherwise
    overrides.setdefault("parse", "full")  # the full parse (entity types); tagger: test_tagger_parse.py
    overrides.setdefault("disambiguation", "minilm")
    r = GraalRetriever(GraalConfig(**overrides), DenseConfig(device="cpu"), ctx)
    r.parser = parser  # share the loaded spaCy model between tests
    r.build()
    return r


def _pages(store: SentenceStore, names: list[str]) -> list:
    by_page = store.pages(names)
    return [(p, by_page[p]) for p in names]


def _graph(
    tmp: Path, store: SentenceStore, parser: SpacyParser, embed, batches: list[list[str]]
) -> GraphStore:  # noqa: ANN001
    graph = GraphStore(tmp)
    builder = GraphBuilder(graph, parser, {"embed": embed})
    for names in batches:
        builder.add_pages(_pages(store, names))
    return graph


def test_aliases_strip_disambiguation_and_add_safe_variants() -> None:
    assert dict(title_aliases("Liverpool_-LRB-band-RRB-")) == {"liverpool": 1}
    assert dict(title_aliases("Liverpool"))["liverpool"] == 0
    assert "liverpool" in dict(title_aliases("Liverpool_F.C."))
    assert "beatles" in dict(title_aliases("The_Beatles"))
    assert title_aliases("1960") == []
    assert mention_key("The Beatles '") == "the beatles"
    table = AliasTable.from_pages(["Liverpool", "Liverpool_F.C.", "Liverpool_-LRB-band-RRB-"])
    assert [p for p, _ in table.lookup("liverpool")] == [
        "Liverpool",
        "Liverpool_-LRB-band-RRB-",
        "Liverpool_F.C.",
    ]


def test_linker_disambiguates_among_pages_sharing_a_base_title(
    store: SentenceStore, cache_dir: Path, parser: SpacyParser
) -> None:
    r = _retriever(store, cache_dir, parser)
    claims = [
        "Liverpool is a city in the north of England.",
        "Liverpool won the football match at Anfield and leads the Premier League.",
        "Liverpool is a garage band from Texas that released albums.",
    ]
    linked = r.link_claims(claims)
    first = [next(m.entity for m in ms if m.surface == "Liverpool") for ms in linked]
    assert first == ["Liverpool", "Liverpool_F.C.", "Liverpool_-LRB-band-RRB-"]
    assert {m.entity for m in linked[0]} == {"Liverpool", "England"}


def test_between_vertex_is_found_and_paths_are_kept(
    store: SentenceStore, cache_dir: Path, parser: SpacyParser
) -> None:
    r = _retriever(store, cache_dir, parser)
    result = r.search(CLAIM)
    names = r.graph.names
    assert {m.entity for m in result.mentions} == {"The_Beatles", "England"}
    assert {names[v] for v in result.subgraph.between} >= {"Liverpool"}
    by_sid = {h.hit.sentence: h for h in result.hits}
    bridge = by_sid[SentenceId("Liverpool", 0)]
    path = [p for p in bridge.provenance if p.reason == "path"]
    assert path and "Liverpool" in path[0].entities and {"England", "The_Beatles"} <= set(path[0].entities)
    assert SentenceId("The_Beatles", 0) in by_sid
    # Ranked: the two evidence sentences come before unrelated sentences of the claim pages.
    order = [h.hit.sentence for h in result.hits]
    assert order.index(SentenceId("Liverpool", 0)) < order.index(SentenceId("The_Beatles", 1))
    assert SentenceId("Monaco", 0) not in by_sid
    # garag's extension: pages of the claim entities' neighbours, with their provenance.
    wide = _retriever(store, cache_dir, parser, neighbour_pages=10).search(CLAIM)
    monaco = next(h for h in wide.hits if h.hit.sentence == SentenceId("Monaco", 0))
    assert [p.reason for p in monaco.provenance] == ["neighbour"]
    sub = r.subgraph(CLAIM)
    assert {"id": "Liverpool", "role": "between"} == {
        k: v for k, v in sub["vertices"][-1].items() if k != "mentions"
    }
    assert any(e["u"] == "Liverpool" or e["v"] == "Liverpool" for e in sub["edges"])
    # Baselines: Entity is the claim pages only; Mention adds sentences naming them.
    entity = _retriever(store, cache_dir, parser, mode="entity").retrieve(CLAIM, 100)
    assert {h.sentence.page for h in entity} == {"The_Beatles", "England"}
    mention = {h.sentence for h in _retriever(store, cache_dir, parser, mode="mention").retrieve(CLAIM, 100)}
    assert SentenceId("John_Lennon", 0) in mention and SentenceId("Liverpool", 0) in mention


def test_frame_mode_drops_a_cross_clause_co_mention_that_sentence_mode_keeps(
    store: SentenceStore, cache_dir: Path, parser: SpacyParser
) -> None:
    r = _retriever(store, cache_dir, parser)
    sid = SentenceId("England", 1)
    merseyside, monaco = r.graph.index["Merseyside"], r.graph.index["Monaco"]
    sentence_edges = {
        (e.page_idx, e.line)
        for e in r.graph.incident_edges(monaco, sentence_frames=True)
        if merseyside in (e.u, e.v)
    }
    clause_edges = {
        (e.page_idx, e.line)
        for e in r.graph.incident_edges(monaco, sentence_frames=False)
        if merseyside in (e.u, e.v)
    }
    assert sentence_edges == {(r.graph.index["England"], 1)}
    assert clause_edges == set()
    claim = "Merseyside and Monaco are both famous."

    def direct(result) -> set:  # noqa: ANN001
        return {(e.page_idx, e.line) for e, _ in result.subgraph.edges if {e.u, e.v} == {merseyside, monaco}}

    graph_retrieve = _retriever(store, cache_dir, parser, frames="sentence").search(claim)
    assert direct(graph_retrieve) == {(r.graph.index["England"], 1)}
    assert direct(r.search(claim)) == set()
    assert sid.page == "England"


def test_hub_cap_blocks_hub_entities_and_logs_them(
    store: SentenceStore, cache_dir: Path, parser: SpacyParser, caplog: pytest.LogCaptureFixture
) -> None:
    capped = _retriever(store, cache_dir, parser, hub_max_mentions=4)
    assert capped.graph.stats(capped.graph.index["Liverpool"])[0] > 4
    with caplog.at_level(logging.DEBUG, logger="retrievers.graal.retriever"):
        result = capped.search(CLAIM)
    names = capped.graph.names
    assert "Liverpool" not in {names[v] for v in result.subgraph.between}
    assert {names[h] for h in result.subgraph.hubs} == {"Liverpool"}
    assert "hub entities not expanded" in caplog.text and "Liverpool" in caplog.text
    idf = _retriever(store, cache_dir, parser, hub_max_mentions=4, hub_policy="idf").search(CLAIM)
    assert "Liverpool" in {names[v] for v in idf.subgraph.between}


def test_incremental_add_equals_rebuild(
    store: SentenceStore,
    parser: SpacyParser,
    embed,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    names = store.page_names()
    late = ["Liverpool", "England", "Liverpool_F.C."]
    whole = _graph(tmp_path / "whole.db", store, parser, embed, [names])
    parts = _graph(tmp_path / "parts.db", store, parser, embed, [[n for n in names if n not in late], late])
    assert whole.edge_set() == parts.edge_set()
    assert whole.mention_set() == parts.mention_set()
    assert ("The_Beatles", 0, 0, "Liverpool", "The_Beatles") in whole.edge_set() or any(
        e[0] == "The_Beatles" and e[1] == 0 and "Liverpool" in e[3:] and e[2] != SENTENCE_FRAME
        for e in whole.edge_set()
    )
    stats = {whole.names[e]: whole.stats(e) for e in range(len(whole.names))}
    assert stats == {parts.names[e]: parts.stats(e) for e in range(len(parts.names))}


def test_a_reopened_graph_takes_over_the_builders_page_tables(
    store: SentenceStore,
    parser: SpacyParser,
    embed,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    built = _graph(tmp_path / "g.db", store, parser, embed, [store.page_names()])
    built.close()
    fresh = GraphStore(tmp_path / "g.db", readonly=True)
    taken = GraphStore(tmp_path / "g.db", readonly=True, tables=built)
    assert taken.aliases is built.aliases and taken.names is built.names  # one copy, not read again
    assert (fresh.names, fresh.index, fresh.sizes) == (taken.names, taken.index, taken.sizes)
    assert fresh.aliases._keys == taken.aliases._keys and len(fresh.aliases) > len(fresh.names)
    assert taken.edge_set() == fresh.edge_set()
    other = _graph(tmp_path / "small.db", store, parser, embed, [store.page_names()[:2]])
    with pytest.raises(ValueError, match=r"g\.db: \d+ pages, but the tables taken over hold 2"):
        GraphStore(tmp_path / "g.db", readonly=True, tables=other)


def test_a_claim_just_retrieved_is_not_searched_again(store: SentenceStore, cache_dir: Path, parser) -> None:
    """The service shows GRAAL's paths for a claim that retrieval has just searched: a look-up."""
    r = _retriever(store, cache_dir, parser)
    hits = r.retrieve_batch([CLAIM], 10)[0]
    calls = []
    link = r.link_claims
    r.link_claims = lambda claims: calls.append(claims) or link(claims)  # counts the linker's calls
    again = r.search(CLAIM)
    assert not calls and [h.hit for h in again.hits[:10]] == hits and again.mentions
    r.clear_query_cache()
    fresh = r.search(CLAIM)
    assert calls == [[CLAIM]] and fresh is not again
    assert [(h.hit, h.provenance) for h in fresh.hits] == [(h.hit, h.provenance) for h in again.hits]
    assert r.search(CLAIM) is fresh  # remembered
    r.config = r.config.model_copy(update={"dense_weight": 0.0})  # other settings: searched again
    assert r.search(CLAIM) is not fresh and len(calls) == 2
    # a batch links and searches only the claims it does not hold, each once
    other = "Paul McCartney was a member of the Beatles."
    batch = r.retrieve_batch([CLAIM, other, other], 10)
    assert calls[2:] == [[other]] and batch[1] == batch[2]
    assert batch[0] == [h.hit for h in r.search(CLAIM).hits[:10]] and len(calls) == 3  # held
    r.clear_query_cache()
    assert r.retrieve_batch([other], 10) == [batch[1]] and calls[3:] == [[other]]
