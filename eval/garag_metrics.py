"""The GA-RAG paper's run metrics, computed from prediction records (definitions in the README).

* logical consistency: share of program verdicts equal to the AND of their step verdicts
  (and of the whole claim's verdict where it was a step); None for runs without programs or
  whose programs only gather evidence (``reasoning.combine: union``).
* hallucination rate: share of explanations with citations that an NLI judge reading only the
  cited sentences does not find entailed (1 - "faithful (NLI)"); None where no judge ran.
* factual grounding: share of explanations with citations whose every cited sentence exists in
  the corpus and was retrieved for the claim.
* graph coverage: mean share of the claim's entities that are nodes of its local graph (graph mode).
* graph completeness: share of verifiable claims with a complete gold evidence set inside the
  local graph's sentence pool (graph mode).
* context precision: mean share of the sentences shown to the verifier that are gold evidence
  (verifiable claims).
* response time: mean wall seconds per claim, all stages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from garag.types import Claim, Label, SentenceId
from pipeline.programs import aggregate_steps


def _ids(pairs: Sequence) -> list[SentenceId]:
    return [SentenceId(p, int(n)) for p, n in pairs]


def logical_consistency(records: Sequence[Mapping]) -> float | None:
    """Share of records whose label is the AND of their program's step verdicts (None: no programs)."""
    with_programs = [r for r in records if r.get("program") and r["program"].get("combine") != "union"]
    if not with_programs:
        return None
    agree = 0
    for r in with_programs:
        prog = r["program"]
        labels = [Label(s["label"]) for s in prog["steps"] if s["kind"] == "verify"]
        if prog.get("claim_verdict"):
            labels.append(Label(prog["claim_verdict"]))
        agree += bool(labels) and aggregate_steps(labels).value == r["predicted_label"]
    return agree / len(with_programs)


def graph_coverage(records: Sequence[Mapping]) -> float | None:
    """Mean share of claim entities present in the local graph (claims with entities, graph mode)."""
    shares = [
        len(r["graph"]["covered"]) / len(r["graph"]["entities"])
        for r in records
        if r.get("graph") and r["graph"].get("entities")
    ]
    return sum(shares) / len(shares) if shares else None


def graph_completeness(claims: Sequence[Claim], records: Sequence[Mapping]) -> float | None:
    """Share of verifiable claims with one complete gold set in the local graph's pool (graph mode)."""
    pairs = [(c, r) for c, r in zip(claims, records, strict=True) if c.evidence and r.get("graph")]
    if not pairs:
        return None
    complete = 0
    for c, r in pairs:
        pool = set(_ids(r["graph"]["pool"]))
        complete += any(set(group) <= pool for group in c.evidence)
    return complete / len(pairs)


def context_precision(claims: Sequence[Claim], records: Sequence[Mapping]) -> float | None:
    """Mean share of the sentences read by the verifier that are gold (verifiable claims that read any)."""
    shares = []
    for c, r in zip(claims, records, strict=True):
        read = _ids(r.get("evidence_read", []))
        if not c.evidence or not read:
            continue
        gold = {s for group in c.evidence for s in group}
        shares.append(sum(s in gold for s in read) / len(read))
    return sum(shares) / len(shares) if shares else None


def response_time(records: Sequence[Mapping]) -> float | None:
    """Mean wall seconds per claim over all recorded stages."""
    totals = [sum(r["seconds"].values()) for r in records if r.get("seconds")]
    return sum(totals) / len(totals) if totals else None


def garag_metrics(
    claims: Sequence[Claim], records: Sequence[Mapping], explanations: Mapping | None = None
) -> dict:
    """All GA-RAG metrics of one run (``explanations``: :func:`eval.slices.explanation_checks` output)."""
    faithful = (explanations or {}).get("faithful")
    grounded = (explanations or {}).get("grounded")
    return {
        "logical_consistency": logical_consistency(records),
        "hallucination_rate": None if faithful is None else 1.0 - faithful,
        "factual_grounding": grounded,
        "graph_coverage": graph_coverage(records),
        "graph_completeness": graph_completeness(claims, records),
        "context_precision": context_precision(claims, records),
        "response_time_s": response_time(records),
    }
