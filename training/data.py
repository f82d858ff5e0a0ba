"""Training data for the verifier from FEVER-format files.

Recipe (documented in the README, "Training the verifier"):

* SUPPORTS / REFUTES: each train claim with its gold sentences from
  ``train_pairs.jsonl`` (rows of one claim grouped).  The premise is built
  as at test time: the gold sentences plus ``distractors`` retrieved
  non-evidence sentences, in retrieval order (a gold sentence the retriever
  missed takes a seeded random slot), at most ``verifier.top_k`` sentences.
* NOT ENOUGH INFO (FEVER has no evidence for it; Nie et al. 2019): for a
  share ``nei_per_claim`` of the claims, the claim paired with
    - its top ``nei_sentences`` retrieved sentences that are *not* its evidence
      (hard negatives from garag's own retrievers; share ``hard_negative_share``), or
    - the gold evidence of a different, random claim (the rest).
* Validation: ``val_fraction`` of the claims, split by groups of claims that
  share their main evidence page (FEVER writes many mutated claims from one
  sentence, so a split by row would leak).  paper_dev claims are never used:
  any train claim equal to a claim of the evaluation file is dropped.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from garag.errors import ErrorPolicy, InputError
from garag.store import SentenceStore
from garag.types import Evidence, Label, SentenceId
from training.train import TrainExample


@dataclass(frozen=True)
class TrainClaim:
    """A FEVER train claim with all its gold sentences (rows of train_pairs grouped)."""

    id: int
    text: str
    label: Label
    evidence: tuple[SentenceId, ...]


def _norm_claim(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def read_train_pairs(path: str | Path, policy: ErrorPolicy | None = None) -> list[TrainClaim]:
    """Read ``train_pairs.jsonl`` rows and group them by claim text, in first-seen order.

    Raises:
        InputError: naming file and line for bad JSON, missing fields, an unknown label,
            or one claim given two labels.
    """
    path, policy = Path(path), policy or ErrorPolicy()
    grouped: dict[str, tuple[Label, list[SentenceId]]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                try:
                    row = json.loads(raw)
                except json.JSONDecodeError as e:
                    raise InputError(
                        str(path), lineno, f"not valid JSON ({e.msg})", kind="bad_json"
                    ) from None
                for key, typ in (("claim", str), ("label", str), ("page", str), ("line", int)):
                    if not isinstance(row.get(key), typ):
                        raise InputError(
                            str(path), lineno, f"field {key!r} missing or not {typ.__name__}", kind="bad_row"
                        )
                if row["label"] not in ("SUPPORTS", "REFUTES"):
                    raise InputError(
                        str(path), lineno, f"unknown label {row['label']!r}", kind="unknown_label"
                    )
                label = Label(row["label"])
                entry = grouped.setdefault(row["claim"], (label, []))
                if entry[0] is not label:
                    raise InputError(
                        str(path),
                        lineno,
                        f"claim {row['claim'][:60]!r} has two labels",
                        kind="label_conflict",
                    )
            except InputError as e:
                policy.handle(e)
                continue
            sid = SentenceId(row["page"], row["line"])
            if sid not in entry[1]:
                entry[1].append(sid)
    return [TrainClaim(i, text, lab, tuple(ev)) for i, (text, (lab, ev)) in enumerate(grouped.items())]


def drop_eval_claims(
    claims: Sequence[TrainClaim], eval_claims: Iterable[str]
) -> tuple[list[TrainClaim], int]:
    """Remove train claims whose text equals an evaluation claim (case and spacing ignored)."""
    banned = {_norm_claim(c) for c in eval_claims}
    kept = [c for c in claims if _norm_claim(c.text) not in banned]
    return kept, len(claims) - len(kept)


def split_by_page(
    claims: Sequence[TrainClaim], val_fraction: float, seed: int
) -> tuple[list[TrainClaim], list[TrainClaim]]:
    """Split claims into train/validation by groups sharing their main evidence page."""
    groups: dict[str, list[TrainClaim]] = {}
    for c in claims:
        main = Counter(s.page for s in c.evidence).most_common(1)[0][0]
        groups.setdefault(main, []).append(c)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    target = val_fraction * len(claims)
    val: list[TrainClaim] = []
    train: list[TrainClaim] = []
    for key in keys:
        (val if len(val) < target else train).extend(groups[key])
    return train, val


def fetch_evidence(
    store: SentenceStore, sids: Iterable[SentenceId], texts: dict[SentenceId, str]
) -> tuple[Evidence, ...]:
    """The sentences with their text, in order (``texts`` caches texts; ids without text are skipped)."""
    out = []
    for sid in sids:
        text = texts.get(sid)
        if text is None:
            sent = store.get(sid)
            if sent is None:
                continue
            text = texts[sid] = sent.text
        out.append(Evidence(sid, text))
    return tuple(out)


def hard_negatives(claim: TrainClaim, ranked: Sequence[SentenceId]) -> list[SentenceId]:
    """The retrieved sentences that are not the claim's evidence, best first: what a NOT ENOUGH INFO
    premise and a gold premise's distractors are made of."""
    gold = set(claim.evidence)
    return [s for s in ranked if s not in gold and s.page]


def gold_premise(
    claim: TrainClaim,
    ranked: Sequence[SentenceId],
    top_k: int,
    distractors: int,
    rng: random.Random,
) -> list[SentenceId]:
    """A claim's gold sentences plus ``distractors`` retrieved non-evidence ones, in retrieval order
    (a gold sentence the retriever missed takes a random slot), at most ``top_k``: the premise of its
    training example, built as the pipeline reads a claim."""
    gold = list(claim.evidence[:top_k])
    gold_set = set(claim.evidence)
    negatives = hard_negatives(claim, ranked)
    order = [s for s in ranked if s in gold_set][:top_k]
    missing = [s for s in gold if s not in order]
    chosen = set(order + negatives[: max(0, min(distractors, top_k - len(gold)))])
    premise = [s for s in ranked if s in chosen]  # retrieval order, as at test time
    for s in missing:
        premise.insert(rng.randint(0, len(premise)), s)
    return premise[:top_k]


def build_examples(
    claims: Sequence[TrainClaim],
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    top_k: int,
    distractors: int,
    nei_per_claim: float,
    hard_negative_share: float,
    seed: int,
    nei_sentences: int | None = None,
) -> tuple[list[TrainExample], Counter]:
    """Build verifier examples (see the module docstring for the recipe).

    Args:
        claims: train claims.
        retrieved: per claim, retrieved sentence ids best first (the project's own retrieval).
        store: sentence store (texts).
        top_k: sentences per premise.
        distractors: retrieved non-evidence sentences added to a gold premise.
        nei_per_claim: NEI examples per claim (0.5 = one for every second claim).
        hard_negative_share: share of NEI examples made of retrieved non-evidence.
        seed: random seed.
        nei_sentences: sentences in a hard-negative NEI premise (None = ``top_k``).

    Returns:
        The examples (S/R first per claim, then its NEI example if any) and counts by kind.
    """
    if len(claims) != len(retrieved):
        raise ValueError(f"{len(claims)} claims but {len(retrieved)} retrieved lists")
    rng = random.Random(seed)
    texts: dict[SentenceId, str] = {}
    counts: Counter = Counter()
    out: list[TrainExample] = []
    for claim, ranked in zip(claims, retrieved, strict=True):
        gold_set = set(claim.evidence)
        negatives = hard_negatives(claim, ranked)
        ev = fetch_evidence(store, gold_premise(claim, ranked, top_k, distractors, rng), texts)
        if any(e.sentence in gold_set for e in ev):
            out.append(TrainExample(claim=claim.text, evidence=ev, label=claim.label, claim_id=claim.id))
            counts[claim.label.value] += 1
        else:
            counts["skipped_no_gold_text"] += 1
        if rng.random() >= nei_per_claim:
            continue
        if rng.random() < hard_negative_share and negatives:
            nei_ids = negatives[: min(top_k, nei_sentences or top_k)]
            counts["nei_hard_negative"] += 1
        else:
            other = claims[rng.randrange(len(claims))]
            if other.id == claim.id or len(claims) < 2:
                continue
            nei_ids = list(other.evidence[:top_k])
            counts["nei_other_claim"] += 1
        nei_ev = fetch_evidence(store, nei_ids, texts)
        if nei_ev:
            out.append(
                TrainExample(
                    claim=claim.text, evidence=nei_ev, label=Label.NOT_ENOUGH_INFO, claim_id=claim.id
                )
            )
    return out, counts


def aggregator_instances(
    claims: Sequence[TrainClaim],
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    top_k: int,
) -> list[tuple[str, tuple[Evidence, ...], Label]]:
    """Claim-level instances for fitting the claim aggregator (see verifier/claim_aggregator.py).

    Per claim: its top ``top_k`` retrieved sentences as retrieved, with the claim's gold label;
    and the top ``top_k`` once its gold evidence sentences are removed, labelled NOT ENOUGH INFO.

    Returns:
        ``(claim text, read evidence best first, label)`` triples, two per claim.
    """
    if len(claims) != len(retrieved):
        raise ValueError(f"{len(claims)} claims but {len(retrieved)} retrieved lists")
    texts: dict[SentenceId, str] = {}
    out: list[tuple[str, tuple[Evidence, ...], Label]] = []
    for claim, ranked in zip(claims, retrieved, strict=True):
        gold = set(claim.evidence)
        out.append((claim.text, fetch_evidence(store, ranked, texts)[:top_k], claim.label))
        without = [s for s in ranked if s not in gold]
        out.append((claim.text, fetch_evidence(store, without, texts)[:top_k], Label.NOT_ENOUGH_INFO))
    return out
