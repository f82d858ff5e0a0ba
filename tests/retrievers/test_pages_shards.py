"""The ``pages`` stage's page-level BM25 built in shards through disk equals the one-shot build:
the same files and the same retrieved pages and sentences, on the embedded HoVer corpus."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from garag.config import BM25Config, PagesConfig
from garag.datasets import hover
from garag.store import SentenceStore, build_store
from retrievers.base import IndexContext
from retrievers.pages import PageRetriever


@pytest.fixture(scope="module")
def hover_store(tmp_path_factory: pytest.TempPathFactory) -> SentenceStore:
    db = tmp_path_factory.mktemp("hover-store") / "sentences.db"
    build_store(hover().corpus_path, db, progress=False)
    return SentenceStore(db)


def _built(
    store: SentenceStore, cache: Path, shard_docs: int, workers: int = 1
) -> tuple[PageRetriever, Path]:
    ctx = IndexContext(store, cache, "hover-embedded", progress=False)
    retriever = PageRetriever(PagesConfig(), BM25Config(shard_docs=shard_docs, workers=workers), ctx)
    return retriever, retriever.build()


@pytest.mark.parametrize("workers", [1, 2])
def test_sharded_page_index_equals_the_one_shot_build(
    hover_store: SentenceStore, tmp_path: Path, caplog: pytest.LogCaptureFixture, workers: int
):
    """In shards, here or in 2 processes that also make the pages' texts (``page_text``)."""
    n, pages = len(hover_store), hover_store.n_pages
    one, one_path = _built(hover_store, tmp_path / "one", shard_docs=10 * n)
    # 1,000 sentences a shard: pages in shards of 1,000 x pages / sentences (~280 pages, 16 shards)
    with caplog.at_level(logging.INFO, logger="retrievers.bm25"):
        sharded, sharded_path = _built(hover_store, tmp_path / "sharded", shard_docs=1_000, workers=workers)
    shards = -(-pages // (1_000 * pages // n))
    assert f"bm25: {pages} documents in {shards} shards" in caplog.text
    assert one_path.name == sharded_path.name  # bm25.shard_docs is not hashed: one artifact
    files = sorted(
        p.relative_to(one_path) for p in one_path.rglob("*") if p.is_file() and p.name != "meta.json"
    )
    assert files == sorted(
        p.relative_to(sharded_path) for p in sharded_path.rglob("*") if p.is_file() and p.name != "meta.json"
    )
    assert any(f.parts[0] == "page_bm25" for f in files)
    for f in files:
        if f.suffix != ".db":  # SQLite files may differ in layout bytes; their rows are compared below
            assert (one_path / f).read_bytes() == (sharded_path / f).read_bytes(), f
    claims = [c.text for c in hover().claims()][:40]
    for claim in claims:
        assert one.candidate_pages(claim) == sharded.candidate_pages(claim)
        assert one.retrieve(claim, 20) == sharded.retrieve(claim, 20)
    assert sum(len(one.retrieve(c, 20)) for c in claims) > 20 * len(claims) // 2
