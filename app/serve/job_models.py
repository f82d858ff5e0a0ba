"""Pydantic models of the job endpoints of ``garag serve`` (they make the OpenAPI page)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .job_files import MAX_CLAIM_CHARS

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
Verdict = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobClaimIn(_Strict):
    """One claim of a JSON job: its text, and optionally its id and gold label."""

    claim: str = Field(min_length=1, max_length=MAX_CLAIM_CHARS)
    id: int | str | None = Field(None, description="default: its position, from 1")
    label: str | None = Field(None, description="FEVER's or HoVer's label; with labels the job is scored")


class JobRequest(_Strict):
    """A job from a JSON body (a file is sent as multipart/form-data instead: fields ``file``,
    ``config``, ``k``, ``format`` = auto|fever|hover|csv, ``name``)."""

    claims: list[str | JobClaimIn] = Field(min_length=1, description="claim texts or claim objects")
    config: str = Field("baseline", description="a loaded config's name (GET /v1/configs)")
    k: int | None = Field(None, ge=1, le=20, description="evidence sentences the verifier reads")
    name: str | None = Field(None, max_length=200, description="shown in the job list")


class JobOut(BaseModel):
    """A job and its progress (times are ISO 8601, UTC)."""

    id: str
    kind: str = Field(description='"claims": verify a file of claims')
    name: str
    config: str
    k: int | None
    state: JobState
    total: int
    done: int
    progress: float = Field(description="done / total, 0 to 1")
    claims_per_second: float | None = Field(description="claims done per second of work")
    eta_seconds: float | None = Field(description="seconds left at that rate (queued and running jobs)")
    created: str
    started: str | None
    finished: str | None
    error: str | None
    index_versions: list[str] = Field(description="the corpus versions the job's results answered from, "
                                      "in order (one unless the corpus changed during the job; each "
                                      "result's index_version says which)")  # fmt: skip
    format: str = Field(description="fever, hover, csv (the uploaded file) or json")
    filename: str | None
    labelled: int = Field(description="claims with a gold label (metrics are computed over them)")
    starts: int = Field(description="times a runner started it: more than 1 after a resume")
    metrics: dict[str, Any] | None = Field(description="garag evaluate's metrics, once done with gold labels")
    links: dict[str, str]


class JobsResponse(BaseModel):
    jobs: list[JobOut]


class JobResultOut(BaseModel):
    index: int = Field(description="the claim's position in the file, from 0")
    id: int | str
    claim: str
    gold_label: str | None
    predicted_label: Verdict
    dataset_label: str
    correct: bool | None
    scores: dict[str, float]
    explanation: str
    predicted_evidence: list[list[Any]]


class JobResultsPage(BaseModel):
    job: str
    total: int = Field(description="results matching the filters")
    page: int
    page_size: int
    pages: int
    results: list[JobResultOut]
