"""``extends:`` in config files, config specs stacked with ``+``, and where each value came from.

The repo's configs: each of the 18 files ``configs/`` held before the overlays (issue 51) is still
reached with the same resolved values and hashes (tests/fixtures/resolved_configs/), by :data:`RECIPES`.
``NAME:key=value`` overrides are how the Makefile gives one system of a ``compare`` its own values.
No config was dropped in the sense of becoming unreachable; four lost their file:

* ``fever.yaml`` was the defaults and ``hover.yaml`` the defaults with ``data.dataset: hover``
  (no ``--config``; ``--dataset hover``); no target used them.
* ``graph-joint-llm.yaml`` and ``graph-joint-llm-mpnet.yaml`` (LLM reasoning programs) were used by
  no target, only by benchmarks/program_speed.py: their ``reasoning`` settings are ``--set`` values now
  (:data:`LLM_PROGRAMS`, the default of that script).

Issue 52 then removed ``verifier.two_way_threshold`` and ``verifier.entity_check`` (the decision model
decides instead) and added ``verifier.decision``: every other resolved value still equals its snapshot;
the hashes changed with those keys, on purpose (run hashes also carry the decision model's version).
Issue 54 made the fast graph build the code default (``graal.parse: tagger``, ``graal.disambiguation:
words``; no config set the former defaults, ``full`` and ``minilm``) and added ``dense.index_memory_gb``;
it later moved ``dense.ivf_nprobe``'s default from 32 to 64 (no config set it).  Issue 52 added
``train.contrast`` (contrast claims in a verifier's training data), 1 in ``joint.yaml``, and
``train.batching``, whose default became ``by_length``; the joint and mpnet overlays keep ``shuffled``;
and ``train.partial`` (composed claims read one part's evidence at a time), off in every config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.compare import load_systems
from eval.run_hash import run_config_hash
from garag.config import (
    ConfigError,
    config_name,
    load_config,
    load_config_with_sources,
    render_config,
    scoped_overrides,
)
from garag.config.models import REMOVED_VERIFIER_KEYS

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "fixtures" / "resolved_configs"
B, G = "configs/baseline.yaml", "configs/graph.yaml"
FORMER_GRAAL_DEFAULTS = {"parse": ("full", "tagger"), "disambiguation": ("minilm", "words")}  # was, is
PROGRAMS = ["reasoning.programs=rule", "reasoning.combine=union"]
LLM_PROGRAMS = ["reasoning.programs=llm", "reasoning.combine=union", "reasoning.answer_from=entity"]
# old file stem -> (config spec, the --set values that system gets; in the Makefile NAME:key=value)
RECIPES: dict[str, tuple[str | None, list[str]]] = {
    "baseline": (B, []),
    "graph": (G, []),
    "baseline-llm": (f"{B}+configs/llm.yaml", []),
    "graph-llm": (f"{G}+configs/llm.yaml", ["linearize.triplets_per_fact=2"]),
    "baseline-joint": (f"{B}+configs/joint.yaml", []),
    "graph-joint": (f"{G}+configs/joint.yaml", PROGRAMS),
    "baseline-judge": (f"{B}+configs/judge.yaml", []),
    "graph-judge": (f"{G}+configs/judge.yaml", ["verifier.llm_judge=two_way"]),
    "baseline-mpnet": (f"{B}+configs/mpnet.yaml", []),
    "graph-mpnet": (f"{G}+configs/mpnet.yaml", []),
    "baseline-mix": (f"{B}+configs/mix.yaml", []),
    "graph-mix": (f"{G}+configs/mix.yaml", ["verifier.mix_weight=0.3"]),
    "baseline-joint-mpnet": (f"{B}+configs/joint-mpnet.yaml", []),
    "graph-joint-mpnet": (f"{G}+configs/joint-mpnet.yaml", PROGRAMS),
    "fever": (None, []),
    "hover": (None, ["data.dataset=hover"]),
    "graph-joint-llm": (f"{G}+configs/joint.yaml", LLM_PROGRAMS),
    "graph-joint-llm-mpnet": (f"{G}+configs/joint-mpnet.yaml", LLM_PROGRAMS),
}


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
    from app.cli import main

    base = _write(tmp_path / "b.yaml", "bm25: {k1: 1.1}\n")
    over = _write(tmp_path / "o.yaml", "extends: b.yaml\nbm25: {b: 0.3}\n")
    assert main(["config", "--config", f"{base}+{over}", "--set", "retrieval.k=7"]) == 0
    out = capsys.readouterr().out
    assert f"k1: 1.1  # {base}" in out and f"b: 0.3  # {over}" in out and "k: 7  # --set retrieval.k=7" in out
    assert main(["config", "--config", str(tmp_path / "gone.yaml")]) == 2
    assert capsys.readouterr().err.strip() == f"garag: error: {tmp_path / 'gone.yaml'}: config file not found"


def test_every_snapshot_has_a_recipe() -> None:
    assert sorted(p.stem for p in SNAPSHOTS.glob("*.json")) == sorted(RECIPES)
    assert len(list((ROOT / "configs").glob("*.yaml"))) <= 8


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_former_config_resolves_to_its_snapshot(name: str, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    spec, overrides = RECIPES[name]
    snapshot = json.loads((SNAPSHOTS / f"{name}.json").read_text(encoding="utf-8"))
    config = load_config(spec, overrides)
    expected = snapshot["config"]
    for key in REMOVED_VERIFIER_KEYS:
        expected["verifier"].pop(key)
    for key, (was, now) in FORMER_GRAAL_DEFAULTS.items():
        if expected["graal"][key] == was:
            expected["graal"][key] = now
    if expected["dense"]["ivf_nprobe"] == 32:
        expected["dense"]["ivf_nprobe"] = 64
    resolved = config.to_dict()
    decision = resolved["verifier"].pop("decision")
    assert resolved["dense"].pop("index_memory_gb") == 3.0
    assert resolved["train"].pop("contrast") == (1.0 if "joint" in name else 0.0)
    assert resolved["train"].pop("partial") == 0.0  # added later, off in every config
    assert resolved["train"].pop("layers") == 0  # added later: every layer in every config
    # added later; "by_length" became the default after, and the joint and mpnet recipes keep
    # "shuffled", the batches they were judged with, for their own training, the verifier they
    # continue from and the mpnet verifier of the mix
    kept = "joint" in name or "mpnet" in name
    assert resolved["train"].pop("batching") == ("shuffled" if kept else "by_length")
    base_train = resolved["train"].pop("base_train")
    assert base_train.pop("batching", None) == ("shuffled" if "joint" in name else None)
    assert base_train == expected["train"].pop("base_train")
    mix_train = resolved["verifier"]["mix_train"]
    assert mix_train.pop("batching", None) == ("shuffled" if "mix" in name else None)
    if expected["dense"]["pq_m"] == 48 and resolved["dense"]["pq_m"] == 0:  # 0: 48 for 384-d
        expected["dense"]["pq_m"] = 0
    assert resolved == expected
    assert decision == ("verifier" if "llm.yaml" in (spec or "") else "auto")
    if spec is not None and name not in ("graph-joint-llm", "graph-joint-llm-mpnet"):
        assert config_name(spec) == name  # run ids and prediction files keep their names


def test_a_systems_own_overrides_reach_it_alone(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    # as `make run-mpnet` compares the joint mpnet systems
    systems = load_systems(
        [RECIPES["baseline-joint-mpnet"][0], RECIPES["graph-joint-mpnet"][0]],
        ["data.dataset=hover", *(f"graph-joint-mpnet:{o}" for o in RECIPES["graph-joint-mpnet"][1])],
    )
    assert [s.name for s in systems] == ["baseline-joint-mpnet", "graph-joint-mpnet"]
    hashes = [run_config_hash(s.config, two_way=True) for s in systems]
    alone = [
        load_config(spec, ["data.dataset=hover", *RECIPES[name][1]])
        for name, spec in (
            ("baseline-joint-mpnet", RECIPES["baseline-joint-mpnet"][0]),
            ("graph-joint-mpnet", RECIPES["graph-joint-mpnet"][0]),
        )
    ]
    assert hashes == [run_config_hash(c, two_way=True) for c in alone]
    assert systems[1].config.reasoning.programs == "rule" and systems[0].config.reasoning.programs == "none"
    with pytest.raises(ConfigError, match=r"no config is named 'graph-joint'"):
        load_systems([RECIPES["baseline-joint"][0], G], ["graph-joint:reasoning.programs=rule"])


def test_a_commands_own_name_overrides_apply_and_a_stray_one_is_refused(tmp_path: Path, capsys) -> None:
    from app.cli import main

    base = _write(tmp_path / "b.yaml", "bm25: {k1: 1.1}\n")
    assert main(["config", "--config", str(base), "--set", "b:retrieval.k=7"]) == 0
    assert "k: 7  # --set retrieval.k=7" in capsys.readouterr().out
    assert main(["config", "--config", str(base), "--set", "graph:retrieval.k=7"]) == 2
    assert "no config is named 'graph' (the names: b)" in capsys.readouterr().err
    # without --config a NAME: override names nothing: refused, never silently dropped
    assert main(["config", "--set", "graph:retrieval.k=7"]) == 2
    assert "no config is named 'graph' (no --config is given)" in capsys.readouterr().err
