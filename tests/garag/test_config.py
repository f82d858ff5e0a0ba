from __future__ import annotations

from pathlib import Path

import pytest

from garag.config import ConfigError, load_config


def test_defaults_and_overrides():
    c = load_config(
        overrides=["bm25.k1=1.2", "retrieval.retrievers=[bm25, pages]", "fusion.weights.dense=0.5"]
    )
    assert c.bm25.k1 == 1.2 and c.retrieval.retrievers == ["bm25", "pages"]
    # A mapping given in YAML or --set replaces the default mapping (missing retrievers weigh 1.0).
    assert c.fusion.weights == {"dense": 0.5}


def test_exponent_without_a_dot_is_a_number():
    assert load_config(overrides=["train.learning_rate=3e-5"]).train.learning_rate == 3e-5


def test_unknown_key_is_an_error_naming_it():
    with pytest.raises(ConfigError, match=r"bm25: unknown key\(s\) \['kk'\]"):
        load_config(overrides=["bm25.kk=1"])
    with pytest.raises(ConfigError, match=r"config: unknown key\(s\) \['nope'\]"):
        load_config(overrides=["nope.x=1"])


def test_wrong_type_and_bad_value_name_the_key():
    with pytest.raises(ConfigError, match="bm25.k1: expected a number"):
        load_config(overrides=["bm25.k1=abc"])
    with pytest.raises(ConfigError, match="bm25.b: must be in"):
        load_config(overrides=["bm25.b=2"])
    with pytest.raises(ConfigError, match="unknown retriever 'graph'"):
        load_config(overrides=["retrieval.retrievers=[graph]"])


def test_yaml_file(tmp_path: Path):
    f = tmp_path / "c.yaml"
    f.write_text("data:\n  dataset: hover\ndense:\n  index: hnsw\n")
    c = load_config(f, ["dense.hnsw_m=16"])
    assert c.data.dataset == "hover" and c.dense.index == "hnsw" and c.dense.hnsw_m == 16
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")


def test_repo_configs_load():
    for f in sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml")):
        load_config(f)
