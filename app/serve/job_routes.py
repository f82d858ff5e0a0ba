"""The /v1/jobs endpoints of ``garag serve``: submit a claims file, follow its progress (JSON or a
server-sent-events stream), cancel, delete, page through the results and download them.

Errors are the app's one-line JSON ``{"error", "status"}``: 422 bad input (naming the file and line,
or the key), 404 unknown job, 409 a state that does not allow the action, 415 a body that is neither
JSON nor multipart.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from . import job_models as jm
from .job_claims import DOWNLOADS, KIND, claim_item, download_lines, run_claims
from .job_files import ClaimsFile, ClaimsFileError, read_json_claims, read_upload
from .job_runner import JobRunner
from .jobs import ACTIVE, FINISHED, Job, JobStore
from .models import ErrorOut

UPLOAD_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".txt")
SSE_POLL = 0.5  # seconds between looks at a job's progress for its event stream
SSE_KEEPALIVE = 15.0
# a stream ends after this many seconds (the client asks again): a server stopping waits for open
# responses, and must not wait for a long job's stream
SSE_MAX = 30.0


def _iso(t: float | None) -> str | None:
    return (
        datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds") if t is not None else None
    )


def job_out(job: Job) -> dict:
    """The JSON of a job (:class:`job_models.JobOut`)."""
    p = job.params
    base = f"/v1/jobs/{job.id}"
    rate = job.claims_per_second
    eta = job.eta_seconds
    return {
        "id": job.id,
        "kind": job.kind,
        "name": p.get("name") or p.get("filename") or job.id,
        "config": job.config,
        "k": p.get("k"),
        "state": job.state,
        "total": job.total,
        "done": job.done,
        "progress": round(job.done / job.total, 6) if job.total else 1.0,
        "claims_per_second": round(rate, 3) if rate else None,
        "eta_seconds": round(eta, 1) if eta is not None else None,
        "created": _iso(job.created),
        "started": _iso(job.started),
        "finished": _iso(job.finished),
        "error": job.error,
        "index_versions": job.index_versions,
        "format": p.get("format", ""),
        "filename": p.get("filename"),
        "labelled": int(p.get("labelled", 0)),
        "starts": job.starts,
        "metrics": job.metrics,
        "links": {
            "self": base,
            "events": f"{base}/events",
            "results": f"{base}/results",
            **{fmt: f"{base}/results?format={fmt}" for fmt in DOWNLOADS},
        },
    }


def _fail(status: int, message: str) -> HTTPException:
    return HTTPException(status, message)


def _validation_line(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ())) or "body"
    return f"{where}: {err.get('msg', 'invalid')}"


def add_job_routes(app: FastAPI, service, telemetry) -> JobRunner:  # noqa: ANN001, C901 - routes
    """Add the /v1/jobs routes over the jobs under ``service.settings.state``; return the runner
    (started when jobs are waiting, and at each submit)."""
    settings = service.settings
    state = settings.state
    store = JobStore(state / "jobs.sqlite")
    uploads = state / "uploads"
    runner = JobRunner(store, service, state / "jobs.lock")
    # a job's batch: one pipeline batch of 32 claims (garag predict's), or --micro-batch if more
    chunk = max(32, settings.micro_batch)
    runner.register(
        KIND,
        functools.partial(run_claims, chunk=chunk, on_done=lambda c, n: telemetry.claims.labels(c).inc(n)),
    )
    telemetry.track_jobs(store.counts)
    if store.next_runnable(runner.kinds, service.served) is not None:
        runner.ensure_started()  # interrupted jobs resume (once the models are loaded)

    def _job(job_id: str) -> Job:
        job = store.get(job_id)
        if job is None:
            raise _fail(404, f"unknown job {job_id!r}")
        return job

    def _config(name: str) -> str:
        if name not in service.served:
            raise _fail(422, f"config: unknown config {name!r}; loaded: {', '.join(service.served)}")
        return name

    async def _from_form(request: Request) -> tuple[dict, ClaimsFile, Path]:
        form = await request.form()
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise _fail(422, "file: a claims file is required (the multipart field 'file')")
        config = _config(str(form.get("config") or "baseline"))
        k_text = str(form.get("k") or "").strip()
        if k_text and not (k_text.isdigit() and 1 <= int(k_text) <= 20):
            raise _fail(422, f"k: {k_text!r} is not a whole number from 1 to 20")
        name = str(form.get("name") or "")
        if len(name) > 200:
            raise _fail(422, f"name: {len(name)} characters, at most 200")
        fmt = str(form.get("format") or "auto")
        if fmt not in ("auto", "fever", "hover", "csv"):
            raise _fail(422, f"format: {fmt!r} is not one of auto, fever, hover, csv")
        filename = Path(upload.filename or "claims").name
        suffix = Path(filename).suffix.lower()
        uploads.mkdir(parents=True, exist_ok=True)
        path = uploads / f"tmp-{uuid.uuid4().hex}{suffix if suffix in UPLOAD_SUFFIXES else ''}"
        path.write_bytes(await upload.read())  # kept as it came
        try:
            claims = await asyncio.to_thread(read_upload, path, filename, fmt)
        except ClaimsFileError as e:
            path.unlink(missing_ok=True)
            raise _fail(422, str(e)) from None
        name = name or filename
        params = {"k": int(k_text) if k_text else None, "filename": filename, "name": name}
        return {"config": config, **params}, claims, path

    async def _from_json(request: Request) -> tuple[dict, ClaimsFile, None]:
        try:
            req = jm.JobRequest.model_validate_json(await request.body())
        except ValidationError as e:
            raise _fail(422, _validation_line(e)) from None
        config = _config(req.config)
        items = [c if isinstance(c, str) else c.model_dump() for c in req.claims]
        try:
            claims = read_json_claims(items)
        except ClaimsFileError as e:
            raise _fail(422, str(e)) from None
        return {"config": config, "k": req.k, "filename": None, "name": req.name}, claims, None

    @app.post(
        "/v1/jobs",
        status_code=201,
        response_model=jm.JobOut,
        tags=["jobs"],
        responses={404: {"model": ErrorOut}, 415: {"model": ErrorOut}},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": jm.JobRequest.model_json_schema()},
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["file"],
                            "properties": {
                                "file": {
                                    "type": "string",
                                    "format": "binary",
                                    "description": "FEVER or HoVer JSONL, or CSV with a claim column",
                                },
                                "config": {"type": "string", "default": "baseline"},
                                "k": {"type": "integer", "minimum": 1, "maximum": 20},
                                "format": {"type": "string", "enum": ["auto", "fever", "hover", "csv"]},
                                "name": {"type": "string"},
                            },
                        }  # fmt: skip
                    },
                },
            }
        },
    )
    async def create_job(request: Request) -> JSONResponse:
        """Submit a job: a claims file (multipart field ``file``: FEVER or HoVer JSONL, or CSV with a
        ``claim`` column and optional ``id`` and ``label``) or a JSON list of claims, for one config.
        It runs in the background a batch at a time, survives restarts and, where claims have gold
        labels, ends with ``garag evaluate``'s metrics."""
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "multipart/form-data":
            params, claims, path = await _from_form(request)
        elif ctype == "application/json":
            params, claims, path = await _from_json(request)
        else:
            raise _fail(415, "send the claims as multipart/form-data (field 'file') or as JSON")
        labelled = sum(c.label is not None for c in claims.claims)
        params |= {"format": claims.format, "labelled": labelled,
                   "labels": list(claims.labels) if claims.labels else None}  # fmt: skip
        config = params.pop("config")
        items = [claim_item(c) for c in claims.claims]
        job = await asyncio.to_thread(store.create, KIND, config, items, params)
        if path is not None:
            kept = uploads / f"{job.id}{path.suffix}"
            path.rename(kept)
        runner.ensure_started()
        return JSONResponse(job_out(job), status_code=201, headers={"Location": f"/v1/jobs/{job.id}"})

    @app.get("/v1/jobs", response_model=jm.JobsResponse, tags=["jobs"])
    def list_jobs(state: jm.JobState | None = None, limit: int = Query(100, ge=1, le=1000)) -> dict:
        """The jobs, newest first (``state`` keeps one state)."""
        return {"jobs": [job_out(j) for j in store.list(state, limit)]}

    @app.get(
        "/v1/jobs/{job_id}", response_model=jm.JobOut, tags=["jobs"], responses={404: {"model": ErrorOut}}
    )
    def get_job(job_id: str) -> dict:
        """A job's state and progress: done of total, claims per second, the time left; its metrics
        once done."""
        return job_out(_job(job_id))

    @app.get("/v1/jobs/{job_id}/events", tags=["jobs"], response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}, 404: {"model": ErrorOut}})  # fmt: skip
    async def job_events(job_id: str, request: Request) -> StreamingResponse:
        """Server-sent events: ``progress`` (the job's JSON) whenever it moves, then ``end`` once it is
        done, failed or cancelled.  A stream closes without ``end`` after 30 s: ask again to follow on.
        Send the API key as ``X-API-Key`` (read the stream with fetch; EventSource cannot send headers)."""
        _job(job_id)

        async def stream():  # noqa: ANN202
            last, quiet, ends = None, 0.0, time.monotonic() + SSE_MAX
            yield "retry: 1000\n\n"
            while time.monotonic() < ends:
                job = await asyncio.to_thread(store.get, job_id)
                if job is None:
                    yield 'event: end\ndata: {"deleted": true}\n\n'
                    return
                data = json.dumps(job_out(job))
                if job.state in FINISHED:
                    yield f"event: end\nid: {job.done}\ndata: {data}\n\n"
                    return
                if (job.state, job.done) != last:
                    last, quiet = (job.state, job.done), 0.0
                    yield f"event: progress\nid: {job.done}\ndata: {data}\n\n"
                elif quiet >= SSE_KEEPALIVE:
                    quiet = 0.0
                    yield ": keep-alive\n\n"
                if await request.is_disconnected():
                    return
                await asyncio.sleep(SSE_POLL)
                quiet += SSE_POLL

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    @app.post("/v1/jobs/{job_id}/cancel", response_model=jm.JobOut, tags=["jobs"],
              responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}})  # fmt: skip
    def cancel_job(job_id: str) -> dict:
        """Cancel a queued or running job: the claims not yet started are dropped, the results so far
        are kept (and downloadable).  409 for a job that has finished."""
        if _job(job_id).kind not in runner.kinds:
            raise _fail(
                409, f"job {job_id} is a {_job(job_id).kind}: it runs to its end, it cannot be cancelled"
            )
        if not store.cancel(job_id):
            job = _job(job_id)
            if job.state != "cancelled":  # cancelling twice is no error
                raise _fail(409, f"job {job_id} is {job.state}: there is nothing to cancel")
        return job_out(_job(job_id))

    @app.post("/v1/jobs/{job_id}/resume", response_model=jm.JobOut, tags=["jobs"],
              responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}})  # fmt: skip
    def resume_job(job_id: str) -> dict:
        """Queue a cancelled or failed job again: it goes on from its first claim without a result
        (409 for a job that is queued, running or done)."""
        job = _job(job_id)
        if job.kind not in runner.kinds:
            raise _fail(409, f"job {job_id} is a {job.kind}: it cannot be resumed (queue the edit again)")
        if not store.requeue(job_id):
            raise _fail(409, f"job {job_id} is {job.state}: only a cancelled or failed job resumes")
        runner.ensure_started()
        return job_out(_job(job_id))

    @app.delete("/v1/jobs/{job_id}", status_code=204, tags=["jobs"],
                responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}})  # fmt: skip
    def delete_job(job_id: str) -> Response:
        """Delete a finished job, its results and its uploaded file (409 while it is queued or running)."""
        job = _job(job_id)
        if job.state in ACTIVE or not store.delete(job_id):
            raise _fail(409, f"job {job_id} is {job.state}: cancel it first (POST /v1/jobs/{job_id}/cancel)")
        for p in uploads.glob(f"{job_id}.*"):
            p.unlink(missing_ok=True)
        (uploads / job_id).unlink(missing_ok=True)
        return Response(status_code=204)

    @app.get("/v1/jobs/{job_id}/results", response_model=jm.JobResultsPage, tags=["jobs"],
             responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}},
                        404: {"model": ErrorOut}})  # fmt: skip
    def job_results(
        job_id: str,
        format: Literal["json", "jsonl", "fever", "csv"] = "json",  # noqa: A002 - the query parameter's name
        label: jm.Verdict | None = None,
        gold: str | None = Query(None, max_length=40),
        correct: bool | None = None,
        q: str | None = Query(None, max_length=200),
        page: int = Query(1, ge=1),
        page_size: int = Query(50, ge=1, le=500),
    ) -> Response | dict:
        """The results so far, in the file's order.  ``format=json`` (default): a page of them, filtered
        by predicted ``label``, ``gold`` label, ``correct`` and text ``q``.  ``jsonl`` (garag's records,
        as ``garag predict`` writes them), ``fever`` (FEVER's official submission format, for
        ``garag evaluate --predictions``) and ``csv``: every result, as a download."""
        job = _job(job_id)
        if format != "json":
            media, ext = DOWNLOADS[format]
            body = download_lines(format, store.iter_records(job_id))
            disposition = f'attachment; filename="garag-job-{job.id}.{ext}"'
            return StreamingResponse(body, media_type=media, headers={"Content-Disposition": disposition})
        total, rows = store.results(job_id, label, gold, correct, q, (page - 1) * page_size, page_size)
        return {
            "job": job_id,
            "total": total,
            "page": page,
            "page_size": page_size,
            "pages": max(1, math.ceil(total / page_size)),
            "results": [
                {
                    "index": r.idx,
                    "id": r.record["id"],
                    "claim": r.record["claim"],
                    "gold_label": r.gold,
                    "predicted_label": r.record["predicted_label"],
                    "dataset_label": r.record["dataset_label"],
                    "correct": r.correct,
                    "scores": r.record.get("scores", {}),
                    "explanation": r.record.get("explanation", ""),
                    "predicted_evidence": r.record["predicted_evidence"],
                }
                for r in rows
            ],
        }

    return runner
