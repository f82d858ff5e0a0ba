"""Accuracy on a contrast set (``garag contrast``): per change type, and pair consistency.

A contrast set holds claims and their twins, each twin made by one change that keeps every name
(a negation inserted or removed, a number or date moved, two roles swapped, a relation replaced)
or by an entity substitution.  A verifier that reads the evidence gets a claim and its twin both
right; one that leans on the claim's wording (Schuster et al., EMNLP 2019) does not.  A twin's
accuracy is also given apart for twins whose original is right and whose original is wrong: a twin
that is right only with its original fails where the evidence is misread, not where the change
is (then twins cannot beat their originals).  Pure functions: gold claims and predicted labels in,
numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence

from garag.types import Claim

ORIGINAL = "original"


def contrast_metrics(claims: Sequence[Claim], predicted: Sequence[str]) -> dict:
    """Label accuracy per change type, and pair consistency: the share of twins that are right
    together with the claim they were made from (pairs whose original is in ``claims``), and the
    twins' accuracy where that claim is right and where it is wrong.

    Args:
        claims: gold claims, some with ``contrast`` set (the others are ignored).
        predicted: the predicted label (the dataset's own label strings) of each claim.

    Returns:
        ``{"by_change": {change: {"n", "accuracy"}}, "changed": {"n", "accuracy"},
        "pairs": {"n", "consistent", "if_original_right": {"n", "accuracy"},
        "if_original_wrong": {"n", "accuracy"}, "by_change": {change: the same}}}``.
    """
    if len(claims) != len(predicted):
        raise ValueError(f"{len(claims)} claims but {len(predicted)} predicted labels")
    right = {c.id: c.label == p for c, p in zip(claims, predicted, strict=True)}
    by_change: dict[str, list[bool]] = {}
    pairs: dict[str, list[tuple[bool, bool]]] = {}  # (the original right, the twin right)
    for c in claims:
        if c.contrast is None:
            continue
        by_change.setdefault(c.contrast.change, []).append(right[c.id])
        if c.contrast.change != ORIGINAL and c.contrast.source in right:
            pairs.setdefault(c.contrast.change, []).append((right[c.contrast.source], right[c.id]))
    changed = [r for change, rs in by_change.items() if change != ORIGINAL for r in rs]
    every_pair = [r for rs in pairs.values() for r in rs]
    return {
        "by_change": {k: _share("accuracy", v) for k, v in sorted(by_change.items())},
        "changed": _share("accuracy", changed),
        "pairs": {
            **_pair_shares(every_pair),
            "by_change": {k: _pair_shares(v) for k, v in sorted(pairs.items())},
        },
    }


def _pair_shares(pairs: Sequence[tuple[bool, bool]]) -> dict:
    return {
        **_share("consistent", [o and t for o, t in pairs]),
        "if_original_right": _share("accuracy", [t for o, t in pairs if o]),
        "if_original_wrong": _share("accuracy", [t for o, t in pairs if not o]),
    }


def _share(name: str, values: Sequence[bool]) -> dict:
    return {"n": len(values), name: sum(values) / len(values) if values else None}


def contrast_table(metrics: dict) -> str:
    """A markdown table of :func:`contrast_metrics`' numbers."""
    lines = [
        "| change | n | accuracy | pairs both right | right if the original is right | if it is wrong |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    pair_by = metrics["pairs"]["by_change"]
    for change, m in metrics["by_change"].items():
        lines.append(f"| {change} | {m['n']} | {m['accuracy']:.3f} | {_pair_cells(pair_by.get(change))} |")
    ch = metrics["changed"]
    if ch["n"]:
        lines.append(f"| all changed | {ch['n']} | {ch['accuracy']:.3f} | {_pair_cells(metrics['pairs'])} |")
    return "\n".join(lines) + "\n"


def _pair_cells(pair: dict | None) -> str:
    if not pair or not pair["n"]:
        return " | ".join(["", "", ""])
    return " | ".join(
        f"{m[key]:.3f} ({m['n']})" if m["n"] else ""
        for m, key in (
            (pair, "consistent"),
            (pair["if_original_right"], "accuracy"),
            (pair["if_original_wrong"], "accuracy"),
        )
    )
