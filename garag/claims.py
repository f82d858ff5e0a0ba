"""Readers for claim files: FEVER's official format and HoVer's.

FEVER (train/dev/test)::

    {"id": 1, "verifiable": "VERIFIABLE", "label": "SUPPORTS", "claim": "...",
     "evidence": [[[ann_id, ev_id, "Page", 3], ...], ...]}

NEI claims carry ``[[[ann_id, null, null, null]]]``; test files have neither
``label`` nor ``evidence``.  HoVer::

    {"id": 96, "claim": "...", "label": "SUPPORTED", "num_hops": 2,
     "evidence": [["Page", 0], ["Other_page", 0]]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from garag.errors import ErrorPolicy, InputError
from garag.jsonl import iter_text_lines
from garag.types import Claim, ContrastOf, SentenceId

FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
HOVER_LABELS = ("SUPPORTED", "NOT_SUPPORTED")


def is_claim_id(value: object) -> bool:
    """A claim id is an integer or a string (not a bool, list or mapping)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def is_line_number(value: object) -> bool:
    """A sentence line number is an integer >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _iter_json_lines(path: Path, policy: ErrorPolicy) -> Iterator[tuple[int, dict]]:
    for lineno, raw in iter_text_lines(path, policy):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            policy.handle(InputError(str(path), lineno, f"not valid JSON ({e.msg})"), "bad_json")
            continue
        if not isinstance(obj, dict):
            policy.handle(InputError(str(path), lineno, "a claim line must be a JSON object"), "bad_json")
            continue
        yield lineno, obj


def _check_common(obj: dict, path: Path, lineno: int, labels: tuple[str, ...]) -> None:
    if "id" not in obj:
        raise InputError(str(path), lineno, "claim has no 'id'")
    if not is_claim_id(obj["id"]):
        raise InputError(str(path), lineno, f"claim id {obj['id']!r} must be an integer or a string")
    if not isinstance(obj.get("claim"), str):
        raise InputError(str(path), lineno, f"claim {obj['id']!r}: field 'claim' must be a string")
    label = obj.get("label")
    if label is not None and label not in labels:
        raise InputError(
            str(path),
            lineno,
            f"claim {obj['id']!r}: unknown label {label!r} (expected one of {labels})",
            kind="unknown_label",
        )


def _evidence_list(obj: dict, path: Path, lineno: int, of: str) -> list:
    """The claim's ``evidence`` field (absent or empty: ``[]``), which must be a list ``of`` items."""
    evidence = obj.get("evidence") or []
    if not isinstance(evidence, list):
        raise InputError(str(path), lineno, f"claim {obj['id']!r}: evidence is not a list of {of}")
    return evidence


def _fever_evidence(obj: dict, path: Path, lineno: int) -> tuple[tuple[SentenceId, ...], ...]:
    sets = []
    for group in _evidence_list(obj, path, lineno, "evidence sets"):
        if not isinstance(group, list):
            raise InputError(str(path), lineno, f"claim {obj['id']!r}: evidence set is not a list")
        items = []
        for item in group:
            if not isinstance(item, list) or len(item) != 4:
                raise InputError(
                    str(path),
                    lineno,
                    f"claim {obj['id']!r}: evidence item {item!r} is not [ann_id, ev_id, page, line]",
                )
            page, line = item[2], item[3]
            if page is None or line is None:
                continue  # NEI placeholder
            if not isinstance(page, str) or not is_line_number(line):
                raise InputError(str(path), lineno, f"claim {obj['id']!r}: bad evidence pointer {item!r}")
            items.append(SentenceId(page, line))
        if items:
            sets.append(tuple(items))
    return tuple(sets)


def _read_claims(
    path: str | Path,
    policy: ErrorPolicy | None,
    labels: tuple[str, ...],
    build: Callable[[dict, Path, int], Claim],
) -> Iterator[Claim]:
    """Shared loop: JSON lines, common checks, repeated ids; ``build`` parses the format's evidence."""
    path, policy = Path(path), policy or ErrorPolicy()
    seen: set = set()
    for lineno, obj in _iter_json_lines(path, policy):
        try:
            _check_common(obj, path, lineno, labels)
            if obj["id"] in seen:
                raise InputError(str(path), lineno, f"claim id {obj['id']!r} repeated", kind="repeated_id")
            claim = build(obj, path, lineno)
        except InputError as e:
            policy.handle(e)
            continue
        seen.add(obj["id"])
        yield claim


def _contrast(obj: dict, path: Path, lineno: int) -> ContrastOf | None:
    """The optional ``"contrast": {"change": ..., "source": ...}`` of a contrast set's claim."""
    value = obj.get("contrast")
    if value is None:
        return None
    if not (
        isinstance(value, dict)
        and set(value) == {"change", "source"}
        and isinstance(value["change"], str)
        and value["change"]
        and is_claim_id(value["source"])
    ):
        raise InputError(
            str(path), lineno, f"claim {obj['id']!r}: contrast {value!r} is not {{change: NAME, source: ID}}"
        )
    return ContrastOf(value["change"], value["source"])


def _fever_claim(obj: dict, path: Path, lineno: int) -> Claim:
    evidence = _fever_evidence(obj, path, lineno)
    return Claim(
        id=obj["id"],
        text=obj["claim"],
        label=obj.get("label"),
        evidence=evidence,
        contrast=_contrast(obj, path, lineno),
    )


def _hover_claim(obj: dict, path: Path, lineno: int) -> Claim:
    evidence = _evidence_list(obj, path, lineno, "[page, line]")
    hops = obj.get("num_hops")
    if hops is not None and not (is_line_number(hops) and hops >= 1):
        raise InputError(
            str(path), lineno, f"claim {obj['id']!r}: num_hops {hops!r} is not a positive integer"
        )
    items = []
    for item in evidence:
        if not (
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and is_line_number(item[1])
        ):
            raise InputError(
                str(path), lineno, f"claim {obj['id']!r}: evidence item {item!r} is not [page, line]"
            )
        items.append(SentenceId(item[0], item[1]))
    return Claim(
        id=obj["id"],
        text=obj["claim"],
        label=obj.get("label"),
        evidence=(tuple(items),) if items else (),
        num_hops=hops,
        contrast=_contrast(obj, path, lineno),
    )


def read_fever_claims(path: str | Path, policy: ErrorPolicy | None = None) -> Iterator[Claim]:
    """Stream claims from a FEVER-format file (labels and evidence optional).

    Raises:
        InputError: naming file and line for malformed JSON, a missing field,
            an unknown label, a repeated claim id or a bad evidence pointer.
    """
    return _read_claims(path, policy, FEVER_LABELS, _fever_claim)


def read_hover_claims(path: str | Path, policy: ErrorPolicy | None = None) -> Iterator[Claim]:
    """Stream claims from HoVer's format (one evidence set of ``[page, line]`` pairs); errors as FEVER's,
    and a ``num_hops`` that is not a positive integer."""
    return _read_claims(path, policy, HOVER_LABELS, _hover_claim)
