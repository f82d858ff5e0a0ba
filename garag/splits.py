"""Tune / report splits of a claims file, by groups of claims that share a gold page.

Every threshold, weight, backbone and prompt is picked on the *tune* part;
README and reports give numbers on the *report* part.  FEVER writes many
claims from one sentence and HoVer chains claims through the same pages, so a
split by claim would leak: claims that share any gold evidence page are one
group (connected components), and whole groups go to one part.  Claims with no
gold evidence (FEVER's NOT ENOUGH INFO) are groups of their own.

Groups are ordered by a seeded hash of their smallest claim id and given to
*tune* until it holds ``tune_fraction`` of the claims; the rest is *report*.
The split is written once into the repository (``data/splits/<dataset>.json``)
with the sha256 of the claims file it was made from, and is refused for any
other claims file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from garag.artifacts import file_sha256, write_json_atomic
from garag.types import Claim

PARTS = ("tune", "report")
SPLIT_FORMAT = "garag-split-v1"


class SplitError(ValueError):
    """A split file that is missing, malformed or made from other claims."""


def claim_groups(claims: Sequence[Claim]) -> list[list[Claim]]:
    """Connected components of claims linked by a shared gold evidence page, in first-seen order."""
    parent = list(range(len(claims)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with_page: dict[str, int] = {}
    for i, c in enumerate(claims):
        for group in c.evidence:
            for sid in group:
                j = first_with_page.setdefault(sid.page, i)
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[Claim]] = {}
    for i, c in enumerate(claims):
        groups.setdefault(find(i), []).append(c)
    return list(groups.values())


def _order_key(group: Sequence[Claim], seed: int) -> str:
    smallest = min(json.dumps(c.id) for c in group)
    return hashlib.sha256(f"{seed}:{smallest}".encode()).hexdigest()


def split_claims(claims: Sequence[Claim], tune_fraction: float, seed: int) -> dict[str, list[int | str]]:
    """Claim ids of the tune and report parts (whole groups, see the module docstring)."""
    if not 0 < tune_fraction < 1:
        raise ValueError(f"tune_fraction must be in (0, 1), got {tune_fraction}")
    groups = sorted(claim_groups(claims), key=lambda g: _order_key(g, seed))
    target = tune_fraction * len(claims)
    parts: dict[str, list[int | str]] = {"tune": [], "report": []}
    for g in groups:
        part = "tune" if len(parts["tune"]) < target else "report"
        parts[part].extend(c.id for c in g)
    return parts


def write_split(
    path: str | Path,
    dataset: str,
    claims_path: str | Path,
    claims: Sequence[Claim],
    tune_fraction: float,
    seed: int,
) -> dict:
    """Make the split of ``claims`` and write it (with the claims file's sha256) to ``path``."""
    parts = split_claims(claims, tune_fraction, seed)
    doc = {
        "format": SPLIT_FORMAT,
        "dataset": dataset,
        "claims_file": Path(claims_path).name,
        "claims_sha256": file_sha256(claims_path),
        "method": "claims sharing a gold evidence page are one group; seeded hash order; "
        f"tune gets whole groups until it holds {tune_fraction:g} of the claims",
        "tune_fraction": tune_fraction,
        "seed": seed,
        "groups": len(claim_groups(claims)),
        "counts": {p: len(ids) for p, ids in parts.items()},
        **parts,
    }
    write_json_atomic(path, doc)
    return doc


def read_split(path: str | Path, claims_path: str | Path) -> dict[str, frozenset]:
    """The parts of a split file as sets of claim ids.

    Raises:
        SplitError: a missing or malformed file, or one made from another claims file.
    """
    path = Path(path)
    if not path.is_file():
        raise SplitError(f"{path}: no such split file (make one with `garag split`)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SplitError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != SPLIT_FORMAT:
        raise SplitError(f"{path}: not a {SPLIT_FORMAT} split file")
    for part in PARTS:
        if not isinstance(doc.get(part), list):
            raise SplitError(f"{path}: key {part!r} missing or not a list")
    sha = file_sha256(claims_path)
    if doc.get("claims_sha256") != sha:
        raise SplitError(
            f"{path}: made from another claims file (sha256 {str(doc.get('claims_sha256'))[:12]}…, "
            f"{claims_path} has {sha[:12]}…); make a split for it with `garag split`"
        )
    return {part: frozenset(doc[part]) for part in PARTS}


def select_part(claims: Iterable[Claim], ids: frozenset) -> list[Claim]:
    """The claims whose id is in ``ids``, in file order."""
    return [c for c in claims if c.id in ids]
