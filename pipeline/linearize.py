"""Graph linearizer: ranked facts -> prompt text with numbered, checkable citations.

One block per fact (evidence sentence), best first::

    [1] Barack Obama | born in | Hawaii (0.912)
        Barack Obama | be | lawyer
        source (Barack_Obama, 3): Barack Obama was born in Hawaii.

The first line is the sentence's best triplet and its graph score; further
triplets follow indented, then the source sentence (de-tokenised) with its
FEVER ``(page, line)``.  A sentence without triplets shows ``page | states |
sentence``.  Blocks are added whole, in rank order, while they fit in the token
budget; a block too large is skipped (later, smaller ones may still fit).  The
returned ``citations`` map ``[i]`` to the sentence id so a verifier can check
the ids an LLM cites.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from garag.config import LinearizeConfig
from garag.text import detokenize
from garag.types import Evidence, SentenceId
from pipeline.graph_reasoning import RankedFact
from pipeline.triplets import page_subject


def approx_tokens(text: str) -> int:
    """Token estimate without a tokenizer: the larger of the word count and characters/4."""
    return max(len(text.split()), math.ceil(len(text) / 4))


@dataclass(frozen=True)
class LinearizedGraph:
    """A linearized graph.

    Attributes:
        text: the prompt block, one fact block after another.
        citations: citation number ``i`` (as written ``[i]``) -> sentence id.
        n_tokens: tokens of ``text`` by the counter used.
        skipped: facts left out by the budget (not counting those past ``max_facts``).
    """

    text: str
    citations: dict[int, SentenceId] = field(default_factory=dict)
    n_tokens: int = 0
    skipped: int = 0


def _block(i: int, fact: RankedFact, text: str, per_fact: int) -> str:
    sid = fact.sentence
    trips = fact.triplets[:per_fact]
    if trips:
        head = f"[{i}] {trips[0].subject} | {trips[0].relation} | {trips[0].object} ({fact.score:.3f})"
        more = [f"    {t.subject} | {t.relation} | {t.object}" for t in trips[1:]]
    else:
        head = f"[{i}] {page_subject(sid.page)} | states | {text} ({fact.score:.3f})"
        more = []
    return "\n".join([head, *more, f"    source ({sid.page}, {sid.line}): {text}"])


def linearize(
    facts: Sequence[RankedFact],
    texts: Mapping[SentenceId, str],
    config: LinearizeConfig,
    count_tokens: Callable[[str], int] | None = None,
) -> LinearizedGraph:
    """Top facts as numbered blocks within ``config.max_tokens``; numbering follows rank order.

    Args:
        facts: ranked facts, best first (``rank_facts``'s output).
        texts: sentence id -> stored text (PTB tokens are undone here).
        config: budget, fact limit, triplets per fact.
        count_tokens: token counter (e.g. a tokenizer's ``len(encode(s))``); default ``approx_tokens``.

    Raises:
        ValueError: a fact's sentence has no text in ``texts``.
    """
    count = count_tokens or approx_tokens
    blocks: list[str] = []
    citations: dict[int, SentenceId] = {}
    used = skipped = 0
    for fact in facts[: config.max_facts]:
        if fact.sentence not in texts:
            raise ValueError(f"texts: no sentence text for {fact.sentence}")
        block = _block(len(blocks) + 1, fact, detokenize(texts[fact.sentence]), config.triplets_per_fact)
        cost = count(block) + (1 if blocks else 0)  # the joining newline
        if used + cost > config.max_tokens:
            skipped += 1
            continue
        blocks.append(block)
        citations[len(blocks)] = fact.sentence
        used += cost
    text = "\n".join(blocks)
    return LinearizedGraph(text, citations, count(text) if text else 0, skipped)


def ranked_evidence(facts: Sequence[RankedFact], evidence: Sequence[Evidence]) -> list[Evidence]:
    """Evidence re-ordered by graph rank (best first), its ``score`` replaced by the graph score.

    For the NLI verifier, which takes ``list[Evidence]``.  Sentences of ``evidence``
    missing from ``facts`` are appended after, in their original order and score.
    """
    by_id = {ev.sentence: ev for ev in evidence}
    out = [Evidence(f.sentence, by_id[f.sentence].text, f.score) for f in facts if f.sentence in by_id]
    ranked = {f.sentence for f in facts}
    seen: set[SentenceId] = set()
    for ev in evidence:
        if ev.sentence not in ranked and ev.sentence not in seen:
            seen.add(ev.sentence)
            out.append(ev)
    return out
