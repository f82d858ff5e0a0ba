"""Shared fixtures of the evaluation tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml


@pytest.fixture(scope="session")
def predict_config(train_on_fixture_premises) -> Callable[[Path, Path, Path], Path]:
    """``(root, claims, corpus) -> config.yaml``: BM25 retrieval and the tiny classifier trained on the
    fixture claims' premises (one epoch), cache and results under ``root``."""
    from garag.config import load_config
    from pipeline.verification import VerificationPipeline

    def make(root: Path, claims: Path, corpus: Path) -> Path:
        config = {
            "data": {"dataset": "custom", "claims": str(claims), "corpus": str(corpus)},
            "paths": {"cache_dir": str(root / "cache"), "results_dir": str(root / "results")},
            "retrieval": {"retrievers": ["bm25"], "k": 20},
            "fusion": {"depth": 20},
            "verifier": {"top_k": 3, "max_length": 64, "nei_bias": 0.0, "model": "set below"},
        }
        path = root / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        pipe = VerificationPipeline(load_config(path), progress=False)
        pipe.retrieval.build()
        config["verifier"]["model"] = str(train_on_fixture_premises(pipe, root / "model", epochs=1))
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    return make
