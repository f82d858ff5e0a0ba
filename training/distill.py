"""Soft targets from a teacher verifier, for training a smaller one (knowledge distillation).

A teacher file is gzipped JSON lines, one per training example the teacher scored::

    {"key": "<pair_key(premise, claim)>", "probs": {"SUPPORTS": 0.8, "REFUTES": 0.1, "NOT ENOUGH INFO": 0.1}}

``key`` names the (premise, claim) pair the student reads (:func:`pair_key`, the premise as
:func:`verifier.inputs.build_premise` builds it), so a file made elsewhere (a GPU machine) applies
to exactly the examples it scored and to no other.  The probabilities are the teacher's, without
NEI calibration.  garag's file (``data/fever/teacher-mpnet.jsonl.gz``) holds all-mpnet-base-v2's
cross-fitted probabilities: each example scored by a teacher that was not trained on its claim
(README "Training the verifier").

With ``train.distill`` set, :func:`training.train.train_verifier` minimises, for an example with a
soft target, ``(1 - w) * CE(label) + w * T^2 * KL(teacher || student at temperature T)``
(``train.distill_weight`` w, ``train.distill_temperature`` T; Hinton et al. 2015), and plain
cross-entropy for an example the file does not hold (counted in the verifier's ``meta.json``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from garag.artifacts import write_file_atomic
from verifier.base import TrainExample
from verifier.inputs import build_premise
from verifier.labels import LABEL_ORDER

__all__ = [
    "distillation_loss",
    "example_key",
    "pair_key",
    "parse_teacher",
    "read_teacher",
    "soft_targets",
    "targets_digest",
    "write_teacher",
]

_NAMES = tuple(label.value for label in LABEL_ORDER)
_SUM_TOLERANCE = 1e-3


def pair_key(premise: str, claim: str) -> str:
    """24-hex key of a (premise, claim) pair."""
    return hashlib.sha256(f"{premise}\0{claim}".encode()).hexdigest()[:24]


def example_key(example: TrainExample) -> str:
    """The key of a training example: its premise as the trainer builds it, and its claim."""
    return pair_key(build_premise(example.evidence), example.claim)


def read_teacher(path: str | Path) -> dict[str, tuple[float, float, float]]:
    """The teacher's probabilities by key, in ``LABEL_ORDER`` (:func:`parse_teacher` of the file)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such teacher file (train.distill)")
    return parse_teacher(path.read_bytes(), path)


def parse_teacher(data: bytes, path: str | Path) -> dict[str, tuple[float, float, float]]:
    """The probabilities by key of a teacher file's bytes (``path`` names it in errors).

    Raises:
        ValueError: one line naming the file and line of the first bad row (not JSON, a missing or
            repeated key, labels other than FEVER's three, values not probabilities summing to 1),
            or the file (not gzip, damaged, empty).
    """
    out: dict[str, tuple[float, float, float]] = {}
    try:
        with gzip.open(io.BytesIO(data), "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                where = f"{path}:{n}"
                try:
                    row = json.loads(line)
                except ValueError as e:
                    raise ValueError(f"{where}: not JSON ({e})") from None
                if not isinstance(row, dict) or not isinstance(row.get("key"), str) or not row["key"]:
                    raise ValueError(f"{where}: expected an object with a string 'key'")
                probs = row.get("probs")
                if not isinstance(probs, dict) or set(probs) != set(_NAMES):
                    raise ValueError(f"{where}: 'probs' must give exactly {', '.join(_NAMES)}")
                values = tuple(probs[name] for name in _NAMES)
                if not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                    for v in values
                ):
                    raise ValueError(f"{where}: probabilities must be finite numbers >= 0")
                total = sum(values)
                if abs(total - 1.0) > _SUM_TOLERANCE:
                    raise ValueError(f"{where}: probabilities sum to {total:.6f}, not 1")
                if row["key"] in out:
                    raise ValueError(f"{where}: key {row['key']} given twice")
                out[row["key"]] = tuple(float(v) / total for v in values)  # type: ignore[assignment]
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        raise ValueError(f"{path}: not a gzipped JSON-lines teacher file ({type(e).__name__}: {e})") from None
    if not out:
        raise ValueError(f"{path}: the teacher file holds no rows")
    return out


def soft_targets(
    examples: Sequence[TrainExample], teacher: Mapping[str, tuple[float, float, float]]
) -> tuple[list[tuple[float, float, float] | None], int]:
    """Each example's soft target (None where the teacher did not score its pair) and how many lack one."""
    targets = [teacher.get(example_key(ex)) for ex in examples]
    return targets, sum(t is None for t in targets)


def targets_digest(targets: Sequence[tuple[float, float, float] | None]) -> str:
    """16-hex digest of the soft targets in order (None included), rounded to 6 decimals."""
    h = hashlib.sha256()
    for t in targets:
        h.update(b"-" if t is None else ",".join(f"{v:.6f}" for v in t).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def write_teacher(path: str | Path, rows: Iterable[tuple[str, Sequence[float]]]) -> int:
    """Write (key, probabilities in ``LABEL_ORDER``) rows atomically, sorted by key; returns the count.

    The gzip header carries no time or name, so equal rows give byte-equal files.

    Raises:
        ValueError: a key given twice (:func:`read_teacher` would refuse the file).
    """
    ordered = sorted((key, [round(float(v), 6) for v in probs]) for key, probs in rows)
    repeated = [a for (a, _), (b, _) in zip(ordered[:-1], ordered[1:], strict=True) if a == b]
    if repeated:
        raise ValueError(f"write_teacher: key {repeated[0]} given twice")

    def write(tmp: Path) -> None:
        with tmp.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as gz:
            for key, probs in ordered:
                row = {"key": key, "probs": dict(zip(_NAMES, probs, strict=True))}
                gz.write((json.dumps(row, sort_keys=True) + "\n").encode())
        os.chmod(tmp, 0o644)  # a data file, readable as any other (the temporary file is private)

    write_file_atomic(path, write)
    return len(ordered)


def distillation_loss(
    logits: Any, labels: Any, teacher: Any, has: Any, weight: float, temperature: float
) -> Any:
    """Batch mean of ``(1 - w) CE + w T^2 KL(teacher || student at T)``; CE alone where ``has`` is False.

    ``logits`` (batch x 3, float), ``labels`` (batch, class ids), ``teacher`` (batch x 3
    probabilities; any valid row where ``has`` is False), ``has`` (batch, bool): torch tensors.
    """
    import torch

    f = torch.nn.functional
    ce = f.cross_entropy(logits, labels, reduction="none")
    if not bool(has.any()):
        return ce.mean()
    log_teacher = torch.log(teacher.clamp_min(1e-12))
    if temperature != 1.0:  # the teacher's distribution at the same temperature
        log_teacher = torch.log_softmax(log_teacher / temperature, dim=-1)
    log_student = f.log_softmax(logits / temperature, dim=-1)
    kl = (log_teacher.exp() * (log_teacher - log_student)).sum(-1) * temperature**2
    return torch.where(has, (1 - weight) * ce + weight * kl, ce).mean()
