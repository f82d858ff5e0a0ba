"""The history endpoints: list and search, one entry, export (JSONL, CSV), delete."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from . import passage_models as pm
from .history import History, HistoryFilter

Label = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
Source = Literal["verify", "batch", "passage"]


def add_history_routes(app: FastAPI, history: History | None) -> None:
    """Add the ``/v1/history`` endpoints; with ``history`` None (``--no-history``) they answer 404."""

    def store() -> History:
        if history is None:
            raise HTTPException(404, "history is off (garag serve --no-history)")
        return history

    def where(q: str | None, config: str | None, label: str | None, source: str | None) -> HistoryFilter:
        return HistoryFilter(q or None, config or None, label, source)

    @app.get("/v1/history", response_model=pm.HistoryPage, tags=["history"])
    def list_history(
        q: str | None = Query(None, max_length=200, description="text the claim contains (any case)"),
        config: str | None = None,
        label: Label | None = None,
        source: Source | None = None,
        page: int = Query(1, ge=1),
        page_size: int = Query(20, ge=1, le=200),
    ) -> dict:
        """Every ad-hoc verification (/v1/verify, /v1/verify/batch, passage claims), newest first,
        filtered and paged."""
        return store().page(where(q, config, label, source), page, page_size)

    @app.get("/v1/history/export", tags=["history"], response_class=StreamingResponse,
             responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}}})  # fmt: skip
    def export_history(
        format: Literal["jsonl", "csv"] = "jsonl",  # noqa: A002 - the query parameter's name
        q: str | None = Query(None, max_length=200),
        config: str | None = None,
        label: Label | None = None,
        source: Source | None = None,
    ) -> StreamingResponse:
        """The entries (filtered like the list), oldest first: JSONL with every whole response, or CSV
        with one row per claim (scores in columns, the cited sentences)."""
        h, w = store(), where(q, config, label, source)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        if format == "csv":
            body, media = h.export_csv(w), "text/csv; charset=utf-8"
        else:
            body, media = h.export_jsonl(w), "application/x-ndjson"
        name = f"garag-history-{stamp}.{format}"
        disposition = f'attachment; filename="{name}"'
        return StreamingResponse(body, media_type=media, headers={"Content-Disposition": disposition})

    @app.get("/v1/history/{entry}", response_model=pm.HistoryEntry, tags=["history"])
    def history_entry(entry: int) -> dict:
        """One entry with its whole /v1/verify response."""
        got = store().get(entry)
        if got is None:
            raise HTTPException(404, f"no history entry {entry}")
        return got

    @app.delete("/v1/history/{entry}", response_model=pm.Deleted, tags=["history"])
    def delete_entry(entry: int) -> dict:
        """Delete one entry."""
        if store().delete(entry) == 0:
            raise HTTPException(404, f"no history entry {entry}")
        return {"deleted": 1}

    @app.delete("/v1/history", response_model=pm.Deleted, tags=["history"])
    async def delete_all(all: bool = False) -> dict:  # noqa: A002 - the query parameter's name
        """Delete every entry (``all=true`` says so on purpose)."""
        if not all:
            raise HTTPException(422, "query.all: set all=true to delete every history entry")
        return {"deleted": await run_in_threadpool(store().delete)}
