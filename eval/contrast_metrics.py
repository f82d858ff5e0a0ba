"""Accuracy on a contrast set (``garag contrast``): per change type, and pair consistency.

A contrast set holds claims and their twins, each twin made by one change that keeps every name
(a negation inserted or removed, a number or date moved, two roles swapped, a relation replaced)
or by an entity substitution.  A verifier that reads the evidence gets a claim and its twin both
right; one that leans on the claim's wording (Schuster et al., EMNLP 2019) does not.  Pure
functions: gold claims and predicted labels in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence

from garag.types import Claim

ORIGINAL = "original"


def contrast_metrics(claims: Sequence[Claim], predicted: Sequence[str]) -> dict:
    """Label accuracy per change type, and pair consistency: the share of twins that are right
    together with the claim they were made from (pairs whose original is in ``claims``).

    Args:
        claims: gold claims, some with ``contrast`` set (the others are ignored).
        predicted: the predicted label (the dataset's own label strings) of each claim.

    Returns:
        ``{"by_change": {change: {"n", "accuracy"}}, "changed": {"n", "accuracy"},
        "pairs": {"n", "consistent", "by_change": {change: {"n", "consistent"}}}}``.
    """
    if len(claims) != len(predicted):
        raise ValueError(f"{len(claims)} claims but {len(predicted)} predicted labels")
    right = {c.id: c.label == p for c, p in zip(claims, predicted, strict=True)}
    by_change: dict[str, list[bool]] = {}
    pairs: dict[str, list[bool]] = {}
    for c in claims:
        if c.contrast is None:
            continue
        by_change.setdefault(c.contrast.change, []).append(right[c.id])
        if c.contrast.change != ORIGINAL and c.contrast.source in right:
            pairs.setdefault(c.contrast.change, []).append(right[c.id] and right[c.contrast.source])
    changed = [r for change, rs in by_change.items() if change != ORIGINAL for r in rs]
    every_pair = [r for rs in pairs.values() for r in rs]
    return {
        "by_change": {k: _share("accuracy", v) for k, v in sorted(by_change.items())},
        "changed": _share("accuracy", changed),
        "pairs": {
            **_share("consistent", every_pair),
            "by_change": {k: _share("consistent", v) for k, v in sorted(pairs.items())},
        },
    }


def _share(name: str, values: Sequence[bool]) -> dict:
    return {"n": len(values), name: sum(values) / len(values) if values else None}


def contrast_table(metrics: dict) -> str:
    """A markdown table of :func:`contrast_metrics`' numbers."""
    lines = ["| change | n | accuracy | pairs both right |", "| --- | ---: | ---: | ---: |"]
    pair_by = metrics["pairs"]["by_change"]
    for change, m in metrics["by_change"].items():
        pair = pair_by.get(change)
        cell = f"{pair['consistent']:.3f} ({pair['n']})" if pair and pair["n"] else ""
        lines.append(f"| {change} | {m['n']} | {m['accuracy']:.3f} | {cell} |")
    ch, pa = metrics["changed"], metrics["pairs"]
    if ch["n"]:
        lines.append(
            f"| all changed | {ch['n']} | {ch['accuracy']:.3f} | {pa['consistent']:.3f} ({pa['n']}) |"
        )
    return "\n".join(lines) + "\n"
