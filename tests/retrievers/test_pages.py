from __future__ import annotations

import json
from pathlib import Path

import pytest

from garag.config import BM25Config, PagesConfig
from garag.store import SentenceStore, build_store
from garag.types import SentenceId
from retrievers.base import IndexContext, Retriever
from retrievers.bm25 import BM25Index
from retrievers.pages import PageRetriever, claim_spans, key_tokens, title_keys


@pytest.fixture
def pages(tiny_ctx: IndexContext) -> PageRetriever:
    r = PageRetriever(PagesConfig(), BM25Config(), tiny_ctx)
    r.build()
    return r


def _names(r: PageRetriever, scores) -> dict[str, float]:
    names = r.ctx.store.page_names()
    items = scores.items() if isinstance(scores, dict) else scores
    return {names[p]: s for p, s in items}


def test_title_keys():
    assert title_keys("The_Beatles") == [("the beatles", 0), ("beatles", 2)]
    assert title_keys("Liverpool_-LRB-band-RRB-") == [("liverpool", 1)]
    assert title_keys("Liverpool_F.C.") == [("liverpool f . c .", 0)]
    assert title_keys("Schindler's_List") == [("schindler list", 0)]
    assert title_keys("Simo\u0301n_Boli\u0301var") == [("sim\u00f3n bol\u00edvar", 0)]


def test_claim_spans_drop_possessives_and_need_content_words():
    assert key_tokens("Sandra Bullock's films, the Beatles' songs") == [
        "Sandra", "Bullock", "films", ",", "the", "Beatles", "songs",
    ]  # fmt: skip
    spans, n_content = claim_spans("Sandra Bullock's was in a film.", max_ngram=2)
    assert n_content == 3  # sandra, bullock, film
    keys = {s.key: s for s in spans}
    assert keys["sandra bullock"].capitalised and keys["sandra bullock"].content == 2
    assert not keys["film"].capitalised
    assert "in a" not in keys and "was in" not in keys  # no content word


def test_is_a_retriever(tiny_ctx: IndexContext):
    assert isinstance(PageRetriever(PagesConfig(), BM25Config(), tiny_ctx), Retriever)


def test_title_match_finds_plain_disambiguated_and_extended_liverpool_pages(pages: PageRetriever):
    found = _names(pages, pages.title_matches("The Beatles were formed in Liverpool."))
    assert set(found) == {"The_Beatles", "Liverpool", "Liverpool_-LRB-band-RRB-", "Liverpool_F.C."}
    # Exact title > disambiguated title (no "band" in the claim) > title that only starts with the n-gram.
    assert found["Liverpool"] > found["Liverpool_-LRB-band-RRB-"] > found["Liverpool_F.C."]
    # "the beatles": 1 of 3 content words, scaled by the configured title weight.
    assert found["The_Beatles"] == pytest.approx(pages.config.title_weight / 3)


def test_disambiguation_word_in_claim_lifts_that_page(pages: PageRetriever):
    claim = "Liverpool is a band."
    found = _names(pages, pages.title_matches(claim))
    assert found["Liverpool_-LRB-band-RRB-"] == found["Liverpool"]
    assert pages.retrieve(claim, 1)[0].sentence == SentenceId("Liverpool_-LRB-band-RRB-", 0)


def test_articles_and_possessives(pages: PageRetriever):
    assert "The_Beatles" in _names(pages, pages.title_matches("Beatles were English."))
    found = _names(pages, pages.title_matches("Tilda Swinton's film Snowpiercer is a comedy."))
    assert {"Tilda_Swinton", "Snowpiercer"} <= set(found)


def test_named_person_gets_her_sentences_first(pages: PageRetriever):
    hits = pages.retrieve("Sandra Bullock was never a producer.", 10)
    assert [h.sentence for h in hits[:2]] == [
        SentenceId("Sandra_Bullock", 2),
        SentenceId("Sandra_Bullock", 3),
    ]
    assert all(h.retriever == "pages" and h.query == "Sandra Bullock was never a producer." for h in hits)


def test_sentences_interleave_by_page_and_sentence_score(pages: PageRetriever):
    hits = pages.retrieve("The Beatles were formed in Liverpool.", 20)
    assert hits[0].sentence == SentenceId("The_Beatles", 0)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len({h.sentence for h in hits}) == len(hits)
    ranked_pages = [p for p in dict.fromkeys(h.sentence.page for h in hits)]
    assert {"The_Beatles", "Liverpool", "Liverpool_F.C.", "Liverpool_-LRB-band-RRB-"} <= set(ranked_pages)


def test_limits(tiny_ctx: IndexContext):
    claim = "The Beatles were formed in Liverpool."
    one_page = PageRetriever(PagesConfig(max_pages=1), BM25Config(), tiny_ctx)
    one_page.build()
    assert {h.sentence.page for h in one_page.retrieve(claim, 10)} == {"The_Beatles"}
    capped = PageRetriever(PagesConfig(sentences_per_page=1), BM25Config(), tiny_ctx)
    capped.build()
    hits = capped.retrieve(claim, 10)
    assert len(hits) == len({h.sentence.page for h in hits}) >= 4
    assert len(capped.retrieve(claim, 2)) == 2


def test_no_match_and_bad_input(pages: PageRetriever, tiny_ctx: IndexContext):
    assert pages.retrieve("zyzzyva quokka", 5) == []
    assert pages.retrieve_batch(["zyzzyva", "Snowpiercer"], 1)[1][0].sentence == SentenceId("Snowpiercer", 0)
    with pytest.raises(ValueError, match="non-empty"):
        pages.retrieve("  ", 5)
    with pytest.raises(ValueError, match="k must be > 0"):
        pages.retrieve("Liverpool", 0)
    with pytest.raises(RuntimeError, match="build"):
        PageRetriever(PagesConfig(), BM25Config(), tiny_ctx).retrieve("Liverpool", 3)


def test_rebuild_is_a_no_op_and_sentence_index_is_shared(tiny_ctx: IndexContext):
    path = PageRetriever(PagesConfig(), BM25Config(), tiny_ctx).build()
    stamps = {p: p.stat().st_mtime_ns for p in tiny_ctx.cache_dir.glob("*/meta.json")}
    assert len(stamps) == 2  # the pages artifact and the shared sentence index
    again = PageRetriever(PagesConfig(max_pages=3), BM25Config(), tiny_ctx)  # page settings are query-time
    assert again.build() == path
    assert {p: p.stat().st_mtime_ns for p in tiny_ctx.cache_dir.glob("*/meta.json")} == stamps
    sentence_dir, _ = BM25Index.over_sentences(BM25Config(), tiny_ctx)
    assert sentence_dir.parent == path.parent and (sentence_dir / "meta.json") in stamps
    assert PageRetriever(PagesConfig(), BM25Config(k1=1.2), tiny_ctx).build() != path


def test_decomposed_unicode_titles_and_text_match_composed_claims(tmp_path: Path):
    page = "Simo\u0301n_Boli\u0301var"  # FEVER's page ids and some of its text are NFD
    lines = "0\tSimo\u0301n Boli\u0301var was a Venezuelan military and political leader .\n1\t"
    corpus = tmp_path / "wiki"
    corpus.mkdir()
    other = {"id": "Caracas", "text": "", "lines": "0\tCaracas is the capital of Venezuela ."}
    (corpus / "wiki-001.jsonl").write_text(
        "\n".join(json.dumps(p) for p in ({"id": page, "text": "", "lines": lines}, other)) + "\n"
    )
    build_store(corpus, tmp_path / "s.db", progress=False)
    ctx = IndexContext(SentenceStore(tmp_path / "s.db"), tmp_path / "cache", "fp", progress=False)
    r = PageRetriever(PagesConfig(), BM25Config(), ctx)
    r.build()
    claim = "Sim\u00f3n Bol\u00edvar was a leader."
    assert set(_names(r, r.title_matches(claim))) == {page}
    assert r.retrieve(claim, 1)[0].sentence == SentenceId(page, 0)
    _, sentences = BM25Index.over_sentences(BM25Config(), ctx)
    docs, _ = sentences.search("Bol\u00edvar", 5)
    assert docs.tolist() == [0]
