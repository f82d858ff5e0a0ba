"""``extends:`` in config files, config specs stacked with ``+``, and where each value came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from garag.config import (
    ConfigError,
    config_name,
    load_config,
    load_config_with_sources,
    render_config,
    scoped_overrides,
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_chain_merges_mappings_and_records_each_values_file(tmp_path: Path) -> None:
    base = _write(tmp_path / "base" / "c.yaml", "bm25: {k1: 1.1, b: 0.5}\nfusion: {rrf_k: 30}\n")
    mid = _write(tmp_path / "b.yaml", "extends: base/c.yaml\nbm25: {k1: 1.3}\nretrieval: {k: 50}\n")
    top = _write(tmp_path / "a.yaml", "extends: b.yaml\nbm25: {b: 0.9}\n")
    config, sources = load_config_with_sources(top)
    assert (config.bm25.k1, config.bm25.b, config.fusion.rrf_k, config.retrieval.k) == (1.3, 0.9, 30, 50)
    assert sources["bm25.k1"] == str(mid) and sources["bm25.b"] == str(top)
    assert sources["fusion.rrf_k"] == str(base)
    assert sources["retrieval.k"] == str(mid)
    assert sources["bm25"] == f"{base} + {mid} + {top}"
    text = render_config(config, sources)
    assert f"k1: 1.3  # {mid}" in text and f"b: 0.9  # {top}" in text and "k: 50  # " in text
    assert "extends" not in sources  # no setting
    assert load_config(top).to_dict() == config.to_dict()


def test_a_list_of_bases_applies_in_order_and_lists_are_replaced(tmp_path: Path) -> None:
    _write(tmp_path / "one.yaml", "retrieval: {retrievers: [bm25, dense, pages], k: 40}\n")
    _write(tmp_path / "two.yaml", "retrieval: {k: 60}\nfusion: {weights: {bm25: 2.0}}\n")
    top = _write(
        tmp_path / "top.yaml",
        "extends: [one.yaml, two.yaml]\nretrieval: {retrievers: [bm25]}\nfusion: {weights: {dense: 0.5}}\n",
    )
    config, sources = load_config_with_sources(top)
    assert config.retrieval.retrievers == ["bm25"] and config.retrieval.k == 60
    # a mapping value merges key by key: both files' weights, the defaults' pages weight gone with them
    assert config.fusion.weights == {"bm25": 2.0, "dense": 0.5}
    assert sources["retrieval.retrievers"] == str(top) and sources["retrieval.k"] == str(
        tmp_path / "two.yaml"
    )
    assert sources["fusion.weights"] == f"{tmp_path / 'two.yaml'} + {top}"


def test_extends_cycles_are_refused_naming_the_chain(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.yaml", "extends: b.yaml\n")
    _write(tmp_path / "b.yaml", "extends: [c.yaml, a.yaml]\n")
    _write(tmp_path / "c.yaml", "bm25: {k1: 1.0}\n")
    with pytest.raises(ConfigError) as err:
        load_config(a)
    assert str(err.value) == f"{a}: extends cycle {a} -> {tmp_path / 'b.yaml'} -> {tmp_path / 'a.yaml'}"
    itself = _write(tmp_path / "self.yaml", "extends: self.yaml\n")
    with pytest.raises(ConfigError, match=r"self\.yaml: extends cycle .*self\.yaml -> .*self\.yaml$"):
        load_config(itself)


def test_a_missing_base_names_the_file_that_refers_to_it(tmp_path: Path) -> None:
    _write(tmp_path / "b.yaml", "extends: gone.yaml\n")
    a = _write(tmp_path / "a.yaml", "extends: b.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(a)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'b.yaml'}: extends gone.yaml: config file not found")
    assert "\n" not in message


@pytest.mark.parametrize("value", ["3", "[]", "{a: b.yaml}", "[b.yaml, 4]", "''"])
def test_extends_of_the_wrong_type_is_one_line(tmp_path: Path, value: str) -> None:
    _write(tmp_path / "b.yaml", "bm25: {k1: 1.0}\n")
    a = _write(tmp_path / "a.yaml", f"extends: {value}\n")
    with pytest.raises(ConfigError, match=r"a\.yaml: extends: expected a file name or a list of them, got "):
        load_config(a)


def test_unknown_keys_are_refused_after_merging_naming_the_key_and_its_file(tmp_path: Path) -> None:
    _write(tmp_path / "base.yaml", "bm25: {k1: 1.0, k9: 2}\n")
    a = _write(tmp_path / "a.yaml", "extends: base.yaml\nbm25: {k1: 1.2}\n")
    with pytest.raises(ConfigError) as err:
        load_config(a)
    assert str(err.value).startswith(f"{tmp_path / 'base.yaml'}: bm25: unknown key(s) ['k9']")
    b = _write(tmp_path / "b.yaml", "extends: a.yaml\nbm25s: {k1: 1.0}\n")
    _write(tmp_path / "a.yaml", "bm25: {k1: 1.2}\n")
    with pytest.raises(ConfigError, match=r"b\.yaml: config: unknown key\(s\) \['bm25s'\]"):
        load_config(b)
    # a key the --set adds is named as before, without a file
    with pytest.raises(ConfigError, match=r"^bm25: unknown key\(s\) \['k8'\]"):
        load_config(a, ["bm25.k8=1"])


def test_stacked_specs_merge_in_order_and_are_named_by_their_stems(tmp_path: Path) -> None:
    base = _write(tmp_path / "graph.yaml", "bm25: {k1: 1.1}\nretrieval: {retrievers: [bm25, dense], k: 40}\n")
    over = _write(tmp_path / "o" / "joint.yaml", "retrieval: {retrievers: [bm25]}\nbm25: {b: 0.3}\n")
    spec = f"{base}+{over}"
    config, sources = load_config_with_sources(spec)
    assert (config.bm25.k1, config.bm25.b, config.retrieval.retrievers, config.retrieval.k) == (
        1.1,
        0.3,
        ["bm25"],
        40,
    )
    assert sources["bm25.k1"] == str(base) and sources["bm25.b"] == str(over)
    assert load_config([base, over]) == config
    assert config_name(spec) == "graph-joint" and config_name(base) == "graph"
    # --set still wins over every file
    config, sources = load_config_with_sources(spec, ["bm25.b=0.6"])
    assert config.bm25.b == 0.6 and sources["bm25.b"] == "--set bm25.b=0.6"
    with pytest.raises(ConfigError, match=r"no empty file name"):
        load_config(f"{base}+")
    with pytest.raises(ConfigError, match=r"missing\.yaml: config file not found"):
        load_config(f"{base}+{tmp_path / 'missing.yaml'}")


def test_scoped_overrides_apply_to_their_config_only() -> None:
    overrides = ["bm25.k1=1.2", "graph-joint:reasoning.programs=rule", "train.base_train={base_model: mpnet}"]
    assert scoped_overrides("graph-joint", overrides) == [
        "bm25.k1=1.2",
        "reasoning.programs=rule",
        "train.base_train={base_model: mpnet}",
    ]
    assert scoped_overrides("baseline-joint", overrides) == [
        "bm25.k1=1.2",
        "train.base_train={base_model: mpnet}",
    ]


def test_garag_config_prints_a_stacked_config_with_each_values_file(tmp_path: Path, capsys) -> None:
    from garag.app.cli import main

    base = _write(tmp_path / "b.yaml", "bm25: {k1: 1.1}\n")
    over = _write(tmp_path / "o.yaml", "extends: b.yaml\nbm25: {b: 0.3}\n")
    assert main(["config", "--config", f"{base}+{over}", "--set", "retrieval.k=7"]) == 0
    out = capsys.readouterr().out
    assert f"k1: 1.1  # {base}" in out and f"b: 0.3  # {over}" in out and "k: 7  # --set retrieval.k=7" in out
    assert main(["config", "--config", str(tmp_path / "gone.yaml")]) == 2
    assert capsys.readouterr().err.strip() == f"garag: error: {tmp_path / 'gone.yaml'}: config file not found"
