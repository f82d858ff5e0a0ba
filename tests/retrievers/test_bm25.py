from __future__ import annotations

import itertools
from pathlib import Path

import bm25s
import numpy as np
import pytest

from garag.config import BM25Config
from garag.types import SentenceId
from retrievers import bm25 as bm25_module
from retrievers import bm25_weights
from retrievers.base import IndexContext, Retriever
from retrievers.bm25 import BM25Index, BM25Retriever, _make_tokenizer, normalize_text, sentence_texts

REPO = Path(__file__).resolve().parents[2]
FEVER_PAGES = REPO / "data" / "fever" / "wiki-pages" / "wiki-001.jsonl"
FEVER_CLAIMS = REPO / "data" / "fever" / "paper_dev.subset.jsonl"


@pytest.fixture
def retriever(tiny_ctx: IndexContext) -> BM25Retriever:
    r = BM25Retriever(BM25Config(), tiny_ctx)
    r.build()
    return r


def test_is_a_retriever(tiny_ctx: IndexContext):
    assert isinstance(BM25Retriever(BM25Config(), tiny_ctx), Retriever)


def test_formation_sentence_ranks_first(retriever: BM25Retriever):
    hits = retriever.retrieve("Beatles formed Liverpool", 5)
    assert hits[0].sentence == SentenceId("The_Beatles", 0)
    assert all(h.retriever == "bm25" and h.query == "Beatles formed Liverpool" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_title_prefix_finds_sentences_that_only_say_she(tiny_ctx: IndexContext):
    # Sandra_Bullock line 3 says "She was an executive producer of the ABC sitcom"; only the title names her.
    query = "Sandra Bullock ABC sitcom"
    with_title, without = (
        BM25Retriever(BM25Config(), tiny_ctx),
        BM25Retriever(BM25Config(title_prefix=False), tiny_ctx),
    )
    with_title.build(), without.build()
    assert with_title.retrieve(query, 1)[0].sentence == SentenceId("Sandra_Bullock", 3)
    assert without.retrieve(query, 1)[0].sentence != SentenceId("Sandra_Bullock", 3)


def test_hit_ids_are_store_rows(retriever: BM25Retriever, tiny_ctx: IndexContext):
    hits = retriever.retrieve("English singer songwriter", 3)
    docs, _ = retriever.index.search("English singer songwriter", 3)
    assert [tiny_ctx.store.row_of(h.sentence) for h in hits] == docs.tolist()
    assert {h.sentence.page for h in hits} >= {"John_Lennon", "Paul_McCartney"}


def test_large_k_returns_only_matching_sentences(retriever: BM25Retriever, tiny_ctx: IndexContext):
    hits = retriever.retrieve("Liverpool", 1000)
    assert 0 < len(hits) < len(tiny_ctx.store)
    assert {h.sentence.page for h in hits} >= {"Liverpool", "Liverpool_F.C.", "Liverpool_-LRB-band-RRB-"}
    assert all(h.score > 0 for h in hits)


def test_unknown_words_give_no_hits_and_bad_input_raises(retriever: BM25Retriever):
    assert retriever.retrieve("zyzzyva quokka", 10) == []
    assert retriever.retrieve("the of and", 10) == []  # stopwords only
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="non-empty"):
            retriever.retrieve(bad, 5)
    with pytest.raises(ValueError, match="k must be > 0"):
        retriever.retrieve("Liverpool", 0)


def test_retrieve_before_build_raises(tiny_ctx: IndexContext):
    with pytest.raises(RuntimeError, match="build"):
        BM25Retriever(BM25Config(), tiny_ctx).retrieve("Liverpool", 3)


def test_batch_equals_single(retriever: BM25Retriever):
    queries = ["Beatles formed Liverpool", "Snowpiercer film", "zyzzyva", "Wales Scotland borders"]
    assert retriever.retrieve_batch(queries, 4) == [retriever.retrieve(q, 4) for q in queries]


def test_second_build_reuses_the_artifact(tiny_ctx: IndexContext):
    first = BM25Retriever(BM25Config(), tiny_ctx).build()
    mtime = (first / "meta.json").stat().st_mtime_ns
    again = BM25Retriever(BM25Config(), tiny_ctx)
    assert again.build() == first
    assert (first / "meta.json").stat().st_mtime_ns == mtime
    assert again.retrieve("Snowpiercer", 1)[0].sentence.page == "Snowpiercer"
    other = BM25Retriever(BM25Config(k1=1.2), tiny_ctx).build()
    assert other != first
    assert BM25Retriever(BM25Config(), tiny_ctx).build(force=True) == first
    assert (first / "meta.json").stat().st_mtime_ns != mtime


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize("stemmer", ["english", ""])
def test_index_equals_bm25s_own_index(tiny_store, method: str, stemmer: str):
    config = BM25Config(method=method, stemmer=stemmer)
    texts = list(sentence_texts(tiny_store, title_prefix=True)) + ["", "the of"]  # empty docs too
    texts = [normalize_text(t) for t in texts]
    ours = BM25Index.build(iter(texts), config)
    tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
    ids = tokenizer.tokenize(texts, update_vocab=True, show_progress=False)
    ref = bm25s.BM25(method=method, k1=config.k1, b=config.b)
    ref.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(ours.model.scores[key], ref.scores[key])
    assert ours.model.vocab_dict == ref.vocab_dict
    if method in ("bm25l", "bm25+"):
        np.testing.assert_array_equal(ours.model.nonoccurrence_array, ref.nonoccurrence_array)
    query = ours.query_ids("Liverpool bands formed in England")
    np.testing.assert_allclose(ours.scores(query), ref.get_scores(query), rtol=1e-6)


@pytest.mark.parametrize("progress", [False, True])
def test_build_in_many_chunks_equals_one_chunk(tiny_store, monkeypatch, progress: bool):
    texts = list(sentence_texts(tiny_store, title_prefix=True))
    whole = BM25Index.build(texts, BM25Config())
    monkeypatch.setattr(bm25_weights, "_CHUNK_DOCS", 3)
    monkeypatch.setattr(bm25_module, "_MATRIX_CHUNK", 7)
    chunked = BM25Index.build(iter(texts), BM25Config(), progress=progress)
    assert chunked.num_docs == len(texts) == len(tiny_store)
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(chunked.model.scores[key], whole.model.scores[key])


def test_save_load_mmap_and_subset_scores(tiny_store, tmp_path: Path):
    built = BM25Index.build(sentence_texts(tiny_store, True), BM25Config(method="bm25+"))
    built.save(tmp_path / "idx")
    loaded = BM25Index.load(tmp_path / "idx")
    assert isinstance(loaded.model.scores["data"], np.memmap)
    query = "Sandra Bullock producer of George Lopez"
    np.testing.assert_array_equal(loaded.scores(query), built.scores(query))
    docs = np.array([7, 0, 12, 3, len(tiny_store) - 1])
    np.testing.assert_allclose(loaded.score_docs(query, docs), built.scores(query)[docs], rtol=1e-6)
    with pytest.raises(ValueError, match="document ids"):
        loaded.score_docs(query, [len(tiny_store)])
    with pytest.raises(FileNotFoundError):
        BM25Index.load(tmp_path)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="stemmer"):
        BM25Index.build(["a text"], BM25Config(stemmer="klingon"))
    with pytest.raises(ValueError, match="stopwords"):
        BM25Index.build(["a text"], BM25Config(stopwords="klingon"))
    with pytest.raises(ValueError, match="no documents"):
        BM25Index.build(iter([]), BM25Config())


def _fever_sample(n_sentences: int) -> tuple[list[str], list[str], list[SentenceId]]:
    from garag.claims import read_fever_claims
    from garag.wiki import iter_pages

    texts, ids = [], []
    for page in iter_pages(FEVER_PAGES):
        for line, text, _ in page.sentences():
            texts.append(f"{page.id.replace('_', ' ')} {text}")
            ids.append(SentenceId(page.id, line))
        if len(texts) >= n_sentences:
            break
    known = set(ids)
    claims = [
        c.text for c in read_fever_claims(FEVER_CLAIMS) if any(set(ev) <= known for ev in c.evidence if ev)
    ]
    return texts, claims, ids


@pytest.mark.skipif(not FEVER_PAGES.is_file(), reason="FEVER data not present")
def test_parity_with_rank_bm25_okapi():
    """bm25s "robertson" == rank_bm25.BM25Okapi / (k1 + 1) when no query term has df > N/2.

    BM25Okapi uses idf = log((N - df + 0.5) / (df + 0.5)) and tf weight
    tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)); bm25s's "robertson" has the
    same idf and the same tf weight without the constant (k1 + 1).  They differ
    only for terms in more than half of the documents: Okapi floors their
    negative idf at 0.25 * mean idf, bm25s clips it to 0.  On these real FEVER
    sentences (titles prepended, stopwords removed) no query term is that
    common, which the test checks before comparing.
    """
    rank_bm25 = pytest.importorskip("rank_bm25")
    texts, claims, _ = _fever_sample(300)
    config = BM25Config(method="robertson", k1=1.2, b=0.75, stemmer="english")
    index = BM25Index.build(texts, config)
    corpus_tokens = [index.query_ids(t) for t in texts]  # every document word is in the vocabulary
    okapi = rank_bm25.BM25Okapi(corpus_tokens, k1=config.k1, b=config.b)
    df = np.bincount(list(itertools.chain.from_iterable(set(d) for d in corpus_tokens)))
    queries = claims[:8]
    assert len(queries) == 8
    compared = 0
    for query in queries:
        tokens = index.query_ids(query)
        assert tokens and df[tokens].max() < len(texts) / 2
        expected = okapi.get_scores(tokens) / (config.k1 + 1)
        np.testing.assert_allclose(index.scores(tokens), expected, rtol=1e-5, atol=1e-6)
        docs, scores = index.search(tokens, 10)
        top_okapi = np.argsort(-expected, kind="stable")[:10]
        top_okapi = top_okapi[expected[top_okapi] > 0]  # search returns matching documents only
        compared += len(top_okapi)
        np.testing.assert_allclose(scores, expected[top_okapi], rtol=1e-5)
        # Same documents, except that tied scores may be listed in another order.
        assert set(docs) == set(top_okapi) or np.isclose(scores[-1], expected[top_okapi][-1])
        np.testing.assert_allclose(expected[docs], scores, rtol=1e-5)
    assert compared >= 40


@pytest.mark.skipif(not FEVER_PAGES.is_file(), reason="FEVER data not present")
@pytest.mark.parametrize(("method", "stemmer", "workers"), [("lucene", "", 2), ("bm25+", "english", 1)])
def test_sharded_build_writes_the_same_files_as_a_one_shot_build(
    tmp_path: Path, monkeypatch, method: str, stemmer: str, workers: int
):
    """Above bm25.shard_docs documents the build tokenises shards (each with a tokenizer of its
    own, here or in worker processes), renumbers their words, writes them to disk and merges them
    term by term in blocks: the directory it saves is byte for byte the one-shot build's (weights,
    documents, column pointers, vocabulary, the term counts and lengths that ``derive`` reads)."""
    texts, claims, _ = _fever_sample(300)
    texts += ["", "Zyxwv quokkas"]  # an empty document, and words first seen in the last shard
    config = BM25Config(method=method, stemmer=stemmer)
    one = BM25Index.build_saved(tmp_path / "one", texts, config)
    assert not isinstance(one.model.scores["data"], np.memmap)  # under shard_docs: built in memory
    monkeypatch.setattr(bm25_module, "_MATRIX_CHUNK", 50)  # many merge blocks, some of one term
    sharded_config = config.model_copy(update={"shard_docs": 64, "workers": workers})
    sharded = BM25Index.build_saved(tmp_path / "sharded", iter(texts), sharded_config, total=len(texts))
    assert sharded.tokenised == len(texts) == 302 and sharded.num_docs == 302
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "sharded").iterdir())  # shards.tmp removed
    assert {"data.csc.index.npy", "garag_tf.npy", "garag_doc_len.npy", "vocab.index.json"} <= set(names)
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "sharded" / name).read_bytes(), name
    for query in [*claims[:5], "quokkas"]:
        for a, b in zip(one.search(query, 20), sharded.search(query, 20), strict=True):
            assert np.array_equal(a, b)
    assert sharded.search("quokkas", 3)[0].tolist() == [301]


@pytest.mark.parametrize(
    ("method", "stemmer", "stopwords"), [("lucene", "", "en"), ("lucene", "english", "en"), ("bm25+", "", "")]
)
def test_derive_scores_like_a_rebuild(tiny_store, tmp_path: Path, method: str, stemmer: str, stopwords: str):
    """Dropping documents and adding new ones to a saved index tokenises only the new ones and
    scores exactly like a build over the resulting documents (document frequencies, lengths and
    the document count all change)."""
    config = BM25Config(method=method, stemmer=stemmer, stopwords=stopwords)
    texts = list(sentence_texts(tiny_store, True))
    BM25Index.build(texts, config).save(tmp_path / "parent")
    drop = set(range(0, len(texts), 3))
    doc_map = np.full(len(texts), -1, dtype=np.int64)
    kept = [i for i in range(len(texts)) if i not in drop]
    doc_map[kept] = np.arange(len(kept))
    new = ["Zyxwv quokkas live on Rottnest Island .", "", texts[0]]
    derived = BM25Index.derive(tmp_path / "parent", doc_map, new, config)
    rebuilt = BM25Index.build([texts[i] for i in kept] + new, config)
    assert derived.tokenised == 3 and derived.num_docs == rebuilt.num_docs == len(kept) + 3
    for query in ["quokkas Rottnest", texts[0], texts[1], "the band was formed in Liverpool"]:
        assert np.array_equal(derived.scores(query), rebuilt.scores(query))
        for a, b in zip(derived.search(query, 10), rebuilt.search(query, 10), strict=True):
            assert np.array_equal(a, b)
    assert derived.search("quokkas", 5)[0].tolist() == [len(kept)]


@pytest.mark.skipif(not FEVER_PAGES.is_file(), reason="FEVER data not present")
@pytest.mark.parametrize(("method", "stemmer", "workers"), [("lucene", "", 2), ("bm25+", "english", 1)])
def test_sharded_derive_writes_the_same_files_as_derive(
    tmp_path: Path, monkeypatch, method: str, stemmer: str, workers: int
):
    """An edit of a sharded parent (every third document dropped, 150 added, an empty one and new
    words among them) derived in shards through disk (the parent read block by block) saves the
    directory ``derive`` + ``save`` write, byte for byte, and scores like a rebuild."""
    texts, claims, _ = _fever_sample(450)
    old, new = texts[:300], texts[300:] + ["", "Zyxwv quokkas"]
    monkeypatch.setattr(bm25_module, "_MATRIX_CHUNK", 50)  # many blocks, in the parent too
    config = BM25Config(method=method, stemmer=stemmer, shard_docs=64, workers=workers)
    BM25Index.build_saved(tmp_path / "parent", iter(old), config)
    doc_map = np.full(len(old), -1, dtype=np.int64)
    kept = [i for i in range(len(old)) if i % 3]
    doc_map[kept] = np.arange(len(kept))
    one = BM25Index.derive(tmp_path / "parent", doc_map, new, config)
    one.save(tmp_path / "one")
    sharded = BM25Index.derive_saved(tmp_path / "sharded", tmp_path / "parent", doc_map, iter(new), config)
    assert sharded.tokenised == one.tokenised == len(new) == 152
    assert sharded.num_docs == len(kept) + 152
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "sharded").iterdir())  # shards.tmp removed
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "sharded" / name).read_bytes(), name
    rebuilt = BM25Index.build([old[i] for i in kept] + new, config.model_copy(update={"shard_docs": 10**6}))
    for query in [*claims[:5], "quokkas"]:
        assert np.array_equal(sharded.scores(query), rebuilt.scores(query))
    assert sharded.search("quokkas", 3)[0].tolist() == [len(kept) + 151]
    bad = doc_map.copy()
    bad[[1, 2]] = bad[[2, 1]]
    with pytest.raises(ValueError, match="kept documents must keep their order"):
        BM25Index.derive_saved(tmp_path / "bad", tmp_path / "parent", bad, new, config)


def test_derive_needs_the_parents_term_counts(tiny_store, tmp_path: Path):
    texts = list(sentence_texts(tiny_store, False))
    index = BM25Index.build(texts, BM25Config())
    index._counts = None  # saved like an index built before garag kept term counts
    index.save(tmp_path / "old")
    assert BM25Index.derive(tmp_path / "old", np.arange(len(texts)), ["new"], BM25Config()) is None
    assert (
        BM25Index.derive_saved(tmp_path / "x", tmp_path / "old", np.arange(len(texts)), ["new"], BM25Config())
        is None
    )
