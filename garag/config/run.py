"""Run-level sections: which data, which stages, where results go, evaluation cut-offs."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from garag.config.base import Bool, Int, Section, Str

VERIFIERS = ("nli", "llm")
# Names of verifiers added with verifier.registry.register_verifier (as retrievers are added with
# retrievers.registry.register_retriever): configs may name them in ``pipeline.verifier`` too.
_REGISTERED_VERIFIERS: set[str] = set()


def register_verifier_name(name: str) -> None:
    """Let configs name the verifier ``name`` (called by ``verifier.registry.register_verifier``)."""
    _REGISTERED_VERIFIERS.add(name)


def known_verifiers() -> tuple[str, ...]:
    """garag's verifiers, then the registered ones (sorted)."""
    return VERIFIERS + tuple(sorted(_REGISTERED_VERIFIERS - set(VERIFIERS)))


class DataConfig(Section):
    """Which dataset to run on.

    Attributes:
        dataset: a registered dataset name ("fever", "hover") or "custom".
        claims: claims file; empty = the dataset's default.
        corpus: wiki-pages directory, .jsonl or .zip; empty = the dataset's default.
        claim_format: for "custom": "fever" or "hover".
        skip_bad_lines: skip and count malformed records instead of stopping.
        part: "all" claims, or only the "tune" or the "report" part of the split (pick settings
            on tune, report numbers on report; see garag/splits.py).
        split: the split file; empty = ``data/splits/<dataset>.json``.
        add_pages: wiki-pages files added to the corpus in order (a page id already there is
            replaced); indexes are derived from those of the corpus without them (garag/corpus.py).
        remove_pages: files of page ids (one per line) removed from the corpus after the adds.
    """

    section: ClassVar[str] = "data"
    HASH_OPTIONAL: ClassVar[dict[str, object]] = {
        "part": "all",
        "split": "",
        "add_pages": [],
        "remove_pages": [],
    }
    dataset: Str = "fever"
    claims: Str = ""
    corpus: Str = ""
    claim_format: Literal["fever", "hover"] = "fever"
    skip_bad_lines: Bool = False
    part: Literal["all", "tune", "report"] = "all"
    split: Str = ""
    add_pages: list[Str] = Field(default_factory=list)
    remove_pages: list[Str] = Field(default_factory=list)


class PathsConfig(Section):
    """Where artifacts and results go (relative paths are relative to the working directory)."""

    section: ClassVar[str] = "paths"
    cache_dir: Str = "cache"
    results_dir: Str = "results"


class EvalConfig(Section):
    """Retrieval evaluation settings.

    Attributes:
        ks: cut-offs for recall@k.
        limit: evaluate only the first N claims (0 = all).
    """

    section: ClassVar[str] = "eval"
    ks: list[Annotated[Int, Field(ge=1)]] = Field(default_factory=lambda: [5, 20, 100], min_length=1)
    limit: Int = Field(0, ge=0)


class PipelineConfig(Section):
    """Which stages run: baseline RAG or graph-augmented RAG, NLI or LLM verdicts.

    Attributes:
        mode: "baseline" (retrieval -> top-k sentences -> verifier) or "graph"
            (decomposition -> fused retrieval -> triplets -> local graph ranking ->
            graph-ranked evidence / linearized graph -> verifier).
        verifier: "nli" (the sequence classifier), "llm" (the chat model; the NLI
            verifier is its fallback) or any name registered with
            ``verifier.registry.register_verifier``.
        evidence_pool: graph mode: retrieved sentences put into the claim's local graph.
    """

    section: ClassVar[str] = "pipeline"
    mode: Literal["baseline", "graph"] = "baseline"
    verifier: Str = "nli"
    evidence_pool: Int = Field(20, ge=1, le=200)

    @field_validator("verifier")
    @classmethod
    def _known(cls, value: str) -> str:
        known = known_verifiers()
        if value not in known:
            raise ValueError(f"unknown verifier (known: {', '.join(known)})")
        return value
