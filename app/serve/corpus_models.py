"""Pydantic models of the corpus endpoints of ``garag serve`` (/v1/corpus*, app/serve/corpus_routes.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RemoveRequest(BaseModel):
    """Page ids to remove from a config's corpus (every config on that corpus)."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1, description="page ids, e.g. ['Page_One', 'Page_Two']")
    config: str | None = Field(
        None, description="a loaded config whose corpus is edited (default: the first)"
    )


class CorpusConfigOut(BaseModel):
    """What one config answers from now."""

    name: str
    corpus_id: str = Field(description="configs with the same corpus id share their corpus and its edits")
    corpus: str = Field(description="the base corpus (data.corpus)")
    pages: int
    sentences: int
    index_version: str = Field(description="the index version its answers carry (/v1/verify index_version)")
    edits_applied: int


class EditOut(BaseModel):
    seq: int = Field(description="edits of all corpora are numbered in the order they came")
    kind: Literal["add", "remove"]
    pages: int = Field(description="pages added or removed")
    page_ids: list[str] = Field(description="the first 20 of them")
    status: Literal["pending", "applied", "failed"]
    update: str = Field(description="the update that applies it (GET /v1/corpus/updates/{id})")
    created: str


class CorpusOut(BaseModel):
    id: str
    corpus: str
    configs: list[str]
    edits: list[EditOut]


class UpdateOut(BaseModel):
    """A corpus update: builds the new indexes (derived from the current ones), then switches to them."""

    kind: Literal["corpus_update"]
    id: str
    corpus_id: str
    edit: int = Field(description="the edit it applies (with every earlier one of its corpus)")
    configs: list[str]
    status: Literal["queued", "running", "done", "failed"]
    phase: str
    progress: float = Field(description="0 to 1: the configs whose pipelines are built")
    error: str | None
    created: str
    started: str | None
    finished: str | None
    result: dict[str, dict[str, int | str]] = Field(
        description="once done, per config: index_version, pages, sentences"
    )
    job: str | None = Field(None, description="the update's entry among the jobs (GET /v1/jobs/{job})")


class CorpusResponse(BaseModel):
    configs: list[CorpusConfigOut]
    corpora: list[CorpusOut]
    updates: list[UpdateOut] = Field(description="the updates not finished, then the 10 last finished")


class EditAccepted(BaseModel):
    """An edit saved and its update queued (202): poll the update for its progress."""

    update: UpdateOut
    edit: EditOut
    configs: list[str] = Field(description="the configs the edit applies to (those on the same corpus)")
    not_applied: list[str] = Field(description="loaded configs on another corpus, which it leaves alone")
    replaced: list[str] = Field(description="uploaded pages that replace a page of the same id")


class PageSentenceOut(BaseModel):
    line: int
    text: str = Field(description="as people write it (FEVER's -LRB- and spacing undone)")
    raw_text: str = Field(description="as the corpus stores it")


class PageOut(BaseModel):
    page: str
    config: str
    index_version: str
    sentences: list[PageSentenceOut] = Field(description="its non-empty sentences, in line order")
