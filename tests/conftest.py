"""Shared fixtures: a tiny FEVER-format corpus and claims (tests/fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from garag.store import SentenceStore, build_store
from garag.wiki import corpus_fingerprint
from retrievers.base import IndexContext

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_corpus() -> Path:
    """Directory with one wiki-pages file of 12 hand-written pages."""
    return FIXTURES / "wiki-pages"


@pytest.fixture(scope="session")
def tiny_claims() -> Path:
    """Six FEVER-format claims: SUPPORTS, REFUTES, NEI, one with two-page evidence."""
    return FIXTURES / "claims.jsonl"


@pytest.fixture(scope="session")
def tiny_store(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> SentenceStore:
    db = tmp_path_factory.mktemp("store") / "sentences.db"
    build_store(tiny_corpus, db, progress=False)
    return SentenceStore(db)


@pytest.fixture
def tiny_ctx(tiny_store: SentenceStore, tiny_corpus: Path, tmp_path: Path) -> IndexContext:
    """Index context over the tiny store with a fresh cache directory per test."""
    return IndexContext(
        store=tiny_store,
        cache_dir=tmp_path / "cache",
        fingerprint=corpus_fingerprint(tiny_corpus),
        progress=False,
    )
