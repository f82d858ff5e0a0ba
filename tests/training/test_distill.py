"""Soft targets from a teacher (training/distill.py) and training towards them (training/train.py)."""

from __future__ import annotations

import gzip
import json
import os
import stat
from pathlib import Path

import pytest

from garag.types import Label
from training.checkpoint import run_settings
from training.distill import (
    distillation_loss,
    example_key,
    pair_key,
    read_teacher,
    soft_targets,
    targets_digest,
    write_teacher,
)
from training.train import train_verifier
from verifier.inputs import build_premise
from verifier.labels import LABEL_ORDER


class Interrupt(RuntimeError):
    """Simulated crash."""


def _one_hot(label: Label) -> tuple[float, float, float]:
    return tuple(1.0 if lab is label else 0.0 for lab in LABEL_ORDER)  # type: ignore[return-value]


def _write_lines(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))
    return path


def test_teacher_file_round_trip_is_stable(tmp_path: Path) -> None:
    rows = [("b" * 24, (0.2, 0.3, 0.5)), ("a" * 24, (0.7, 0.1, 0.2))]
    first = tmp_path / "one" / "teacher.jsonl.gz"
    second = tmp_path / "two.jsonl.gz"
    assert write_teacher(first, rows) == 2
    write_teacher(second, reversed(rows))
    assert first.read_bytes() == second.read_bytes()  # sorted, no time or name in the gzip header
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o644
    back = read_teacher(first)
    assert set(back) == {"a" * 24, "b" * 24}
    assert back["b" * 24] == pytest.approx((0.2, 0.3, 0.5))
    # each row names its labels, so the order of LABEL_ORDER is not baked into the file
    row = json.loads(gzip.open(first, "rt").readline())
    assert row["probs"] == {"SUPPORTS": 0.7, "NOT ENOUGH INFO": 0.1, "REFUTES": 0.2}
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".")]


GOOD = '{"key": "k1", "probs": {"SUPPORTS": 0.5, "REFUTES": 0.25, "NOT ENOUGH INFO": 0.25}}'


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        ("{not json", r":2: not JSON"),
        ('{"probs": {}}', r":2: expected an object with a string 'key'"),
        ('{"key": "k2", "probs": {"SUPPORTS": 1.0, "REFUTES": 0.0}}', r":2: 'probs' must give exactly"),
        (
            '{"key": "k2", "probs": {"SUPPORTS": 0.5, "REFUTES": 0.2, "NOT ENOUGH INFO": 0.2}}',
            r":2: .*sum to 0\.9",
        ),
        (
            '{"key": "k2", "probs": {"SUPPORTS": 1.5, "REFUTES": -0.5, "NOT ENOUGH INFO": 0.0}}',
            r":2: probabilities must be finite numbers >= 0",
        ),
        (
            '{"key": "k2", "probs": {"SUPPORTS": "1", "REFUTES": 0, "NOT ENOUGH INFO": 0}}',
            r":2: probabilities must be finite",
        ),
        (GOOD, r":2: key k1 given twice"),
    ],
)
def test_a_bad_teacher_row_is_named_by_file_and_line(tmp_path: Path, second_line: str, message: str) -> None:
    path = _write_lines(tmp_path / "t.jsonl.gz", [GOOD, second_line])
    with pytest.raises(ValueError, match=message) as info:
        read_teacher(path)
    assert str(info.value).startswith(f"{path}:2: ")
    assert "\n" not in str(info.value)


def test_writing_a_key_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="key kk given twice"):
        write_teacher(tmp_path / "t.jsonl.gz", [("kk", (1.0, 0.0, 0.0)), ("kk", (0.0, 1.0, 0.0))])
    assert not list(tmp_path.iterdir())


def test_unreadable_teacher_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such teacher file"):
        read_teacher(tmp_path / "missing.jsonl.gz")
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_text(GOOD + "\n")
    with pytest.raises(ValueError, match="not a gzipped JSON-lines teacher file"):
        read_teacher(plain)
    with pytest.raises(ValueError, match="holds no rows"):
        read_teacher(_write_lines(tmp_path / "empty.jsonl.gz", []))
    # damaged compressed data (zlib's own error, not an OSError) is one line too
    good = _write_lines(tmp_path / "good.jsonl.gz", [GOOD] * 1).read_bytes()
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(good[:12] + bytes(b ^ 0xFF for b in good[12:-8]) + good[-8:])
    with pytest.raises(ValueError, match=r"damaged\.jsonl\.gz: not a gzipped JSON-lines teacher file"):
        read_teacher(damaged)


def test_the_loss_mixes_cross_entropy_and_the_teachers_divergence() -> None:
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.0, 1.0, 3.0], [1.0, 1.0, 1.0]])
    labels = torch.tensor([0, 2, 1])
    ce = f.cross_entropy(logits, labels, reduction="none")
    teacher = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    everyone = torch.tensor([True, True, True])
    # weight 0: cross-entropy alone
    assert distillation_loss(logits, labels, teacher, everyone, 0.0, 1.0).item() == pytest.approx(
        ce.mean().item()
    )
    # a teacher with the student's own probabilities adds nothing: (1 - w) CE, at any temperature
    # (both are softened alike)
    agreeing = torch.softmax(logits, dim=-1)
    for temp in (1.0, 2.0, 4.0):
        loss = distillation_loss(logits, labels, agreeing, everyone, 0.75, temp)
        assert loss.item() == pytest.approx(0.25 * ce.mean().item(), abs=1e-5)
    # weight 1, T 1: the KL divergence itself; T 2 scales the softened one by T^2
    kl = (teacher * (teacher.log() - f.log_softmax(logits, dim=-1))).sum(-1)
    assert distillation_loss(logits, labels, teacher, everyone, 1.0, 1.0).item() == pytest.approx(
        kl.mean().item()
    )
    soft_t = torch.softmax(teacher.log() / 2, dim=-1)
    kl2 = (soft_t * (soft_t.log() - f.log_softmax(logits / 2, dim=-1))).sum(-1) * 4
    assert distillation_loss(logits, labels, teacher, everyone, 1.0, 2.0).item() == pytest.approx(
        kl2.mean().item(), rel=1e-5
    )
    # rows without a target: cross-entropy, whatever their placeholder row says
    some = torch.tensor([True, False, False])
    expected = (kl[0] + ce[1] + ce[2]) / 3
    assert distillation_loss(logits, labels, teacher, some, 1.0, 1.0).item() == pytest.approx(expected.item())
    nobody = torch.tensor([False, False, False])
    assert distillation_loss(logits, labels, teacher, nobody, 1.0, 1.0).item() == pytest.approx(
        ce.mean().item()
    )


def test_soft_targets_follow_the_premise_and_the_claim(toy_data) -> None:
    train, _ = toy_data
    first, second = train[0], train[1]
    assert example_key(first) == pair_key(build_premise(first.evidence), first.claim)
    assert example_key(first) != example_key(second)
    teacher = {example_key(first): (0.1, 0.2, 0.7)}
    targets, missing = soft_targets(train, teacher)
    assert targets[0] == (0.1, 0.2, 0.7)
    assert targets[1:] == [None] * (len(train) - 1)
    assert missing == len(train) - 1
    # the digest sees every value and every gap
    assert targets_digest(targets) != targets_digest([None] * len(train))
    assert targets_digest(targets) == targets_digest(list(targets))


def _swapped(train) -> list[tuple[float, float, float]]:
    """A teacher that calls every SUPPORTS example REFUTES and every REFUTES one SUPPORTS."""
    swap = {Label.SUPPORTS: Label.REFUTES, Label.REFUTES: Label.SUPPORTS}
    return [_one_hot(swap.get(ex.label, ex.label)) for ex in train]


def _distilled(tiny_base: Path, out: Path, toy_data, toy_config, weight: float, targets):
    """The toy verifier trained towards ``targets`` at ``weight`` (its TrainResult)."""
    train, val = toy_data
    config = toy_config(distill="teacher", distill_weight=weight)
    return train_verifier(train, val, config, str(tiny_base), out, progress=False, soft_targets=targets)


def test_the_student_follows_the_teacher_as_far_as_its_weight_says(
    tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    """Labels say "yes" is SUPPORTS; a teacher at weight 1 saying REFUTES wins; at weight 0 it is ignored."""
    targets = _swapped(toy_data[0])
    led = _distilled(tiny_base, tmp_path / "w1", toy_data, toy_config, 1.0, targets)
    # validation keeps the true labels: the student learned the teacher's swap, so it gets
    # SUPPORTS and REFUTES wrong and NEI right
    per_class = led.best_val["per_class"]
    assert per_class["SUPPORTS"]["recall"] == 0.0
    assert per_class["REFUTES"]["recall"] == 0.0
    assert per_class["NOT ENOUGH INFO"]["recall"] == 1.0
    ignored = _distilled(tiny_base, tmp_path / "w0", toy_data, toy_config, 0.0, targets)
    assert ignored.best_val["accuracy"] == 1.0


def test_examples_without_a_target_learn_from_their_labels(
    tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    # every example without a target: the labels alone, whatever the weight
    alone = _distilled(tiny_base, tmp_path / "none", toy_data, toy_config, 1.0, [None] * len(toy_data[0]))
    assert alone.best_val["accuracy"] == 1.0
    # a swapping teacher for the NEI examples only (it leaves them NEI) and none for the others:
    # the SUPPORTS and REFUTES examples still learn their labels
    mixed = [
        t if ex.label is Label.NOT_ENOUGH_INFO else None
        for ex, t in zip(toy_data[0], _swapped(toy_data[0]), strict=True)
    ]
    assert (
        _distilled(tiny_base, tmp_path / "mixed", toy_data, toy_config, 1.0, mixed).best_val["accuracy"]
        == 1.0
    )


def test_soft_targets_and_train_distill_go_together(
    tiny_base: Path, tmp_path: Path, toy_data, toy_config
) -> None:
    train, val = toy_data
    targets = _swapped(train)
    with pytest.raises(ValueError, match="train.distill and soft_targets go together"):
        train_verifier(
            train, val, toy_config(), str(tiny_base), tmp_path, progress=False, soft_targets=targets
        )
    with pytest.raises(ValueError, match="train.distill and soft_targets go together"):
        train_verifier(train, val, toy_config(distill="t"), str(tiny_base), tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"soft_targets: 29 for 30 training examples"):
        train_verifier(
            train,
            val,
            toy_config(distill="t"),
            str(tiny_base),
            tmp_path,
            progress=False,
            soft_targets=targets[1:],
        )


def test_resume_refuses_other_soft_targets(tiny_base: Path, tmp_path: Path, toy_data, toy_config) -> None:
    train, val = toy_data
    targets = _swapped(train)

    def crash(step: int, loss: float) -> None:
        raise Interrupt

    config = toy_config(distill="teacher")
    with pytest.raises(Interrupt):
        train_verifier(
            train,
            val,
            config,
            str(tiny_base),
            tmp_path,
            progress=False,
            checkpoint_every=1,
            on_step=crash,
            soft_targets=targets,
        )
    other = [_one_hot(ex.label) for ex in train]
    with pytest.raises(ValueError, match="distill"):
        train_verifier(train, val, config, str(tiny_base), tmp_path, progress=False, soft_targets=other)
    with pytest.raises(ValueError, match="distill"):  # the same targets, another weight
        train_verifier(
            train,
            val,
            toy_config(distill="teacher", distill_weight=0.9),
            str(tiny_base),
            tmp_path,
            progress=False,
            soft_targets=targets,
        )
    # the teacher's path is not part of the settings: the same targets under another name resume
    resumed = train_verifier(
        train,
        val,
        toy_config(distill="elsewhere"),
        str(tiny_base),
        tmp_path,
        progress=False,
        soft_targets=targets,
    )
    assert resumed.resumed_from_step == 1


def test_the_verifier_artifact_is_named_by_the_teachers_content_not_its_path(tmp_path: Path) -> None:
    from garag.config import load_config
    from verifier.trained import verifier_artifact_dir

    plain = verifier_artifact_dir(load_config()).name
    one = write_teacher(tmp_path / "a.jsonl.gz", [("k" * 24, (0.5, 0.25, 0.25))])
    assert one == 1
    (tmp_path / "b.jsonl.gz").write_bytes((tmp_path / "a.jsonl.gz").read_bytes())
    write_teacher(tmp_path / "c.jsonl.gz", [("k" * 24, (0.25, 0.5, 0.25))])

    def name(file: str, *more: str) -> str:
        return verifier_artifact_dir(load_config(None, [f"train.distill={tmp_path / file}", *more])).name

    assert name("a.jsonl.gz") != plain
    assert name("a.jsonl.gz") == name("b.jsonl.gz")  # same content under another name
    assert name("c.jsonl.gz") != name("a.jsonl.gz")
    assert name("a.jsonl.gz", "train.distill_weight=0.8") != name("a.jsonl.gz")
    assert name("a.jsonl.gz", "train.distill_temperature=2") != name("a.jsonl.gz")
    # without a teacher the distillation settings do nothing, so they name nothing either
    no_teacher = load_config(
        None, ["train.distill=", "train.distill_weight=0.8", "train.distill_temperature=2"]
    )
    assert (
        verifier_artifact_dir(no_teacher).name
        == verifier_artifact_dir(load_config(None, ["train.distill="])).name
    )
    with pytest.raises(ValueError, match=r"train\.distill: no such teacher file: .*missing\.jsonl\.gz"):
        name("missing.jsonl.gz")


def test_a_teacher_changed_after_the_folder_was_named_is_refused(tmp_path: Path) -> None:
    """The folder is named from the bytes that will be trained on: a teacher rewritten in between
    is refused before any example is built."""
    from garag.config import load_config
    from training.verifier import train_from_fever
    from verifier.trained import verifier_artifact_dir

    write_teacher(tmp_path / "t.jsonl.gz", [("k" * 24, (0.5, 0.25, 0.25))])
    config = load_config(None, [f"train.distill={tmp_path / 't.jsonl.gz'}", f"paths.cache_dir={tmp_path}"])
    out_dir = verifier_artifact_dir(config)
    write_teacher(tmp_path / "t.jsonl.gz", [("k" * 24, (0.25, 0.5, 0.25))])
    with pytest.raises(ValueError, match=r"t\.jsonl\.gz changed since the verifier's folder verifier-"):
        train_from_fever(config, out_dir, progress=False)
    assert not out_dir.exists()


def test_a_teacher_made_for_other_examples_is_refused(tmp_path: Path, toy_data) -> None:
    from garag.config import load_config
    from training.verifier import _read_teacher, _soft_targets

    train, _ = toy_data
    other = write_teacher(tmp_path / "other.jsonl.gz", [("k" * 24, (0.5, 0.25, 0.25))])
    assert other == 1
    config = load_config(None, [f"train.distill={tmp_path / 'other.jsonl.gz'}"])
    with pytest.raises(
        ValueError, match=r"other\.jsonl\.gz: the teacher scored none of the 30 training examples"
    ):
        _soft_targets(config, train, _read_teacher(config))
    write_teacher(tmp_path / "part.jsonl.gz", [(example_key(train[0]), (0.5, 0.25, 0.25))])
    config = load_config(None, [f"train.distill={tmp_path / 'part.jsonl.gz'}"])
    targets, info = _soft_targets(config, train, _read_teacher(config))
    assert targets[0] == pytest.approx((0.5, 0.25, 0.25)) and targets[1] is None
    assert (info["examples_with_target"], info["examples_without"], info["teacher_rows"]) == (1, 29, 1)
    assert _read_teacher(load_config()) is None
    assert _soft_targets(load_config(), train, None) == (None, {})


def test_the_embedded_teacher_is_for_the_recipe_it_was_made_for(toy_data, caplog) -> None:
    from garag.config import load_config
    from training.verifier import _read_teacher, _soft_targets
    from verifier.trained import teacher_path

    embedded = teacher_path(load_config(None, ["train.distill=embedded"]))
    assert embedded is not None and embedded.name == "teacher-mpnet.jsonl.gz" and embedded.is_file()
    assert teacher_path(load_config(None, ["train.distill=embedded", "train.base_model=mpnet"])) is None
    assert teacher_path(load_config(None, ["train.distill=embedded", "train.compositional=1"])) is None
    assert teacher_path(load_config(None, ["train.distill="])) is None
    # other examples than it was made for: a warning, and the labels alone (a file the user names
    # is refused instead: test_a_teacher_made_for_other_examples_is_refused)
    train, _ = toy_data
    with caplog.at_level("WARNING"):
        embedded_config = load_config(None, ["train.distill=embedded"])
        targets, info = _soft_targets(embedded_config, train, _read_teacher(embedded_config))
    assert targets is None
    assert (info["examples_with_target"], info["examples_without"]) == (0, len(train))
    assert "scored none of these 30 training examples" in caplog.text


def test_settings_without_soft_targets_are_those_of_before(toy_data, toy_config) -> None:
    """Verifiers trained before distillation existed still resume and are still reused."""
    train, val = toy_data
    plain = run_settings(toy_config(), "base", None, train, val)
    assert "distill" not in plain
    assert not {"distill", "distill_weight", "distill_temperature"} & set(plain["train"])
    with_targets = run_settings(toy_config(distill="t"), "base", None, train, val, "abc")
    assert with_targets["distill"] == {"weight": 0.5, "temperature": 1.0, "targets_digest": "abc"}
    assert {k: v for k, v in with_targets.items() if k != "distill"} == plain
