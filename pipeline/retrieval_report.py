"""One claim's retrieval as JSON-able data: fused or one retriever's hits, with texts and GRAAL paths."""

from __future__ import annotations

from garag.config import Config
from pipeline.retrieval import RetrievalPipeline


def retrieval_report(
    config: Config, claim: str, k: int, retriever: str = "fused", progress: bool = False
) -> dict:
    """Build (or reuse) the indexes, retrieve ``k`` hits for ``claim`` and describe them.

    Args:
        config: the run's config (its retrievers and indexes).
        claim: the claim text.
        k: hits wanted.
        retriever: "fused" or one configured retriever's name; GRAAL hits carry the paths that found them.
        progress: show progress bars while indexes are built.

    Raises:
        ValueError: an empty claim, or a retriever that is not configured.
    """
    if not claim.strip():
        raise ValueError("the claim is empty")
    pipe = RetrievalPipeline(config, progress=progress)
    pipe.build()
    result = pipe.retrieve(claim, k=k)
    if retriever == "fused":
        hits = result.fused
    elif retriever in result.per_retriever:
        hits = result.per_retriever[retriever][:k]
    else:
        raise ValueError(
            f"--retriever {retriever!r} is not configured (have: fused, {', '.join(pipe.retrievers)})"
        )
    if pipe.store is None:
        raise RuntimeError("the retrieval pipeline was built without a sentence store")
    texts = {s.id: s.text for s in (pipe.store.get(h.sentence) for h in hits) if s is not None}
    out = {
        "claim": claim,
        "retriever": retriever,
        "hits": [
            {
                "page": h.sentence.page,
                "line": h.sentence.line,
                "score": h.score,
                "retriever": h.retriever,
                "sources": list(h.sources),
                "text": texts.get(h.sentence, ""),
            }
            for h in hits
        ],
        "seconds": result.seconds,
    }
    if retriever == "graal":
        out["hits"] = _graal_paths(pipe.retrievers["graal"], claim, k, texts)
    return out


def _graal_paths(retriever, claim: str, k: int, texts: dict) -> list[dict]:  # noqa: ANN001
    """GRAAL hits with the paths (entities and edges) that brought them."""
    out = []
    for gh in retriever.retrieve_with_paths(claim, k):
        h = gh.hit
        out.append(
            {
                "page": h.sentence.page,
                "line": h.sentence.line,
                "score": h.score,
                "text": texts.get(h.sentence) or "",
                "paths": [
                    {
                        "reason": p.reason,
                        "entities": list(p.entities),
                        "edges": [[e.u, e.v, e.frame] for e in p.edges],
                    }
                    for p in gh.provenance
                ],
            }
        )
    return out
