"""Pydantic models of every request and response of ``garag serve`` (they make the OpenAPI page)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# a claim longer than this is refused with 422 (FEVER claims are < 400 characters)
MAX_CLAIM_CHARS = 2000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifyRequest(_Strict):
    """One claim to verify with one loaded config."""

    claim: str = Field(min_length=1, max_length=MAX_CLAIM_CHARS, description="the claim as written")
    config: str = Field("baseline", description="a loaded config's name (GET /v1/configs)")
    k: int | None = Field(None, ge=1, le=20, description="evidence sentences the verifier reads")


class BatchRequest(_Strict):
    """Several claims for one config (at most the server's batch limit: 413 beyond it)."""

    claims: list[str] = Field(min_length=1, description="the claims")
    config: str = "baseline"
    k: int | None = Field(None, ge=1, le=20)


class EvidenceOut(BaseModel):
    """One evidence sentence the verifier read."""

    page: str
    line: int
    text: str = Field(description="the sentence as people write it (FEVER's -LRB- and spacing undone)")
    raw_text: str = Field(description="the sentence as the corpus stores it")
    score: float = Field(description="the ranking score (retrieval fusion, or the graph's eq. 4)")
    retrievers: list[str] = Field(description="the retrievers that found it (bm25, dense, graal)")
    cited: bool = Field(description="the verdict cites it as evidence")


class NodeOut(BaseModel):
    id: str
    kind: Literal["fact", "entity"]
    label: str
    score: float = Field(description="fact: eq. 4 score; entity: propagated score")
    propagated: float
    page: str | None = None
    line: int | None = None
    text: str | None = Field(None, description="fact nodes: the sentence, as people write it")
    raw_text: str | None = Field(None, description="fact nodes: the sentence as the corpus stores it")
    claim: bool = Field(False, description="entity nodes: one of the claim's entities")


class EdgeOut(BaseModel):
    source: str
    target: str
    kind: Literal["page", "mention", "relation", "cooccurrence"]
    weight: float
    relations: list[str] = []


class GraphOut(BaseModel):
    """The claim's local fact graph (graph configs): nodes sized by their propagated scores."""

    nodes: list[NodeOut]
    edges: list[EdgeOut]
    claim_entities: list[str]
    covered: list[str]


class PathOut(BaseModel):
    """Why GRAAL retrieved a sentence: a path between claim entities, an entity's page, a mention."""

    page: str
    line: int
    reason: str
    entities: list[str]
    edges: list[list[str]] = Field(description="[u, v] entity pairs co-mentioned in the sentence")


class VerifyResponse(BaseModel):
    claim: str
    config: str
    label: Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    dataset_label: str = Field(description="the label in the loaded dataset's own vocabulary")
    scores: dict[str, float]
    explanation: str
    evidence: list[EvidenceOut]
    steps: dict[str, Any] | None = Field(None, description="the reasoning program, where the config has one")
    subquestions: list[str] = []
    graph: GraphOut | None = None
    graal_paths: list[PathOut] = []
    timings: dict[str, float] = Field(description="seconds per stage, and the request's total")
    index_version: str = Field(
        description="the corpus and indexes the answer comes from (GET /v1/corpus; it changes when a "
        "corpus update switches in)"
    )


class BatchResponse(BaseModel):
    results: list[VerifyResponse]


class ConfigOut(BaseModel):
    name: str
    mode: str
    verifier: str
    llm_judge: str = "never"
    retrievers: list[str]
    top_k: int
    dataset: str
    source: str


class ConfigsResponse(BaseModel):
    configs: list[ConfigOut]
    max_batch: int


class Health(BaseModel):
    status: Literal["ok"]
    version: str


class Ready(BaseModel):
    ready: bool
    configs: list[str]
    error: str | None = None


class RunSummary(BaseModel):
    run_id: str
    dataset: str
    systems: list[str]
    n_claims: int
    metrics: dict[str, dict[str, float | None]]


class RunsResponse(BaseModel):
    runs: list[RunSummary]


class RunDetail(BaseModel):
    run_id: str
    dataset: str
    systems: list[str]
    n_claims: int
    metrics: dict[str, dict[str, Any]]
    significance: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    labels: list[str]
    hops: list[int]


class SystemPrediction(BaseModel):
    predicted_label: str
    dataset_label: str
    correct: bool | None
    explanation: str
    evidence_read: list[list[Any]]
    scores: dict[str, float] = {}


class RunClaim(BaseModel):
    id: int | str
    claim: str
    label: str | None
    hops: int | None
    slices: list[str]
    systems: dict[str, SystemPrediction]


class RunClaimsResponse(BaseModel):
    run_id: str
    total: int
    page: int
    page_size: int
    pages: int
    claims: list[RunClaim]


class SentenceOut(BaseModel):
    page: str
    line: int
    text: str | None = Field(description="as people write it; None where no loaded config reads the corpus")
    raw_text: str | None = Field(description="as the corpus stores it")


class RunClaimDetail(BaseModel):
    run_id: str
    claim: RunClaim
    gold_evidence: list[list[SentenceOut]]
    sentences: dict[str, list[SentenceOut]] = Field(description="per system: the evidence it read, with text")
    records: dict[str, dict[str, Any]] = Field(description="per system: the whole prediction record")


class ErrorOut(BaseModel):
    """Every error: a status code and one line (never a stack trace)."""

    error: str
    status: int
    detail: list[dict[str, Any]] | None = None
