"""The corpus endpoints of ``garag serve``: pages added and removed while it answers (app/serve/corpus.py).

Errors are the app's JSON ``{"error", "status"}``: 422 bad input (naming the line, key or ids),
404 unknown update or page, 503 not ready.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from . import corpus_models as cm
from .corpus import CorpusError, CorpusManager
from .models import ErrorOut

UPLOAD_BODY = {
    "required": True,
    "content": {
        "application/x-ndjson": {
            "schema": {"type": "string"},
            "example": '{"id": "New_Page", "text": "New Page is new .", "lines": "0\\tNew Page is new ."}',
        }
    },
}
NOT_FOUND = {404: {"model": ErrorOut}}


def add_corpus_routes(app: FastAPI, manager: CorpusManager) -> None:
    """Register /v1/corpus* on ``app`` (whose middleware checks the API key and the upload limit)."""

    @app.exception_handler(CorpusError)
    async def corpus_error(_: Request, e: CorpusError) -> JSONResponse:
        return JSONResponse({"error": str(e), "status": e.status}, status_code=e.status)

    @app.get("/v1/corpus", response_model=cm.CorpusResponse, tags=["corpus"])
    def corpus() -> dict:
        """Per config: its corpus, pages, sentences and the index version it answers from; per corpus
        its edits; the corpus updates in progress and the last finished ones."""
        return manager.describe()

    @app.post(
        "/v1/corpus/pages",
        status_code=202,
        response_model=cm.EditAccepted,
        tags=["corpus"],
        openapi_extra={"requestBody": UPLOAD_BODY},
    )
    async def add_pages(request: Request, config: str | None = None) -> dict:
        """Add pages: the body is a wiki-pages file (one JSON page a line: id, text, lines).  A page
        whose id is in the corpus replaces it.  The edit applies to every config on the same corpus
        as ``config``; the update builds the new indexes in the background (the old ones answer
        meanwhile) and switches to them at once: poll ``GET /v1/corpus/updates/{id}``."""
        body = await request.body()
        return await run_in_threadpool(manager.add_pages, body, config)

    @app.delete("/v1/corpus/pages", status_code=202, response_model=cm.EditAccepted, tags=["corpus"])
    def remove_pages(req: cm.RemoveRequest) -> dict:
        """Remove pages by id (JSON body ``{"ids": [...]}``); every id must be in the corpus once the
        edits queued before are applied, and a removed id cannot be added again."""
        return manager.remove_pages(req.ids, req.config)

    @app.get(
        "/v1/corpus/updates/{update_id}", response_model=cm.UpdateOut, tags=["corpus"], responses=NOT_FOUND
    )
    def update(update_id: str) -> dict:
        """One corpus update: queued, running (phase, progress), done (the new index versions) or failed
        (error)."""
        return manager.update(update_id)

    @app.get(
        "/v1/corpus/pages/{page_id:path}", response_model=cm.PageOut, tags=["corpus"], responses=NOT_FOUND
    )
    def page(page_id: str, config: str | None = None) -> dict:
        """A page's sentences in the corpus ``config`` answers from now (404 when it has no such page)."""
        return manager.page(page_id, config)
