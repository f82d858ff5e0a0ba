"""``POST /v1/verify/passage``: a text's check-worthy claims, each verified with its evidence."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from . import passage_models as pm
from .passage import LLMClaimSplitter, PassageClaim, RuleClaimSplitter, Sentence
from .service import Service

logger = logging.getLogger(__name__)

VerifyFn = Callable[..., Awaitable[list[dict]]]
RecordFn = Callable[[str, str, "int | None", list[dict]], Awaitable["list[int] | None"]]


class Splitters:
    """One splitter per config, made on first use (the rule one needs spaCy, the LLM one the config's
    loaded LLM client)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._made: dict[tuple[str, str], Any] = {}

    def has_llm(self, config: str) -> bool:
        pipe = self.service.served[config].pipe
        return getattr(pipe, "llm_client", None) is not None

    def get(self, config: str, kind: str) -> RuleClaimSplitter | LLMClaimSplitter:
        key = (config, kind)
        if key not in self._made:
            cfg = self.service.served[config].config
            rule = RuleClaimSplitter(cfg.decomposition.spacy_model)
            if kind == "llm":
                pipe = self.service.served[config].pipe
                self._made[key] = LLMClaimSplitter(pipe.llm_client, rule)  # type: ignore[union-attr]
            else:
                self._made[key] = rule
        return self._made[key]


def _claim_out(c: PassageClaim, result: dict | None = None, **extra: Any) -> dict:
    return {"text": c.text, "start": c.start, "end": c.end, "sentence": c.sentence, "checkworthy": True,
            "reason": c.reason, "source": c.source, "result": result, "unverified": None,
            "history_id": None, **extra}  # fmt: skip


def _skipped_out(i: int, s: Sentence) -> dict:
    return {"text": s.text, "start": s.start, "end": s.end, "sentence": i, "checkworthy": False,
            "reason": s.reason, "source": "sentence", "result": None, "unverified": None,
            "history_id": None}  # fmt: skip


def add_passage_routes(
    app: FastAPI, service: Service, check: Callable[[str], None], verify: VerifyFn, record: RecordFn
) -> None:
    """Add ``POST /v1/verify/passage``.

    Args:
        check: raises the API error for a config that is not ready or not loaded.
        verify: ``(config, claims, k, request=, timeout=) -> responses`` (queued, batched, dropped
            when the client leaves or the timeout passes).
        record: ``(source, config, k, responses) -> history ids`` (None without history).
    """
    splitters = Splitters(service)
    timeout = service.settings.timeout

    @app.post("/v1/verify/passage", response_model=pm.PassageResponse, tags=["verify"])
    async def verify_passage(req: pm.PassageRequest, request: Request) -> dict:
        """Split a text (at most 5,000 characters) into sentences, keep the check-worthy ones (a
        name, number or date and a verb; no question, opinion, first person or hedge) and verify
        each; the LLM splitter restates them as standalone claims.  At most 32 claims are verified,
        the rest are listed with ``unverified`` saying why."""
        started = time.perf_counter()
        if not req.passage.strip():
            raise HTTPException(422, "passage: empty")
        check(req.config)
        kind = req.splitter
        if kind == "auto":
            kind = "llm" if splitters.has_llm(req.config) else "rule"
        elif kind == "llm" and not splitters.has_llm(req.config):
            raise HTTPException(422, f"splitter: config {req.config!r} has no LLM; use splitter rule")
        splitter = splitters.get(req.config, kind)
        sentences = await run_in_threadpool(splitter.sentences, req.passage)
        claims = await run_in_threadpool(splitter.claims, sentences)
        split_s = time.perf_counter() - started
        verified, over = claims[: pm.MAX_PASSAGE_CLAIMS], claims[pm.MAX_PASSAGE_CLAIMS :]
        results: list[dict] = []
        ids: list[int] | None = None
        if verified:
            left = max(timeout - split_s, 1e-3)
            results = await verify(
                req.config, [c.text for c in verified], req.k, request=request, timeout=left
            )
            ids = await record("passage", req.config, req.k, results)
        out = [
            _claim_out(c, r, history_id=ids[i] if ids else None)
            for i, (c, r) in enumerate(zip(verified, results, strict=True))
        ]
        note = f"not verified: a passage gets at most {pm.MAX_PASSAGE_CLAIMS} claims verified"
        out += [_claim_out(c, unverified=note) for c in over]
        counts = {label: sum(r["label"] == label for r in results) for label in pm.Label.__args__}
        total = time.perf_counter() - started
        return {
            "passage": req.passage,
            "config": req.config,
            "index_version": service.index_version(req.config),
            "splitter": kind,
            "claims": out,
            "skipped": [_skipped_out(i, s) for i, s in enumerate(sentences) if not s.checkworthy],
            "counts": counts,
            "timings": {
                "split": round(split_s, 6),
                "verify": round(total - split_s, 6),
                "total": round(total, 6),
            },
        }
