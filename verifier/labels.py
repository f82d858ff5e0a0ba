"""Mapping a classifier's output indices to FEVER verdicts (pure functions).

A checkpoint's ``id2label`` may use NLI names (entailment / neutral /
contradiction), FEVER names (SUPPORTS / NOT ENOUGH INFO / REFUTES) or
anonymous ``LABEL_0..`` names.  The first two are recognised; anonymous names
need an explicit ``verifier.label_map``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from garag.types import Label

# Column order of every (n, 3) probability array in the verifier package.
LABEL_ORDER: tuple[Label, Label, Label] = (Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES)

# Names are compared after normalisation: case folded, "_"/"-" as spaces, runs of spaces collapsed.
_KNOWN_NAMES: dict[str, Label] = {
    "entailment": Label.SUPPORTS,
    "entail": Label.SUPPORTS,
    "entails": Label.SUPPORTS,
    "entailed": Label.SUPPORTS,
    "supports": Label.SUPPORTS,
    "support": Label.SUPPORTS,
    "supported": Label.SUPPORTS,
    "neutral": Label.NOT_ENOUGH_INFO,
    "not enough info": Label.NOT_ENOUGH_INFO,
    "not enough information": Label.NOT_ENOUGH_INFO,
    "nei": Label.NOT_ENOUGH_INFO,
    "contradiction": Label.REFUTES,
    "contradict": Label.REFUTES,
    "contradicts": Label.REFUTES,
    "contradicted": Label.REFUTES,
    "refutes": Label.REFUTES,
    "refute": Label.REFUTES,
    "refuted": Label.REFUTES,
}
_ANONYMOUS = re.compile(r"^label ?\d+$")
_TWO_WAY = {"not entailment", "non entailment"}


def normalize_label_name(name: str) -> str:
    """Case-fold a label name and treat ``_`` and ``-`` as spaces."""
    return re.sub(r"\s+", " ", re.sub(r"[_-]", " ", str(name))).strip().casefold()


def recognize_label(name: str) -> Label | None:
    """The FEVER verdict a usual label name stands for, or None when it is not recognised."""
    return _KNOWN_NAMES.get(normalize_label_name(name))


def resolve_label_map(
    id2label: Mapping[int | str, str], label_map: Mapping[str, str] | None = None
) -> dict[int, Label]:
    """Map each output index of a classifier to a FEVER verdict.

    Args:
        id2label: the checkpoint's ``config.id2label`` (keys may be strings, as in JSON).
        label_map: ``verifier.label_map``: model label name -> FEVER label string.
            Its entries override name recognition; keys are matched case-insensitively.

    Returns:
        Output index -> Label, covering all three verdicts (several indices may
        share a verdict; their probabilities are then added).

    Raises:
        ValueError: anonymous names without a map, unrecognised names, map keys
            the model does not have, or a mapping that misses a verdict.
    """
    if not id2label:
        raise ValueError("the model has no id2label; set verifier.label_map and check the checkpoint")
    names = {int(i): str(n) for i, n in id2label.items()}
    explicit: dict[str, Label] = {}
    for key, value in (label_map or {}).items():
        try:
            explicit[normalize_label_name(key)] = Label(value)
        except ValueError:
            raise ValueError(
                f"verifier.label_map.{key}: {value!r} is not one of {[lab.value for lab in Label]}"
            ) from None
    model_names = {normalize_label_name(n) for n in names.values()}
    unused = sorted(k for k in explicit if k not in model_names)
    if unused:
        raise ValueError(
            f"verifier.label_map names {unused} that the model does not have; "
            f"the model's labels are {sorted(names.values())}"
        )
    resolved: dict[int, Label] = {}
    unknown: list[str] = []
    for index, name in sorted(names.items()):
        key = normalize_label_name(name)
        label = explicit.get(key) or _KNOWN_NAMES.get(key)
        if label is None:
            unknown.append(name)
        else:
            resolved[index] = label
    if unknown:
        if all(_ANONYMOUS.match(normalize_label_name(n)) for n in unknown):
            hint = (
                f"the model's labels {sorted(names.values())} carry no meaning; set verifier.label_map, "
                'e.g. {"LABEL_0": "SUPPORTS", "LABEL_1": "NOT ENOUGH INFO", "LABEL_2": "REFUTES"} '
                "(check the model card for the real order)"
            )
        else:
            hint = (
                f"unrecognised model label(s) {unknown}; set verifier.label_map to map each of "
                f"{sorted(names.values())} to SUPPORTS, NOT ENOUGH INFO or REFUTES"
            )
        raise ValueError(hint)
    missing = [lab.value for lab in LABEL_ORDER if lab not in resolved.values()]
    if missing:
        two_way = any(normalize_label_name(n) in _TWO_WAY for n in names.values())
        extra = (
            "; a 2-way (entailment / not_entailment) model cannot tell REFUTES from NOT ENOUGH INFO, "
            "use a 3-way NLI checkpoint"
            if two_way
            else ""
        )
        mapping = {names[i]: lab.value for i, lab in resolved.items()}
        raise ValueError(f"the label mapping {mapping} has no {missing}{extra}")
    return resolved


def to_label_probs(probs: np.ndarray, index_to_label: Mapping[int, Label]) -> np.ndarray:
    """Model-order probabilities ``(n, num_labels)`` -> verdict probabilities ``(n, 3)`` in LABEL_ORDER."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] != len(index_to_label):
        raise ValueError(f"expected probabilities of shape (n, {len(index_to_label)}), got {probs.shape}")
    out = np.zeros((probs.shape[0], len(LABEL_ORDER)), dtype=np.float64)
    for index, label in index_to_label.items():
        out[:, LABEL_ORDER.index(label)] += probs[:, index]
    return out
