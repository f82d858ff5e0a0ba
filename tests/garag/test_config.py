from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest

from garag.config import (
    Config,
    ConfigError,
    TrainConfig,
    VerifierConfig,
    bounds_of,
    describe_range,
    load_config,
    load_config_with_sources,
    render_config,
)


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


# ---- the schema: every numeric setting has a declared range, enforced with a message naming key and range


def _numeric_fields() -> list[tuple[str, str, type]]:
    """(section, key, int or float) for every scalar numeric field of the schema."""
    out = []
    for section, info in Config.model_fields.items():
        model = info.annotation
        for key, field in model.model_fields.items():
            kinds = {a for a in (field.annotation, *typing.get_args(field.annotation)) if a in (int, float)}
            if kinds:
                out.append((section, key, kinds.pop()))
    return out


NUMERIC = _numeric_fields()


def _just_below(low: float, inclusive: bool, kind: type) -> float:
    if kind is int:
        return int(low) - 1 if inclusive else int(low)
    return low - 1e-9 * max(1.0, abs(low)) if inclusive else low


def test_the_schema_has_numeric_fields_in_every_numeric_section() -> None:
    assert len(NUMERIC) > 80
    assert {s for s, _, _ in NUMERIC} >= {"bm25", "dense", "fusion", "retrieval", "verifier", "train", "llm"}


@pytest.mark.parametrize(("section", "key", "kind"), NUMERIC, ids=[f"{s}.{k}" for s, k, _ in NUMERIC])
def test_every_numeric_setting_refuses_a_value_just_below_its_minimum(section: str, key: str, kind: type):
    model = Config.model_fields[section].annotation
    low, inclusive, high, high_inclusive = bounds_of(model, key)
    assert low is not None, f"{section}.{key} declares no minimum"
    default = getattr(model(), key)
    if default is not None:  # the default itself is in range
        assert default >= low if inclusive else default > low
        assert high is None or (default <= high if high_inclusive else default < high)
    bad = _just_below(low, inclusive, kind)
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[f"{section}.{key}={bad!r}"])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{section}.{key}: {describe_range(model, key)}, got ")
    # the bound itself is accepted when it is inclusive
    if inclusive:
        assert getattr(getattr(load_config(overrides=[f"{section}.{key}={low!r}"]), section), key) == low
    if high is not None:
        above = int(high) + 1 if kind is int else high + 1e-9 * max(1.0, abs(high))
        with pytest.raises(ConfigError, match=rf"^{section}\.{key}: must be in "):
            load_config(overrides=[f"{section}.{key}={above!r}"])


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_non_finite_numbers_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^fusion\.rrf_k: must be a finite number, got"):
        load_config(overrides=[f"fusion.rrf_k={value}"])
    with pytest.raises(ConfigError, match=r"^fusion\.weights\.bm25: must be a finite number"):
        load_config(overrides=[f"fusion.weights.bm25={value}"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("retrieval.k=0", "retrieval.k: must be >= 1, got 0"),
        ("retrieval.k=-1", "retrieval.k: must be >= 1, got -1"),
        ("fusion.rrf_k=0", "fusion.rrf_k: must be > 0, got 0"),
        ("fusion.weights.dense=-1", "fusion.weights.dense: must be >= 0, got -1"),
        ("eval.ks=[5, 0]", "eval.ks.1: must be >= 1, got 0"),
        ("eval.ks=[]", "eval.ks: needs at least 1 item, got []"),
        ("retrieval.k=2.5", "retrieval.k: expected an integer, got 2.5"),
        ("retrieval.k='3'", "retrieval.k: expected an integer, got '3'"),
        ("bm25.k1=true", "bm25.k1: expected a number, got True"),
        ("data.skip_bad_lines=3", "data.skip_bad_lines: expected true/false, got 3"),
        ("pipeline.mode=graf", "pipeline.mode: must be one of 'baseline' or 'graph', got 'graf'"),
        ("verifier.label_map={x: SUPPORT}", "verifier.label_map: 'x' maps to 'SUPPORT'; a FEVER label"),
        ("llm.model=' '", "llm.model: must not be empty, got ' '"),
        ("bm25=3", "bm25: expected a mapping, got 3"),
        ("bm25.k1=[1", "--set 'bm25.k1=[1': the value is not valid YAML"),
        ("bm25..k1=1", "--set 'bm25..k1=1': empty key"),
    ],
)
def test_bad_values_get_one_line_naming_key_and_expectation(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[override])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_sections_validate_on_construction_and_assignment() -> None:
    with pytest.raises(ConfigError, match=r"^verifier\.top_k: must be in \[1, 50\], got 0$"):
        VerifierConfig(top_k=0)
    config = load_config()
    config.retrieval.retrievers = [*config.retrieval.retrievers, "graal"]
    assert config.retrieval.retrievers[-1] == "graal"
    with pytest.raises(ConfigError, match=r"^retrieval\.k: must be >= 1, got 0$"):
        config.retrieval.k = 0
    assert config.retrieval.k == 100
    assert config.propagation.replace(beta=2.0).beta == 2.0
    with pytest.raises(ConfigError, match=r"^propagation\.damping: must be in \(0, 1\), got 1"):
        config.propagation.replace(damping=1)


def test_bad_yaml_file_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("bm25:\n  k1: 1.2\n  b: [0.5\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))}:\d+: not valid YAML"):
        load_config(f)
    f.write_bytes(b"bm25:\n  stemmer: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(f)
    f.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="the top level must be a mapping"):
        load_config(f)


def test_artifact_settings_keep_their_plain_values() -> None:
    # Artifact directories are named by a hash of these dicts: an int given for a float
    # setting must still hash as the float it was before the schema moved to pydantic.
    c = load_config(overrides=["fusion.weights.graal=3", "bm25.k1=2"])
    assert c.fusion.model_dump()["weights"]["graal"] == 3.0 and isinstance(c.bm25.k1, float)
    assert json.dumps(c.train.hash_dump(), sort_keys=True) == json.dumps(
        {
            "base_model": "minilm", "train_pairs": "", "corpus": "", "epochs": 3, "learning_rate": 1e-4,
            "weight_decay": 0.01, "warmup_ratio": 0.1, "batch_size": 32, "max_length": 96,
            "val_fraction": 0.1, "patience": 4, "eval_every": 200, "nei_per_claim": 1.0,
            "hard_negative_share": 0.7, "distractors": 0, "nei_sentences": 1, "max_claims": 0, "seed": 13,
            "batching": "by_length",  # the default since length batches were adopted; "shuffled" drops out
        },
        sort_keys=True,
    )  # fmt: skip


def test_keys_added_later_leave_old_hashes_alone() -> None:
    """New keys at their default drop out of the run and artifact hashes (what was built keeps its name)."""
    from eval.run_hash import run_config_hash
    from verifier.trained import fever_train_config, verifier_artifact_dir

    def run_hash(config, two_way: bool = False) -> str:  # noqa: ANN001 - as evaluate and compare name runs
        return run_config_hash(config, two_way=two_way)

    # the decision model (issue 52) changed every verdict: run hashes carry its version, so
    # predictions saved before it (stop 16: baseline on FEVER 564be8d3bf1cda07) are made again
    now = run_hash(load_config("configs/baseline.yaml"))
    assert now != "564be8d3bf1cda07"
    assert run_hash(load_config("configs/baseline.yaml", ["verifier.decision=verifier"])) != now
    # a key at its default value is left out: the default config hashes as if it did not exist
    assert run_hash(load_config("configs/baseline.yaml", ["verifier.decision=auto"])) == now
    # length batches became the default recipe: the default verifier is the one trained with them
    # before, under the same name; the shuffled one keeps its name as well
    assert verifier_artifact_dir(load_config()).name == "verifier-7a66e6fb8a9de835"
    # set away from its default, a new key counts
    assert run_hash(load_config("configs/baseline.yaml", ["data.part=tune"])) != now
    assert run_hash(load_config("configs/baseline.yaml", ["dense.pq_m=32"])) != now
    # how BM25 is built (in shards or at once) is never part of a hash: the index is the same
    assert run_hash(load_config("configs/baseline.yaml", ["bm25.shard_docs=5"])) == now
    for added in ("train.compositional=1", "train.contrast=0.5", "train.batching=shuffled"):
        assert verifier_artifact_dir(load_config(None, [added])).name != "verifier-7a66e6fb8a9de835"
    by_length = load_config(None, ["train.batching=by_length"])
    assert verifier_artifact_dir(by_length).name == "verifier-7a66e6fb8a9de835"
    shuffled = load_config(None, ["train.batching=shuffled"])
    assert verifier_artifact_dir(shuffled).name == "verifier-b0424bf1807375cf"
    # a per-sentence recipe's contrast claims are twins only since 1a02f2a (compositions before):
    # its folder was renamed (verifier-69eaaee47df2d97d before), so a verifier trained on the old
    # claims is not reused
    twins = load_config(None, ["train.contrast=0.5", "train.epochs=2", "train.batching=shuffled"])
    assert verifier_artifact_dir(twins).name == "verifier-478b9a6379a9c6c1"
    # how a run searches its own dense index changes its runs, never the verifier (whose training
    # corpus is searched with TRAIN_SEARCH): ivf_nprobe's default moved from 32 to 64 without
    # renaming the verifier folder
    probes = load_config("configs/baseline.yaml", ["dense.ivf_nprobe=8"])
    assert run_hash(probes) != now
    assert verifier_artifact_dir(probes).name == "verifier-7a66e6fb8a9de835"
    assert fever_train_config(probes).dense.ivf_nprobe == 32 and probes.dense.ivf_nprobe == 8


def test_render_config_loads_back_and_names_sources(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("fusion:\n  weights: {graal: 3}\nretrieval:\n  retrievers: [bm25, graal]\n")
    config, sources = load_config_with_sources(f, ["bm25.k1=1.2", "data.dataset=hover"])
    text = render_config(config, sources)
    assert "  k1: 1.2  # --set bm25.k1=1.2\n" in text
    assert "  dataset: hover  # --set data.dataset=hover\n" in text
    assert f"  weights: {{graal: 3.0}}  # {f}\n" in text
    assert "  b: 0.75  # default\n" in text
    back = tmp_path / "back.yaml"
    back.write_text(text)
    assert load_config(back) == config


def test_the_settings_that_overrode_the_verdict_are_refused_naming_why(tmp_path: Path) -> None:
    for key in ("two_way_threshold", "entity_check"):
        with pytest.raises(ConfigError, match=rf"^verifier\.{key}: removed: .*decision model"):
            load_config(overrides=[f"verifier.{key}=0.1"])
    old = tmp_path / "old.yaml"
    old.write_text("verifier:\n  entity_check: two_way\n")
    with pytest.raises(ConfigError, match=r"verifier\.entity_check: removed"):
        load_config(old)
    with pytest.raises(
        ConfigError, match=r"verifier\.decision: must be one of 'auto', 'learned' or 'verifier'"
    ):
        load_config(overrides=["verifier.decision=rule"])


def test_base_train_sets_the_default_verifier_that_a_joint_verifier_continues_from() -> None:
    from verifier.trained import base_verifier_config, verifier_artifact_dir

    joint = load_config("configs/graph.yaml+configs/joint.yaml")
    # judged with shuffled batches from the default verifier trained with them: joint.yaml keeps both
    assert joint.train.base_train == {"batching": "shuffled"} and joint.train.batching == "shuffled"
    # left at its default it is not hashed: the joint verifier keeps its name (ee1b...: with the
    # contrast claims joint.yaml trains on since issue 52; 9d74...: the recipe before them).  Both
    # were renamed when their claims came to be drawn from the default verifier's split (c796... and
    # f482... before: validation claims the default verifier had trained on)
    assert verifier_artifact_dir(joint).name == "verifier-ee1be0e01f4534a3"
    before = load_config("configs/graph.yaml+configs/joint.yaml", ["train.contrast=0"])
    assert verifier_artifact_dir(before).name == "verifier-9d744ec254e60bbb"
    mp = load_config(
        "configs/graph.yaml+configs/joint.yaml",
        ["train.base_train={base_model: mpnet, learning_rate: 5.0e-5}"],
    )
    base = base_verifier_config(mp).train
    assert (base.base_model, base.learning_rate, base.epochs) == ("mpnet", 5e-5, 3)
    assert (base.train_pairs, base.corpus, base.seed) == (
        mp.train.train_pairs,
        mp.train.corpus,
        mp.train.seed,
    )
    assert base_verifier_config(joint).train == TrainConfig(seed=joint.train.seed, batching="shuffled")
    assert verifier_artifact_dir(base_verifier_config(joint)).name == "verifier-b0424bf1807375cf"
    # base_train hashes as the verifier it makes: {} now means length batches, another joint verifier
    following = load_config("configs/graph.yaml+configs/joint.yaml", ["train.base_train={}"])
    assert verifier_artifact_dir(base_verifier_config(following)).name == "verifier-7a66e6fb8a9de835"
    assert verifier_artifact_dir(following).name != "verifier-ee1be0e01f4534a3"
    # another default verifier underneath: another joint verifier
    assert verifier_artifact_dir(mp).name != "verifier-ee1be0e01f4534a3"
    # the mpnet joint configs continue from the very verifier that configs/mpnet.yaml trains
    shipped = load_config("configs/graph.yaml+configs/joint-mpnet.yaml")
    assert verifier_artifact_dir(base_verifier_config(shipped)) == verifier_artifact_dir(
        load_config("configs/baseline.yaml+configs/mpnet.yaml")
    )
    for value, message in (
        (
            "{lr: 1}",
            r"train\.base_train: 'lr' is not a setting it can change \(known: base_model, batch_size",
        ),
        ("{seed: 3}", r"train\.base_train: 'seed' is not a setting it can change"),
        ("{base_model: garag}", r"train\.base_train: base_model 'garag' would train"),
        ("{learning_rate: 5}", r"train\.base_train: learning_rate: must be in \(0, 1\], got 5"),
        ("3", r"train\.base_train: expected a mapping"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_config(overrides=["train.base_model=garag", f"train.base_train={value}"])
    # it sets what base_model 'garag' continues from, so with any other base_model it is refused
    with pytest.raises(ConfigError, match=r"^train: base_train sets .* base_model is 'minilm'$"):
        load_config(overrides=["train.base_train={epochs: 1}"])
    # equal settings, however written, name the same verifier (checked values, defaults left out)
    same = load_config(
        "configs/graph.yaml+configs/joint-mpnet.yaml",
        ["train.base_train={base_model: mpnet, learning_rate: 5e-5, epochs: 3, batching: shuffled}"],
    )
    assert same.train.base_train == {"base_model": "mpnet", "learning_rate": 5e-5, "batching": "shuffled"}
    assert verifier_artifact_dir(same) == verifier_artifact_dir(shipped)


def test_mix_settings_name_a_second_verifier_and_leave_old_hashes_alone() -> None:
    from eval.run_hash import run_config_hash
    from verifier.trained import mix_verifier_config, verifier_artifact_dir

    plain = load_config("configs/baseline.yaml")
    mixed = load_config(
        "configs/baseline.yaml",
        [
            "verifier.mix_weight=0.5",
            "verifier.mix_train={base_model: mpnet, learning_rate: 5.0e-5, batching: shuffled}",
        ],
    )
    # off by default and then not hashed: saved runs and trained verifiers keep their names
    assert "mix_weight" not in plain.verifier.hash_dump()
    assert run_config_hash(mixed, two_way=False) != run_config_hash(plain, two_way=False)
    assert verifier_artifact_dir(mixed) == verifier_artifact_dir(plain)
    # the second verifier is the one baseline-mpnet.yaml trains: one training serves both configs
    second = mix_verifier_config(mixed)
    assert verifier_artifact_dir(second) == verifier_artifact_dir(
        load_config("configs/baseline.yaml+configs/mpnet.yaml")
    )
    assert (second.verifier.mix_weight, second.verifier.mix_train, second.verifier.model) == (0.0, {}, "")
    assert second.verifier.top_k == mixed.verifier.top_k
    # settings that are all defaults still name a second verifier: garag's default one
    minilm = load_config(overrides=["verifier.mix_weight=0.5", "verifier.mix_train={base_model: minilm}"])
    assert minilm.verifier.mix_train == {"base_model": "minilm"}
    assert verifier_artifact_dir(mix_verifier_config(minilm)) == verifier_artifact_dir(plain)
    checkpoint = mix_verifier_config(
        load_config(overrides=["verifier.mix_weight=0.2", "verifier.mix_model=/models/other"])
    )
    assert checkpoint.verifier.model == "/models/other"
    for overrides, message in (
        (["verifier.mix_weight=0.5"], r"^verifier: mix_weight needs a second verifier"),
        (["verifier.mix_model=x"], r"^verifier: mix_train / mix_model name a second verifier"),
        (
            ["verifier.mix_weight=0.5", "verifier.mix_model=x", "verifier.mix_train={epochs: 1}"],
            r"^verifier: mix_model and mix_train both name",
        ),
        (
            ["verifier.mix_weight=0.5", "verifier.mix_train={lr: 1}"],
            r"^verifier\.mix_train: 'lr' is not a setting it can change",
        ),
        (["verifier.mix_weight=1.5", "verifier.mix_model=x"], r"verifier\.mix_weight"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_config(overrides=overrides)


def test_bfloat16_precision_names_other_runs_but_the_same_trained_verifier() -> None:
    from eval.run_hash import run_config_hash
    from verifier.trained import mix_verifier_config, verifier_artifact_dir

    plain = load_config("configs/baseline.yaml")
    half = load_config("configs/baseline.yaml", ["verifier.precision=bfloat16"])
    # float32, the default, is left out of the hash: saved runs keep their names
    assert "precision" not in plain.verifier.hash_dump()
    assert half.verifier.hash_dump()["precision"] == "bfloat16"
    # its verdicts differ a little, so its runs are other runs; the trained verifier is the same
    assert run_config_hash(half, two_way=False) != run_config_hash(plain, two_way=False)
    assert verifier_artifact_dir(half) == verifier_artifact_dir(plain)
    # a mix's second verifier reads at the same precision
    mixed = load_config("configs/baseline.yaml+configs/mix.yaml", ["verifier.precision=bfloat16"])
    assert mix_verifier_config(mixed).verifier.precision == "bfloat16"
    with pytest.raises(ConfigError, match=r"^verifier\.precision: .*'float32'.*'bfloat16'"):
        load_config(overrides=["verifier.precision=fp16"])


def test_bfloat16_training_is_another_recipe() -> None:
    from verifier.trained import verifier_artifact_dir

    plain = load_config("configs/baseline.yaml")
    # float32 is left out of the hash: the verifiers trained before keep their names
    assert "precision" not in plain.train.hash_dump()
    half = load_config("configs/baseline.yaml", ["train.precision=bfloat16"])
    assert verifier_artifact_dir(half) != verifier_artifact_dir(plain)
    with pytest.raises(ConfigError, match=r"^train\.precision: must be one of 'float32' or 'bfloat16'"):
        load_config(overrides=["train.precision=half"])
