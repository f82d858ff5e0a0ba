"""Where systems win, which retriever found the evidence, explanation checks and cost (pure functions).

Inputs are gold ``Claim`` objects and the per-claim prediction records that
``eval.compare`` writes (``id``, ``predicted_label``, ``dataset_label``,
``explanation``, ``evidence_read``, ``retrieved``, ``per_retriever``,
``seconds``, optionally ``llm``), paired by position.  No I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from eval.retrieval_metrics import avg_retrieved_sentences, fully_supported
from garag.types import Claim, SentenceId

GRAPH_RETRIEVER = "graal"
CUTOFFS = (1, 2, 5, 10, 20, 50, 100)
# "(Page, 3)" as written by verifier.explain.cite; page ids may hold one level of parentheses (HoVer titles).
_CITE = re.compile(r"\(((?:[^()]|\([^()]*\))+?), (\d+)\)")
# quoted sentence text ('"Carlos Santana (born July 20, 1947) is..."') is not a citation
_QUOTED = re.compile(r'"[^"]*"')


def _ids(items: Sequence) -> list[SentenceId]:
    return [SentenceId(p, int(n)) for p, n in items]


def _check_pairing(claims: Sequence[Claim], records: Sequence[Mapping]) -> None:
    if len(claims) != len(records):
        raise ValueError(f"{len(claims)} claims but {len(records)} records")
    for i, (c, r) in enumerate(zip(claims, records, strict=True)):
        if r.get("id") != c.id:
            raise ValueError(f"record {i} has id {r.get('id')!r}, claim {i} has id {c.id!r}")


# --- slices


def evidence_shape(claim: Claim) -> tuple[str, str]:
    """``(sentences, pages)``: "one"/"several" for the smallest gold set, "none" for NEI claims.

    A claim is "one sentence" when some gold set has a single sentence (one
    sentence suffices), "one page" when some gold set lies within one page.
    """
    groups = [g for g in claim.evidence if g]
    if not groups:
        return "none", "none"
    sentences = "one" if min(len(g) for g in groups) == 1 else "several"
    pages = "one" if min(len({s.page for s in g}) for g in groups) == 1 else "several"
    return sentences, pages


def slice_keys(claim: Claim) -> list[str]:
    """The slices a claim belongs to: evidence sentences, evidence pages, gold label, hops."""
    sentences, pages = evidence_shape(claim)
    keys = []
    if sentences != "none":
        keys.append(f"evidence in {sentences} sentence" + ("s" if sentences == "several" else ""))
        keys.append(f"evidence on {pages} page" + ("s" if pages == "several" else ""))
    keys.append(f"label {claim.label}")
    if claim.num_hops is not None:
        keys.append(f"{claim.num_hops} hops")
    return keys


def slice_table(
    claims: Sequence[Claim], correct: Mapping[str, Sequence[bool]], strict: Mapping[str, Sequence[bool]]
) -> list[dict]:
    """Accuracy and FEVER score of every system on every slice (slices in first-seen order).

    Args:
        claims: gold claims.
        correct: system -> per-claim label correctness, paired with ``claims``.
        strict: system -> per-claim strict (FEVER score) correctness.

    Returns:
        Rows ``{"slice", "n", "systems": {name: {"accuracy", "fever_score"}}}``.
    """
    for name in correct:
        if len(correct[name]) != len(claims) or len(strict.get(name, ())) != len(claims):
            raise ValueError(f"system {name!r}: correctness vectors must have one value per claim")
    members: dict[str, list[int]] = {}
    for i, c in enumerate(claims):
        for key in slice_keys(c):
            members.setdefault(key, []).append(i)
    rows = []
    for key, idx in members.items():
        rows.append(
            {
                "slice": key,
                "n": len(idx),
                "systems": {
                    name: {
                        "accuracy": float(np.mean([correct[name][i] for i in idx])),
                        "fever_score": float(np.mean([strict[name][i] for i in idx])),
                    }
                    for name in correct
                },
            }
        )
    return rows


def only_one_right(ids: Sequence, right_a: Sequence[bool], right_b: Sequence[bool]) -> dict[str, list]:
    """Claim ids right for exactly one of two systems: ``{"only_a": [...], "only_b": [...]}``."""
    if not len(ids) == len(right_a) == len(right_b):
        raise ValueError("ids and both correctness vectors must be equally long")
    return {
        "only_a": [i for i, a, b in zip(ids, right_a, right_b, strict=True) if a and not b],
        "only_b": [i for i, a, b in zip(ids, right_a, right_b, strict=True) if b and not a],
    }


# --- attribution


def retriever_lists(record: Mapping) -> dict[str, list[SentenceId]]:
    """Per base retriever name, the union of its lists (``name@query`` lists of extra queries merged)."""
    out: dict[str, list[SentenceId]] = {}
    for key, items in record.get("per_retriever", {}).items():
        name = key.split("@", 1)[0]
        bucket = out.setdefault(name, [])
        seen = set(bucket)
        bucket.extend(s for s in _ids(items) if s not in seen)
    return out


def attribute_gold(claims: Sequence[Claim], records: Sequence[Mapping]) -> dict:
    """Which retrievers found each gold evidence sentence of the verifiable claims.

    Returns:
        ``{"sentences": n, "found_by": {retriever: n}, "only_by": {retriever: n},
        "combinations": {"bm25+dense": n, ..., "none": n}}``; each distinct gold
        sentence of a claim counts once.
    """
    _check_pairing(claims, records)
    found_by: Counter = Counter()
    only_by: Counter = Counter()
    combos: Counter = Counter()
    total = 0
    for claim, rec in zip(claims, records, strict=True):
        lists = {name: set(ids) for name, ids in retriever_lists(rec).items()}
        for sid in sorted({s for g in claim.evidence for s in g}):
            total += 1
            names = sorted(n for n, ids in lists.items() if sid in ids)
            found_by.update(names)
            if len(names) == 1:
                only_by[names[0]] += 1
            combos["+".join(names) or "none"] += 1
    return {
        "sentences": total,
        "found_by": dict(found_by),
        "only_by": dict(only_by),
        "combinations": dict(combos.most_common()),
    }


def solved_only_by(
    claims: Sequence[Claim], records: Sequence[Mapping], retriever: str = GRAPH_RETRIEVER
) -> list:
    """Ids of claims whose whole gold set only ``retriever`` found (not the union of the others)."""
    _check_pairing(claims, records)
    out = []
    for claim, rec in zip(claims, records, strict=True):
        lists = retriever_lists(rec)
        if retriever not in lists:
            continue
        others = [s for name, ids in lists.items() if name != retriever for s in ids]
        if fully_supported(claim, lists[retriever]) and not fully_supported(claim, others):
            out.append(claim.id)
    return out


def hit_rate_curve(
    claims: Sequence[Claim], records: Sequence[Mapping], cutoffs: Sequence[int] = CUTOFFS
) -> dict[str, list[dict]]:
    """GRAAL-style points per retriever (and "fused"): hit rate against sentences retrieved.

    For each cut-off ``k`` the first ``k`` hits of each list are taken; a point is
    ``{"k", "avg_sentences", "hit_rate"}`` with hit rate over verifiable claims.
    Retrievers missing from some records are skipped.
    """
    _check_pairing(claims, records)
    verifiable = [i for i, c in enumerate(claims) if c.verifiable]
    if not verifiable:
        return {}
    lists: dict[str, list[list[SentenceId]]] = {"fused": [_ids(r.get("retrieved", [])) for r in records]}
    per = [retriever_lists(r) for r in records]
    for name in sorted({n for p in per for n in p}):
        if all(name in p for p in per):
            lists[name] = [p[name] for p in per]
    curves = {}
    for name, ranked in lists.items():
        points = []
        for k in cutoffs:
            cut = [r[:k] for r in ranked]
            rate = float(np.mean([fully_supported(claims[i], cut[i]) for i in verifiable]))
            points.append({"k": k, "avg_sentences": avg_retrieved_sentences(cut), "hit_rate": rate})
        curves[name] = points
    return curves


# --- explanations


def cited_ids(explanation: str) -> list[SentenceId]:
    """Sentence ids cited as ``(Page, line)`` in an explanation, in order, without repeats."""
    out: list[SentenceId] = []
    for page, line in _CITE.findall(_QUOTED.sub(" ", explanation or "")):
        sid = SentenceId(page.strip(), int(line))
        if sid not in out:
            out.append(sid)
    return out


def explanation_checks(
    records: Sequence[Mapping],
    exists: Callable[[SentenceId], bool],
    judge: Callable[[Mapping, list[SentenceId]], bool] | None = None,
) -> dict:
    """Shares of explanations whose citations exist in the corpus and were retrieved (and are faithful).

    Args:
        records: prediction records (``explanation``, ``retrieved``, ``evidence_read``).
        exists: whether a sentence id is in the corpus.
        judge: optional faithfulness check ``(record, cited ids) -> bool``, e.g. an NLI
            classifier that reads only the cited sentences and must reach the record's label.

    Returns:
        ``{"n", "with_citations", "cited_exist", "cited_retrieved", "grounded", "faithful"}``: the
        last four are shares of explanations with citations (None when there are none; "faithful"
        None without a judge).
    """
    n = len(records)
    cited = [(r, cited_ids(r.get("explanation", ""))) for r in records]
    with_cites = [(r, ids) for r, ids in cited if ids]
    if not with_cites:
        return {
            "n": n,
            "with_citations": 0,
            "cited_exist": None,
            "cited_retrieved": None,
            "grounded": None,
            "faithful": None,
        }
    exist = sum(all(exists(s) for s in ids) for _, ids in with_cites)
    retrieved = grounded = 0
    for r, ids in with_cites:
        seen = set(_ids(r.get("retrieved", []))) | set(_ids(r.get("evidence_read", [])))
        retrieved += all(s in seen for s in ids)
        grounded += all(s in seen and exists(s) for s in ids)
    faithful = None
    if judge is not None:
        faithful = sum(bool(judge(r, ids)) for r, ids in with_cites) / len(with_cites)
    m = len(with_cites)
    return {
        "n": n,
        "with_citations": m,
        "cited_exist": exist / m,
        "cited_retrieved": retrieved / m,
        "grounded": grounded / m,
        "faithful": faithful,
    }


# --- cost


def _stats(values: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(arr.mean()),
        "median": float(np.median(arr)),
        "p95": float(np.quantile(arr, 0.95)),
    }


# LLM counters summed over a run (``garag.llm.stats.COUNTERS``, per claim in each record's ``llm``)
LLM_TOTALS = (
    "requests",
    "calls",
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "timeouts",
    "invalid",
    "repaired",
    "fallbacks",
    "verifier_fallbacks",
    "invalid_citations",
)


def cost_summary(records: Sequence[Mapping], wall_seconds: float | None = None) -> dict:
    """Latency per stage (mean, median, p95 seconds per claim), LLM use per claim and claims/s.

    Args:
        records: prediction records with ``seconds`` (stage -> seconds) and optional
            ``llm`` (LLM counters of ``garag.llm.stats`` per claim: calls, cache hits, tokens,
            timeouts, fallbacks, ...).
        wall_seconds: measured wall time of the whole prediction run; without it
            claims/s is derived from the summed stage times.
    """
    if not records:
        raise ValueError("no records to summarise")
    stages: dict[str, list[float]] = {}
    for r in records:
        for stage, s in r.get("seconds", {}).items():
            stages.setdefault(stage, []).append(float(s))
    totals = [sum(r.get("seconds", {}).values()) for r in records]
    llm_keys = ("calls", "prompt_tokens", "completion_tokens")
    # a claim without an ``llm`` entry made no call (e.g. every reply came from the cache)
    usage = [r["llm"] if isinstance(r.get("llm"), Mapping) else {} for r in records]
    llm = {k: float(np.mean([u.get(k, 0) for u in usage])) for k in llm_keys} if any(usage) else None
    totals_llm = (
        {k: round(sum(float(u.get(k, 0)) for u in usage), 3) for k in LLM_TOTALS} if any(usage) else None
    )
    served = (totals_llm or {}).get("cache_hits", 0) + (totals_llm or {}).get("calls", 0)
    if wall_seconds:
        per_second = len(records) / wall_seconds
    else:
        per_second = len(records) / sum(totals) if sum(totals) > 0 else None
    return {
        "n": len(records),
        "stages": {k: _stats(v) for k, v in stages.items()},
        "total": _stats(totals),
        "llm_per_claim": llm,
        "llm_totals": totals_llm,
        # share of model replies served from the response cache (a re-run of the same claims: 1.0)
        "llm_cache_hit_rate": (totals_llm["cache_hits"] / served) if totals_llm and served else None,
        "claims_per_second": per_second,
        "claims_per_second_source": "wall" if wall_seconds else "stage sums",
    }
