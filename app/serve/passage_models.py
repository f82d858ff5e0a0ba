"""Pydantic models of the passage and history endpoints of ``garag serve`` (their OpenAPI schemas)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .models import VerifyResponse, _Strict

# a passage longer than this is refused with 422
MAX_PASSAGE_CHARS = 5000
# check-worthy claims verified per passage; the rest are listed with ``unverified`` saying why
MAX_PASSAGE_CLAIMS = 32

Label = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]


class PassageRequest(_Strict):
    """A text whose check-worthy claims are each verified with one loaded config."""

    passage: str = Field(
        min_length=1,
        max_length=MAX_PASSAGE_CHARS,
        description="the text as written (at most 5,000 characters)",
    )
    config: str = Field("baseline", description="a loaded config's name (GET /v1/configs)")
    k: int | None = Field(None, ge=1, le=20, description="evidence sentences the verifier reads")
    splitter: Literal["auto", "rule", "llm"] = Field(
        "auto",
        description="how claims are found: rule (one per check-worthy sentence), llm (the config's LLM "
        "restates each check-worthy sentence as standalone claims), auto (llm where the config has an "
        "LLM, else rule)",
    )


class PassageClaimOut(BaseModel):
    """One sentence of the passage, or one claim the LLM made of it: ``passage[start:end]`` is the
    sentence as written."""

    text: str = Field(description="the claim verified (the sentence as written, or the LLM's restatement)")
    start: int = Field(description="offset of the sentence's first character in the passage")
    end: int = Field(description="offset just past the sentence's last character")
    sentence: int = Field(description="the sentence's index in the passage (0-based)")
    checkworthy: bool
    reason: str = Field(description="why the sentence is (not) check-worthy")
    source: Literal["sentence", "llm"] = "sentence"
    result: VerifyResponse | None = Field(None, description="the /v1/verify response; null when not verified")
    unverified: str | None = Field(None, description="why a check-worthy claim has no result")
    history_id: int | None = Field(None, description="its entry in GET /v1/history (null with --no-history)")


class PassageResponse(BaseModel):
    passage: str
    config: str
    index_version: str = Field(description="the corpus version the config answered from")
    splitter: Literal["rule", "llm"]
    claims: list[PassageClaimOut] = Field(description="check-worthy claims, in passage order")
    skipped: list[PassageClaimOut] = Field(description="the sentences that are not check-worthy, with why")
    counts: dict[str, int] = Field(description="verdicts per label")
    timings: dict[str, float] = Field(description="seconds: split, verify, total")


class HistorySummary(BaseModel):
    id: int
    created: str = Field(description="UTC time, ISO 8601")
    source: Literal["verify", "batch", "passage"]
    request: str = Field(description="the request's id: entries of one batch or passage share it")
    config: str
    index_version: str
    k: int | None
    claim: str
    label: Label
    scores: dict[str, float]


class HistoryPage(BaseModel):
    total: int
    page: int
    page_size: int
    pages: int
    configs: list[str] = Field(description="every config the history has entries of")
    items: list[HistorySummary]


class HistoryEntry(HistorySummary):
    response: dict[str, Any] = Field(description="the whole /v1/verify response")


class Deleted(BaseModel):
    deleted: int
