"""The FastAPI app of ``garag serve``: the /v1 API, the OpenAPI page and the web page.

Every error is JSON ``{"error", "status"[, "detail"]}`` with its status code:
422 bad input, 413 too large, 401 missing or wrong API key, 404 unknown run (or corpus update, page,
history entry), 503 not ready, 504 past the request timeout, 499 the client left before its
verdicts (its waiting claims are dropped), 500 anything else (logged, never shown as a stack trace).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

import garag
from garag.text import detokenize
from garag.types import SentenceId

from . import models as m
from .batcher import QueueFull
from .corpus_routes import add_corpus_routes
from .history import History
from .history_routes import add_history_routes
from .job_routes import add_job_routes
from .passage_routes import add_passage_routes
from .runs import HEADLINE, RunIndex, RunNotFound, filter_claims, page_of, run_labels
from .service import UPLOAD_PATHS, Service
from .telemetry import Telemetry
from .waiting import ClientGone, wait_for_results

logger = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
# the page loads only its own files; corpus text reaches it as data, never as markup
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
OPEN_PATHS = ("/v1/health",)


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def host_name(header: str) -> str:
    """The name of a ``Host`` header, without its port: ``[::1]:8000`` -> ``::1``, lower-cased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _error(status: int, message: str, detail: list | None = None) -> JSONResponse:
    body = {"error": message, "status": status}
    if detail is not None:
        body["detail"] = detail
    return JSONResponse(body, status_code=status)


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes (``upload_limit`` on paths starting with
    one of ``upload_paths``) gets 413 before the app reads it."""

    def __init__(  # noqa: ANN001 - an ASGI app
        self, app, limit: int, upload_limit: int | None = None, upload_paths: tuple[str, ...] = ()
    ) -> None:
        self.app, self.body_limit = app, limit
        self.upload_limit, self.upload_paths = upload_limit or limit, upload_paths

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope.get("path", "").startswith(self.upload_paths) if self.upload_paths else False
        limit = self.upload_limit if upload else self.body_limit
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _send_413(send, limit)
            return
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send_413(send, limit)
                return
            chunks.append(chunk)
            more = msg.get("more_body", False)
        body, sent = b"".join(chunks), False

        async def replay():  # noqa: ANN202
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _send_413(send, limit: int) -> None:  # noqa: ANN001
    body = json.dumps({"error": f"request body over {limit} bytes", "status": 413}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def create_app(service: Service, runs: RunIndex | None = None) -> FastAPI:
    """The app over a service (loaded or loading) and the runs under its results directory."""
    settings = service.settings
    runs = runs or RunIndex(settings.results_dir)
    history = History(lambda: settings.state / "history.sqlite") if settings.history else None

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        yield
        jobs.stop()  # the job's batch in flight is written first; the job resumes at the next start
        service.close()

    app = FastAPI(
        title="garag",
        version=garag.__version__,
        description="Graph-augmented RAG fact verification: verify claims against the loaded corpus "
        "(baseline and graph-augmented configs) and browse `garag compare` runs.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        responses={code: {"model": m.ErrorOut} for code in (401, 413, 422, 503)},
    )
    app.add_middleware(
        BodyLimit, limit=settings.max_body, upload_limit=settings.max_upload, upload_paths=UPLOAD_PATHS
    )
    telemetry = Telemetry({name: functools.partial(service.waiting, name) for name in service.served})

    @app.middleware("http")
    async def guard(request: Request, call_next):  # noqa: ANN202
        started = time.perf_counter()
        response = await _guarded(request, call_next)
        route = request.scope.get("route")
        path = getattr(route, "path", None) or (
            "/static" if request.url.path.startswith("/static/") else "other"
        )
        telemetry.observe(request.method, path, response.status_code, time.perf_counter() - started)
        return response

    async def _guarded(request: Request, call_next):  # noqa: ANN202
        path = request.url.path
        host = host_name(request.headers.get("host", ""))
        if host not in settings.allowed_hosts:
            return _error(400, f"host {host!r} is not allowed (garag serve --allowed-host {host or 'NAME'})")
        keyed = (path.startswith("/v1/") and path not in OPEN_PATHS) or path == "/metrics"
        if settings.api_key and keyed:
            given = request.headers.get("x-api-key", "")
            if not hmac.compare_digest(given.encode(), settings.api_key.encode()):
                return _error(401, "missing or wrong X-API-Key")
        try:
            response = await call_next(request)
        except Exception as e:  # noqa: BLE001 - logged here, one JSON line to the client
            logger.exception("error on %s %s", request.method, path)
            return _error(500, f"internal error: {type(e).__name__}")
        if path == "/" or path.startswith("/static/"):
            response.headers["Content-Security-Policy"] = PAGE_CSP
            response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """Prometheus metrics: requests by route and status, latency, claims verified, queue depth."""
        body, content_type = telemetry.render()
        return Response(body, media_type=content_type)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError) -> JSONResponse:
        response = _error(e.status, e.message)
        response.headers.update(e.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        detail = [
            {
                "loc": [str(x) for x in err.get("loc", ())],
                "msg": err.get("msg", ""),
                "type": err.get("type", ""),
            }
            for err in e.errors()
        ]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        where = ".".join(x for x in first["loc"] if x != "body") or "body"
        return _error(422, f"{where}: {first['msg']}", detail)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        return _error(e.status_code, str(e.detail))

    @app.exception_handler(Exception)
    async def crashed(request: Request, e: Exception) -> JSONResponse:
        logger.error("error on %s %s: %s: %s", request.method, request.url.path, type(e).__name__, e)
        return _error(500, f"internal error: {type(e).__name__}")

    jobs = app.state.jobs = add_job_routes(app, service, telemetry)  # /v1/jobs (app/serve/job_routes.py)

    # -- service --------------------------------------------------------------------------------------

    @app.get("/v1/health", response_model=m.Health, tags=["service"])
    async def health() -> dict:
        """The process answers (no model is needed)."""
        return {"status": "ok", "version": garag.__version__}

    @app.get("/v1/ready", response_model=m.Ready, tags=["service"], responses={503: {"model": m.Ready}})
    async def ready() -> JSONResponse:
        """200 once every config is loaded; 503 while loading or after a failed load (``error``)."""
        body = {"ready": service.ready, "configs": list(service.served), "error": service.error}
        return JSONResponse(body, status_code=200 if service.ready else 503)

    @app.get("/v1/configs", response_model=m.ConfigsResponse, tags=["service"])
    async def configs() -> dict:
        """The loaded configs and the batch limit."""
        return {"configs": service.describe(), "max_batch": settings.max_batch}

    # -- verification ---------------------------------------------------------------------------------

    def _check(config: str) -> None:
        if not service.ready:
            raise ApiError(503, "not ready: " + (service.error or "the models are loading"))
        if config not in service.served:
            raise ApiError(422, f"config: unknown config {config!r}; loaded: {', '.join(service.served)}")

    async def _verify(
        config: str, claims: list[str], k: int | None, request: Request | None = None,
        timeout: float | None = None,
    ) -> list[dict]:  # fmt: skip
        """The claims' responses; their queued work is dropped if ``request``'s client leaves (499)
        or ``timeout`` (default ``settings.timeout``) passes (504)."""
        for i, c in enumerate(claims):
            if not c.strip():
                raise ApiError(422, f"claims.{i}: the claim is empty" if len(claims) > 1 else "claim: empty")
        started = time.perf_counter()
        try:
            futures = service.submit(config, claims, k)
        except QueueFull as e:
            raise ApiError(
                429,
                f"busy: {e.waiting} claims are waiting for config {config!r} (at most {settings.max_queue})",
                {"Retry-After": str(e.retry_after)},
            ) from None
        try:
            receive = request.receive if request is not None else None
            out = await wait_for_results(futures, settings.timeout if timeout is None else timeout, receive)
        except asyncio.TimeoutError:  # the builtin TimeoutError only from Python 3.11
            raise ApiError(504, f"no verdict within {settings.timeout:g} s") from None
        except ClientGone:  # nobody reads the answer: 499, nginx's "client closed request"
            raise ApiError(499, "the client closed the request; its waiting claims were dropped") from None
        total = time.perf_counter() - started
        telemetry.claims.labels(config).inc(len(out))
        return [r | {"timings": r["timings"] | {"total": round(total, 6)}} for r in out]

    def _keep(
        source: str, config: str, k: int | None, out: list[dict]
    ) -> tuple[list[dict], list[int] | None]:
        """Responses as the client gets them (the response model's fields) and, with the history on,
        kept there; their history ids.  Called off the event loop (validation is not free)."""
        answered = [m.VerifyResponse.model_validate(r).model_dump(mode="json") for r in out]
        if history is None:
            return answered, None
        return answered, history.add(source, uuid.uuid4().hex[:12], config, k, answered)

    async def _record(source: str, config: str, k: int | None, out: list[dict]) -> list[int] | None:
        """Keep one request's responses in the history, off the event loop; their ids."""
        return (await run_in_threadpool(_keep, source, config, k, out))[1] if history is not None else None

    async def _answer(source: str, config: str, k: int | None, out: list[dict], batch: bool) -> Response:
        """The JSON response of verified claims, validated, kept and encoded in a worker thread: under
        a flood the event loop only moves bytes, so /v1/health keeps answering."""

        def encode() -> bytes:
            answered, _ = _keep(source, config, k, out)
            body = {"results": answered} if batch else answered[0]
            return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

        return Response(await run_in_threadpool(encode), media_type="application/json")

    @app.post("/v1/verify", response_model=m.VerifyResponse, tags=["verify"])
    async def verify(req: m.VerifyRequest, request: Request) -> Response:
        """Verify one claim: label, scores, explanation, evidence, reasoning steps, fact graph, GRAAL
        paths and per-stage timings.  Concurrent requests share the verifier's batches."""
        _check(req.config)
        out = await _verify(req.config, [req.claim], req.k, request)
        return await _answer("verify", req.config, req.k, out, batch=False)

    @app.post("/v1/verify/batch", response_model=m.BatchResponse, tags=["verify"])
    async def verify_batch(req: m.BatchRequest, request: Request) -> Response:
        """Verify several claims with one config (at most ``max_batch``; 413 beyond)."""
        if len(req.claims) > settings.max_batch:
            raise ApiError(413, f"claims: {len(req.claims)} claims, the limit is {settings.max_batch}")
        for i, c in enumerate(req.claims):
            if len(c) > m.MAX_CLAIM_CHARS:
                raise ApiError(422, f"claims.{i}: longer than {m.MAX_CLAIM_CHARS} characters")
        _check(req.config)
        out = await _verify(req.config, req.claims, req.k, request)
        return await _answer("batch", req.config, req.k, out, batch=True)

    add_passage_routes(app, service, _check, _verify, _record)
    add_history_routes(app, history)

    # -- runs -----------------------------------------------------------------------------------------

    def _run(run_id: str):  # noqa: ANN202
        try:
            return runs.get(run_id)
        except RunNotFound as e:
            raise ApiError(404, str(e)) from None

    @app.get("/v1/runs", response_model=m.RunsResponse, tags=["runs"])
    def list_runs() -> dict:  # a plain def: FastAPI runs it in its thread pool, off the event loop
        """The `garag compare` runs under the results directory, with headline metrics per system."""
        return {"runs": runs.summaries()}

    @app.get("/v1/runs/{run_id}", response_model=m.RunDetail, tags=["runs"])
    def run_detail(run_id: str) -> dict:
        """One run: metrics per system, paired significance, slices, and the filter values."""
        data = _run(run_id)
        per = data.metrics.get("per_system", {})
        keep = (*HEADLINE, "evidence_recall", "evidence_precision", "ci", "per_class", "groups",
                "seconds_per_claim", "garag", "n")  # fmt: skip
        return {
            "run_id": run_id,
            "dataset": str(data.metrics.get("dataset", "")),
            "systems": data.systems,
            "n_claims": len(data.claims),
            "metrics": {s: {k: v for k, v in mm.items() if k in keep} for s, mm in per.items()},
            "significance": data.metrics.get("paired", []),
            "slices": data.metrics.get("slices", []),
            "labels": run_labels(data),
            "hops": sorted({c["hops"] for c in data.claims if c["hops"] is not None}),
        }

    @app.get("/v1/runs/{run_id}/claims", response_model=m.RunClaimsResponse, tags=["runs"])
    def run_claims(
        run_id: str,
        system: str | None = None,
        label: str | None = None,
        correct: bool | None = None,
        slice: str | None = None,  # noqa: A002 - the query parameter's name
        disagree: bool | None = None,
        hops: int | None = Query(None, ge=1),
        q: str | None = Query(None, max_length=200),
        page: int = Query(1, ge=1),
        page_size: int = Query(20, ge=1, le=200),
    ) -> dict:
        """Per-claim predictions of every system side by side, filtered and paged.

        ``correct`` applies to ``system``; ``disagree=true`` keeps claims where one system is right and
        another wrong; ``slice`` is a slice name of the run (e.g. "3 hops")."""
        data = _run(run_id)
        if system is not None and system not in data.systems:
            raise ApiError(422, f"system: unknown system {system!r}; the run has {', '.join(data.systems)}")
        try:
            rows = filter_claims(data.rows, system, label, correct, slice, disagree, hops, q)
        except ValueError as e:
            raise ApiError(422, str(e)) from None
        chosen, pages = page_of(rows, page, page_size)
        return {"run_id": run_id, "total": len(rows), "page": page, "page_size": page_size, "pages": pages,
                "claims": chosen}  # fmt: skip

    @app.get("/v1/runs/{run_id}/claims/{claim_id}", response_model=m.RunClaimDetail, tags=["runs"])
    def run_claim(run_id: str, claim_id: str) -> dict:
        """One claim of a run: both systems' records, the evidence they read and the gold evidence, with
        text where a loaded config reads the run's corpus."""
        data = _run(run_id)
        if claim_id not in data.by_id:
            raise ApiError(404, f"run {run_id!r} has no claim {claim_id!r}")
        row, info = data.by_id[claim_id]
        corpus = str(data.identity.get("dataset", {}).get("corpus", ""))

        def sentences(ids: list) -> list[dict]:
            out = []
            for page, line in ids:
                raw = service.sentence_text(corpus, SentenceId(str(page), int(line)))
                text = detokenize(raw) if raw is not None else None
                out.append({"page": str(page), "line": int(line), "text": text, "raw_text": raw})
            return out

        key = json.dumps(info["id"])
        records = {s: data.records[s][key] for s in data.systems if key in data.records[s]}
        return {
            "run_id": run_id,
            "claim": row,
            "gold_evidence": [sentences(g) for g in info["gold"]],
            "sentences": {s: sentences(r.get("evidence_read", [])) for s, r in records.items()},
            "records": records,
        }

    add_corpus_routes(app, service.corpus)  # /v1/corpus*: pages added and removed while serving
    service.corpus.attach_jobs(jobs.store)  # each corpus update is listed among the jobs

    # -- pages ----------------------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="garag API",
            swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
        )

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
