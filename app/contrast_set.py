"""``garag contrast``: a dataset's claims with their twins, as a claims file ``garag evaluate`` reads.

Each twin is made from one claim by one change of :mod:`training.contrast` (by default the ones
that keep every name: a negation inserted or removed, a number or date moved, two roles swapped, a
relation replaced) and keeps the claim's gold evidence; its label follows the change's rule.  The
file holds every claim (``"contrast": {"change": "original", ...}``) and then the twins
(``"contrast": {"change": "negation", "source": <the claim's id>}``), in the dataset's own format,
so that ``garag evaluate`` and ``garag compare`` report accuracy per change type and how often a
claim and its twin are both right (``eval.contrast_metrics``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from eval.contrast_metrics import ORIGINAL
from garag.artifacts import write_text_atomic
from garag.config import Config
from garag.datasets import Dataset, dataset_from_config
from garag.errors import ErrorPolicy
from garag.types import Claim, Label
from pipeline.retrieval import build_sentence_store
from training.contrast import ChangeType, ContrastClaim, contrast_claims, sources_from_claims

# The changes that keep every name (the default); "entity" substitutes one (HoVer's NOT_SUPPORTED).
NAME_KEEPING = (
    ChangeType.NEGATION,
    ChangeType.NEGATION_REMOVED,
    ChangeType.NUMBER,
    ChangeType.ROLE_SWAP,
    ChangeType.RELATION,
)


def parse_kinds(text: str) -> tuple[ChangeType, ...]:
    """``"negation,number"`` -> the change types, in the order given.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    known = {k.value: k for k in (*NAME_KEEPING, ChangeType.ENTITY)}
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ValueError(f"--kinds: expected names among {', '.join(known)}, got {text!r}")
    return tuple(known[n] for n in names)


def write_contrast_set(
    config: Config, out: Path, kinds: Sequence[ChangeType], seed: int, progress: bool = True
) -> dict:
    """Write the contrast set of ``config``'s claims (its dataset and part) to ``out``.

    Returns:
        What was written: claims, twins per change type and label, the file.
    """
    dataset = dataset_from_config(config.data)
    claims = list(dataset.claims(ErrorPolicy(skip=config.data.skip_bad_lines)))
    store, _, _ = build_sentence_store(
        dataset, Path(config.paths.cache_dir), config.data.skip_bad_lines, progress=progress
    )
    twins = contrast_claims(sources_from_claims(claims, store), seed, kinds=kinds)
    by_id = {c.id: c for c in claims}
    rows = [_row(dataset, c, c.id, c.label, ORIGINAL, c.id) for c in claims]
    rows += [_twin_row(dataset, t, by_id[t.claim_id]) for t in twins]
    write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return {
        "contrast_set": str(out),
        "claims": len(claims),
        "twins": dict(Counter(t.change.value for t in twins)),
        "twin_labels": dict(Counter(_label(dataset, t.label) for t in twins)),
        "seed": seed,
    }


def _label(dataset: Dataset, label: Label) -> str:
    return dataset.verdict_to_label.get(label.value, label.value)


def _twin_row(dataset: Dataset, twin: ContrastClaim, source: Claim) -> dict:
    return _row(
        dataset,
        source,
        f"{source.id}~{twin.change.value}",
        _label(dataset, twin.label),
        twin.change.value,
        source.id,
        text=twin.text,
    )


def _row(
    dataset: Dataset,
    claim: Claim,
    claim_id: int | str,
    label: str | None,
    change: str,
    source: int | str,
    text: str | None = None,
) -> dict:
    """A claims-file line in the dataset's format, with the claim's gold evidence."""
    contrast = {"change": change, "source": source}
    if dataset.two_way:  # HoVer: one evidence set of [page, line]
        first = next((s for s in claim.evidence if s), ())
        return {
            "id": claim_id,
            "claim": text or claim.text,
            "label": label,
            "num_hops": claim.num_hops,
            "evidence": [[s.page, s.line] for s in first],
            "contrast": contrast,
        }
    verifiable = label != Label.NOT_ENOUGH_INFO.value and claim.verifiable
    evidence = (
        [[[None, None, s.page, s.line] for s in group] for group in claim.evidence]
        if verifiable
        else [[[None, None, None, None]]]
    )
    return {
        "id": claim_id,
        "verifiable": "VERIFIABLE" if verifiable else "NOT VERIFIABLE",
        "label": label,
        "claim": text or claim.text,
        "evidence": evidence,
        "contrast": contrast,
    }
