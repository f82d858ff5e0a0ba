"""Synthetic compositional training examples: 2-4 FEVER train claims joined into one claim.

Multi-hop claims (HoVer) assert several facts found on different pages, and are
true only when every part is.  FEVER train claims assert one fact each, so a
verifier trained on them alone decides from the best single sentence.  This
module joins FEVER train claims into longer claims whose label follows their
parts, and whose premise holds the parts' evidence together with retrieved
distractors, so that the verifier learns to check every part in one pass.

Recipe for one example (seeded):

* Pick the number of parts ``k`` from ``parts`` and a target label:
  SUPPORTS (share ``supports_share``), else REFUTES or NOT ENOUGH INFO with
  equal odds.
* Parts: SUPPORTS claims, except that a REFUTES target replaces one part by a
  REFUTES claim.  With odds ``bridge_share`` the parts form a *bridge chain*:
  each next part is about a page whose title the previous part mentions
  ("X was born in Kolkata" + "Kolkata is the capital of West Bengal"), as in
  HoVer; otherwise the parts are random claims (a plain conjunction).
* Text: the parts joined as ``"A, and B."`` / ``"A, B, and C."``.
* Premise: every part's gold sentences (at most ``max_gold_per_part`` each) plus
  the parts' retrieved non-evidence sentences, shuffled, at most ``top_k``.
  A NOT ENOUGH INFO target drops one part's gold sentences from the premise
  (and any sentence of that part's evidence pages), so one part is unverifiable.
* Label (FEVER's three): REFUTES if a part is refuted by its evidence in the
  premise; else NOT ENOUGH INFO if a part lacks evidence; else SUPPORTS.
  HoVer's SUPPORTED is exactly SUPPORTS (every part supported).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from garag.store import SentenceStore
from garag.text import normalize_title
from garag.types import Label, SentenceId
from training.data import fetch_evidence
from verifier.base import TrainExample

# GENERATOR_VERSION (verifier/trained.py) names the folders of verifiers trained with these
# examples: raise it whenever the generator would produce other examples from the same inputs.
MAX_TITLE_WORDS = 6
_WORD_RE = re.compile(r"[\w'.&-]+")


@dataclass(frozen=True)
class Part:
    """One FEVER train claim used inside a composed claim (what the generator decided for it)."""

    claim_id: int
    text: str
    label: Label
    evidence_shown: bool


@dataclass(frozen=True)
class ComposedExample:
    """A composed claim, its parts and its training example."""

    example: TrainExample
    parts: tuple[Part, ...]
    bridge: bool


def compose_label(parts: Sequence[Part]) -> Label:
    """The label of a conjunction of parts: REFUTES beats NOT ENOUGH INFO beats SUPPORTS.

    A part counts as refuted or supported only when its evidence is in the premise.
    """
    if not parts:
        raise ValueError("a composed claim needs at least one part")
    if any(p.label is Label.REFUTES and p.evidence_shown for p in parts):
        return Label.REFUTES
    if any(not p.evidence_shown or p.label is Label.NOT_ENOUGH_INFO for p in parts):
        return Label.NOT_ENOUGH_INFO
    return Label.SUPPORTS


def join_claims(texts: Sequence[str]) -> str:
    """``["A.", "B."]`` -> ``"A, and B."``; three or more parts get commas: ``"A, B, and C."``."""
    if not texts:
        raise ValueError("nothing to join")
    parts = [t.strip().rstrip(".").strip() for t in texts]
    if len(parts) == 1:
        return parts[0] + "."
    return ", ".join(parts[:-1]) + ", and " + parts[-1] + "."


def _main_page(evidence: Sequence[SentenceId]) -> str:
    return Counter(s.page for s in evidence).most_common(1)[0][0]


class _BridgeIndex:
    """Which claims mention the title of which page (n-grams of up to six words)."""

    def __init__(self, claims: Sequence, main_pages: Sequence[str]) -> None:
        self.by_page: dict[str, list[int]] = {}
        for i, page in enumerate(main_pages):
            self.by_page.setdefault(normalize_title(page), []).append(i)
        self.mentions: list[list[str]] = []
        for i, c in enumerate(claims):
            words = [w.casefold() for w in _WORD_RE.findall(c.text.strip().rstrip("."))]
            found = []
            for n in range(1, MAX_TITLE_WORDS + 1):
                for j in range(len(words) - n + 1):
                    key = " ".join(words[j : j + n])
                    if key in self.by_page and normalize_title(main_pages[i]) != key:
                        found.append(key)
            self.mentions.append(sorted(set(found)))

    def next_parts(self, i: int) -> list[int]:
        """Claims about a page that claim ``i`` mentions."""
        out: list[int] = []
        for key in self.mentions[i]:
            out.extend(self.by_page[key])
        return out


@dataclass(frozen=True)
class _Pools:
    """The claims a composition may use (indices into the claims), their main pages, and the bridges."""

    usable: list[int]  # SUPPORTS or REFUTES, with evidence
    supports: list[int]
    refutes: list[int]
    main_pages: list[str]
    bridges: _BridgeIndex

    @classmethod
    def of(cls, claims: Sequence, most_parts: int) -> _Pools | None:
        """None when there are too few claims for a composition of ``most_parts``."""
        usable = [
            i for i, c in enumerate(claims) if c.evidence and c.label in (Label.SUPPORTS, Label.REFUTES)
        ]
        supports = [i for i in usable if claims[i].label is Label.SUPPORTS]
        refutes = [i for i in usable if claims[i].label is Label.REFUTES]
        if len(supports) < most_parts or not refutes:
            return None
        main_pages = [_main_page(c.evidence) if c.evidence else "" for c in claims]
        return cls(usable, supports, refutes, main_pages, _BridgeIndex(claims, main_pages))


def compose_examples(
    claims: Sequence,
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    n: int,
    top_k: int,
    seed: int,
    parts: Sequence[int] = (2, 3, 4),
    supports_share: float = 0.5,
    bridge_share: float = 0.5,
    max_gold_per_part: int = 2,
) -> tuple[list[ComposedExample], Counter]:
    """Generate ``n`` composed examples from FEVER train claims (see the module docstring).

    Args:
        claims: :class:`training.data.TrainClaim` objects (SUPPORTS / REFUTES with evidence).
        retrieved: per claim, retrieved sentence ids best first (distractors come from here).
        store: sentence store (texts).
        n: examples to generate.
        top_k: sentences per premise.
        seed: random seed.
        parts: allowed numbers of parts.
        supports_share: share of SUPPORTS targets.
        bridge_share: share of examples built as bridge chains (when the claims allow one).
        max_gold_per_part: gold sentences kept per part.

    Returns:
        The examples and counts by label, part count and kind.
    """
    if len(claims) != len(retrieved):
        raise ValueError(f"{len(claims)} claims but {len(retrieved)} retrieved lists")
    if not parts or min(parts) < 2:
        raise ValueError(f"parts must be >= 2, got {list(parts)}")
    if max(parts) > top_k:
        raise ValueError(f"top_k {top_k} cannot hold one sentence for each of {max(parts)} parts")
    pools = _Pools.of(claims, max(parts))
    if pools is None:
        return [], Counter({"skipped_too_few_claims": n})
    usable, supports, refutes = pools.usable, pools.supports, pools.refutes
    main_pages, bridges = pools.main_pages, pools.bridges
    rng = random.Random(seed)
    counts: Counter = Counter()
    texts: dict[SentenceId, str] = {}
    out: list[ComposedExample] = []
    attempts = 0
    while len(out) < n and attempts < 20 * n:
        attempts += 1
        k = rng.choice(list(parts))
        r = rng.random()
        target = (
            Label.SUPPORTS
            if r < supports_share
            else (Label.REFUTES if r < (1 + supports_share) / 2 else Label.NOT_ENOUGH_INFO)
        )
        chain = _bridge_chain(rng, k, usable, bridges, main_pages) if rng.random() < bridge_share else None
        idx = chain or _random_parts(rng, k, supports, main_pages)
        if idx is None:
            counts["skipped_no_parts"] += 1
            continue
        idx = list(idx)
        if target is Label.REFUTES and not any(claims[i].label is Label.REFUTES for i in idx):
            if chain is not None:  # the last link becomes a refuted claim about a page the one before names
                pages = {main_pages[j] for j in idx[:-1]}
                options = [
                    j
                    for j in bridges.next_parts(idx[-2])
                    if claims[j].label is Label.REFUTES and main_pages[j] not in pages
                ]
                pos = k - 1
            if chain is None or not options:
                chain, pos = None, rng.randrange(k)
                pages = {main_pages[j] for j in idx if j != idx[pos]}
                options = [j for j in refutes if main_pages[j] not in pages]
            idx[pos] = rng.choice(options)
        elif target is Label.SUPPORTS and any(claims[i].label is Label.REFUTES for i in idx):
            counts["skipped_chain_not_supported"] += 1
            continue
        hidden = rng.randrange(k) if target is Label.NOT_ENOUGH_INFO else None
        if hidden is not None and claims[idx[hidden]].label is Label.REFUTES:
            # keep the refuted part visible, so the label stays NOT ENOUGH INFO only if none is shown
            refuted = [p for p in range(k) if claims[idx[p]].label is Label.REFUTES]
            hidden = refuted[0]
            if len(refuted) > 1:
                counts["skipped_two_refuted"] += 1
                continue
        example = _premise_example(
            claims, retrieved, store, texts, idx, hidden, top_k, max_gold_per_part, rng
        )
        if example is None:
            counts["skipped_premise"] += 1
            continue
        out.append(ComposedExample(example[0], example[1], chain is not None))
        counts[example[0].label.value] += 1
        counts[f"parts_{k}"] += 1
        counts["bridge" if chain is not None else "conjunction"] += 1
    return out, counts


def _random_parts(
    rng: random.Random, k: int, pool: Sequence[int], main_pages: Sequence[str]
) -> list[int] | None:
    """``k`` claims about ``k`` different pages."""
    for _ in range(10):
        idx = rng.sample(list(pool), k)
        if len({main_pages[i] for i in idx}) == k:
            return idx
    return None


def _bridge_chain(
    rng: random.Random, k: int, pool: Sequence[int], bridges: _BridgeIndex, main_pages: Sequence[str]
) -> list[int] | None:
    """``k`` claims where each next one is about a page the previous one mentions."""
    for _ in range(20):
        chain = [rng.choice(pool)]
        while len(chain) < k:
            pages = {main_pages[i] for i in chain}
            options = [j for j in bridges.next_parts(chain[-1]) if main_pages[j] not in pages]
            if not options:
                break
            chain.append(rng.choice(options))
        if len(chain) == k:
            return chain
    return None


def _premise_example(
    claims: Sequence,
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    texts: dict[SentenceId, str],
    idx: Sequence[int],
    hidden: int | None,
    top_k: int,
    max_gold_per_part: int,
    rng: random.Random,
) -> tuple[TrainExample, tuple[Part, ...]] | None:
    gold: list[SentenceId] = []
    banned: set[SentenceId] = set()
    banned_pages: set[str] = set()
    for p, i in enumerate(idx):
        ev = list(claims[i].evidence)
        banned.update(ev)
        if p == hidden:
            banned_pages.update(s.page for s in ev)
        else:
            gold.extend(s for s in ev[:max_gold_per_part] if s not in gold)
    if len(gold) > top_k:
        return None
    gold = [s for s in gold if s.page not in banned_pages or s in _shown(claims, idx, hidden)]
    distractors: list[SentenceId] = []
    lists = [list(retrieved[i]) for i in idx]
    depth = 0
    while len(gold) + len(distractors) < top_k and any(depth < len(lst) for lst in lists):
        for lst in lists:
            if depth < len(lst):
                s = lst[depth]
                if s not in banned and s.page not in banned_pages and s not in distractors and s.page:
                    distractors.append(s)
        depth += 1
    chosen = gold + distractors[: max(0, top_k - len(gold))]
    rng.shuffle(chosen)
    evidence = fetch_evidence(store, chosen, texts)
    if not set(gold) <= {e.sentence for e in evidence}:
        return None  # a gold sentence without text
    parts = tuple(Part(claims[i].id, claims[i].text, claims[i].label, p != hidden) for p, i in enumerate(idx))
    label = compose_label(parts)
    claim = join_claims([claims[i].text for i in idx])
    ids = "+".join(str(claims[i].id) for i in idx)
    return TrainExample(claim=claim, evidence=tuple(evidence), label=label, claim_id=f"c:{ids}"), parts


def _shown(claims: Sequence, idx: Sequence[int], hidden: int | None) -> set[SentenceId]:
    """Gold sentences of the visible parts (kept even when they sit on the hidden part's page)."""
    return {s for p, i in enumerate(idx) if p != hidden for s in claims[i].evidence}


def partial_examples(
    claims: Sequence,
    store: SentenceStore,
    n: int,
    seed: int,
    parts: Sequence[int] = (2, 3),
    bridge_share: float = 0.5,
    max_gold_per_part: int = 2,
) -> tuple[list[TrainExample], Counter]:
    """Composed claims read one part's evidence at a time, for a per-sentence verifier.

    A verifier trained on FEVER's single facts reads a sentence that supports one part of a claim
    of several ("X studied at Y, and Y is in Z." against "X studied at Y.") as refuting it, since
    a premise that says something else of the claim's subject was a refutation in its data; the
    claim aggregator then sees contradictions where a true chain's parts are each supported.  Here
    ``n`` claims of 2-3 train claims (about different pages; with odds ``bridge_share`` a bridge
    chain from a SUPPORTS claim, each next part any claim about a page the previous one names, so
    some are refuted) are joined as ``"A, and B."``, half of them with one part replaced by a
    REFUTES claim, and each part's gold sentences (at most ``max_gold_per_part``) are the premise
    of one example:

    * a supported part's sentences: NOT ENOUGH INFO (they say nothing of the other parts);
    * a refuted part's sentences: REFUTES (a refuted part refutes the conjunction).

    No example is SUPPORTS: no single part's evidence supports the whole.  Deterministic for a seed.

    Returns:
        The examples and counts by label, part count and kind.
    """
    if not parts or min(parts) < 2:
        raise ValueError(f"parts must be >= 2, got {list(parts)}")
    pools = _Pools.of(claims, max(parts))
    if pools is None:
        return [], Counter({"skipped_too_few_claims": n})
    supports, main_pages = pools.supports, pools.main_pages
    rng, counts = random.Random(seed), Counter()
    texts: dict[SentenceId, str] = {}
    out: list[TrainExample] = []
    made = 0
    for _ in range(20 * n):
        if made >= n:
            break
        k = rng.choice(list(parts))
        chain = (
            _bridge_chain(rng, k, supports, pools.bridges, main_pages)
            if rng.random() < bridge_share
            else None
        )
        idx = list(chain or _random_parts(rng, k, supports, main_pages) or [])
        if not idx:
            counts["skipped_no_parts"] += 1
            continue
        if rng.random() < 0.5:  # one part refuted, about a page no other part is about
            pos = rng.randrange(k)
            pages = {main_pages[j] for p, j in enumerate(idx) if p != pos}
            options = [j for j in pools.refutes if main_pages[j] not in pages]
            if not options:
                counts["skipped_no_refuted_part"] += 1
                continue
            idx[pos] = rng.choice(options)
        premises = [fetch_evidence(store, claims[i].evidence[:max_gold_per_part], texts) for i in idx]
        if not all(premises):
            counts["skipped_premise"] += 1
            continue
        text = join_claims([claims[i].text for i in idx])
        ids = "+".join(str(claims[i].id) for i in idx)
        for i, premise in zip(idx, premises, strict=True):
            label = Label.REFUTES if claims[i].label is Label.REFUTES else Label.NOT_ENOUGH_INFO
            out.append(TrainExample(claim=text, evidence=premise, label=label, claim_id=f"p:{ids}"))
            counts[label.value] += 1
        made += 1
        counts[f"parts_{k}"] += 1
        counts["bridge" if chain is not None else "conjunction"] += 1
    counts["claims"] = made
    return out, counts
