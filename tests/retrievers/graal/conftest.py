"""The hand-made GRAAL corpus (tests/fixtures/graal) as a sentence store, shared by the GRAAL tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from garag.store import SentenceStore, build_store

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "graal" / "wiki-pages"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SentenceStore:
    db = tmp_path_factory.mktemp("graal-store") / "sentences.db"
    build_store(CORPUS, db, progress=False)
    return SentenceStore(db)
