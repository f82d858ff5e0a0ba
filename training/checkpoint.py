"""Training-run bookkeeping (no torch): run identity, atomic checkpoint directories, metrics."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from garag.config import TrainConfig
from retrievers.embeddings import ModelUnavailableError, model_identity
from verifier.base import TrainExample
from verifier.inputs import PREMISE_FORMAT
from verifier.labels import LABEL_ORDER

CHECKPOINT_DIR = "checkpoint"
STATE_JSON = "trainer_state.json"


def classification_metrics(gold: Sequence[int], pred: Sequence[int], loss: float | None = None) -> dict:
    """Accuracy, per-class recall/precision and macro-F1 over LABEL_ORDER indices (pure).

    Returns:
        ``{"n", "accuracy", "macro_f1", "loss", "per_class": {label: {"n", "recall", "precision"}}}``;
        a recall or precision with no denominator is 0.0.
    """
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    n = len(gold)
    per_class: dict[str, dict] = {}
    f1s = []
    for i, label in enumerate(LABEL_ORDER):
        support = sum(1 for g in gold if g == i)
        predicted = sum(1 for p in pred if p == i)
        hits = sum(1 for g, p in zip(gold, pred, strict=True) if g == p == i)
        recall = hits / support if support else 0.0
        precision = hits / predicted if predicted else 0.0
        f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
        per_class[label.value] = {"n": support, "recall": recall, "precision": precision}
    return {
        "n": n,
        "accuracy": sum(1 for g, p in zip(gold, pred, strict=True) if g == p) / n if n else 0.0,
        "macro_f1": sum(f1s) / len(f1s),
        "loss": loss,
        "per_class": per_class,
    }


def link_or_copy(src: str, dst: str) -> None:
    """Hard-link ``src`` to ``dst`` (unchanged files cost no space), copying where links are not possible."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def replace_dir(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst``, replacing an existing ``dst`` (a crash leaves one of them whole)."""
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old-{os.getpid()}-{time.time_ns()}")
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


def recover_checkpoint(out_dir: Path) -> Path | None:
    """The checkpoint directory, restoring one that a crash left renamed aside; drops stale temp dirs."""
    final = out_dir / CHECKPOINT_DIR
    for tmp in out_dir.glob(f".{CHECKPOINT_DIR}.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)
    olds = sorted(out_dir.glob(f".{CHECKPOINT_DIR}.old-*"), key=lambda p: p.stat().st_mtime)
    if not final.exists() and olds and (olds[-1] / STATE_JSON).is_file():
        os.replace(olds[-1], final)
        olds = olds[:-1]
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)
    return final if (final / STATE_JSON).is_file() else None


def examples_digest(examples: Sequence[TrainExample]) -> str:
    """16-hex digest of claims, labels and evidence (ids and text), in order."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(ex.claim.encode())
        h.update(ex.label.value.encode())
        for e in ex.evidence:
            h.update(f"\0{e.sentence.page}\0{e.sentence.line}\0{e.text}".encode())
        h.update(b"\1")
    return h.hexdigest()[:16]


def model_key(base_model: str) -> str:
    """The base model as a run's settings name it: the identity of its files where they are on
    this machine (``files:`` + :func:`~retrievers.embeddings.model_identity`), so the same model
    installed elsewhere (another virtualenv, a moved cache) resumes or reuses a run; else its name."""
    try:
        return "files:" + model_identity(base_model)
    except (ModelUnavailableError, OSError):
        return base_model


def run_settings(
    config: TrainConfig,
    base_model: str,
    overrides: dict | None,
    train: Sequence[TrainExample],
    val: Sequence[TrainExample],
    soft_targets_digest: str | None = None,
) -> dict:
    """Everything that must match for a run to be resumed (or its result reused)."""
    # as the verifier folder's hash reads them: keys added later are left out at their default
    # (runs saved before them still resume), the teacher's settings go in ``distill`` below
    train_settings = config.hash_dump()
    distill = (
        {}
        if soft_targets_digest is None
        else {
            "distill": {
                "weight": config.distill_weight,
                "temperature": config.distill_temperature,
                "targets_digest": soft_targets_digest,
            }
        }
    )
    return {
        "train": train_settings,
        "base_model": model_key(base_model),
        "model_overrides": overrides or {},
        "premise_format": PREMISE_FORMAT,
        "n_train": len(train),
        "n_val": len(val),
        "train_digest": examples_digest(train),
        "val_digest": examples_digest(val),
        **distill,
    }


def check_settings(found: dict, expected: dict, where: Path) -> None:
    """Raise ValueError naming the differing keys when a stored run's settings are not ``expected``
    (:func:`run_settings`); the stored ``train`` is read as :func:`run_settings` writes it now, so a
    key added later and stored at its default (``precision: float32``) still matches, and a base
    model stored as a path (runs saved before :func:`model_key`) is compared by its files."""
    if isinstance(found.get("train"), dict):
        found = {**found, "train": TrainConfig.hashed_fields(found["train"])}
    base = found.get("base_model")
    if isinstance(base, str) and not base.startswith("files:") and Path(base).is_dir():
        found = {**found, "base_model": model_key(base)}  # stored as a path before model_key
    if found != expected:
        diff = sorted(k for k in set(found) | set(expected) if found.get(k) != expected.get(k))
        raise ValueError(
            f"{where} was produced with different settings ({', '.join(diff)} differ); "
            "use a new out_dir or delete this one to start over"
        )
