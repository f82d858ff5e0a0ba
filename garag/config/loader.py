"""The whole config: YAML files, ``--set a.b=c`` overrides, and where each value came from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as _ValidationError

from garag.config.base import ConfigError, describe_error
from garag.config.graph import (
    DecompositionConfig,
    LinearizeConfig,
    PropagationConfig,
    ReasoningConfig,
    TripletConfig,
)
from garag.config.models import LLMConfig, TrainConfig, VerifierConfig
from garag.config.retrieval import (
    BM25Config,
    DenseConfig,
    FusionConfig,
    GraalConfig,
    PagesConfig,
    RetrievalConfig,
)
from garag.config.run import DataConfig, EvalConfig, PathsConfig, PipelineConfig

DEFAULT_SOURCE = "default"


class Config(BaseModel):
    """The whole configuration of a run: one section per concern."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    data: DataConfig = Field(default_factory=DataConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    paths: PathsConfig = Field(default_factory=PathsConfig)
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    pages: PagesConfig = Field(default_factory=PagesConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    graal: GraalConfig = Field(default_factory=GraalConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    decomposition: DecompositionConfig = Field(default_factory=DecompositionConfig)
    triplets: TripletConfig = Field(default_factory=TripletConfig)
    propagation: PropagationConfig = Field(default_factory=PropagationConfig)
    linearize: LinearizeConfig = Field(default_factory=LinearizeConfig)
    reasoning: ReasoningConfig = Field(default_factory=ReasoningConfig)

    # Sections added after runs and artifacts were hashed: left out of :meth:`hash_dict` while
    # every key has its default.
    HASH_OPTIONAL_SECTIONS: ClassVar[tuple[str, ...]] = ("reasoning",)

    def to_dict(self) -> dict:
        """Plain JSON/YAML-able values, sections in declaration order."""
        return self.model_dump()

    def hash_dict(self) -> dict:
        """:meth:`to_dict` for run and artifact hashes (see :attr:`Section.HASH_OPTIONAL`)."""
        out = {}
        for name in type(self).model_fields:
            section = getattr(self, name)
            if name in self.HASH_OPTIONAL_SECTIONS and section == type(section)():
                continue
            out[name] = section.hash_dump()
        return out


def validate_config(data: Any) -> Config:
    """Build a :class:`Config` from a nested mapping.

    Raises:
        ConfigError: unknown keys, wrong types or bad values, naming the key.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"config: expected a mapping, got {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except _ValidationError as e:
        raise ConfigError(describe_error(e, Config)) from None


def _apply_override(data: dict, assignment: str, sources: dict[str, str]) -> None:
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key.path=value")
    path, raw = assignment.split("=", 1)
    keys = path.strip().split(".")
    if not all(keys):
        raise ConfigError(f"--set {assignment!r}: empty key in {path.strip()!r}")
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: {k} is not a section")
    try:
        node[keys[-1]] = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError as e:
        reason = str(e).splitlines()[0]
        raise ConfigError(f"--set {assignment!r}: the value is not valid YAML ({reason})") from None
    _mark(sources, ".".join(keys), node[keys[-1]], f"--set {assignment}")


def _mark(sources: dict[str, str], key: str, value: Any, source: str) -> None:
    """Record ``source`` for ``key`` and, for a mapping, for each key below it."""
    sources[key] = source
    if isinstance(value, dict):
        for k, v in value.items():
            _mark(sources, f"{key}.{k}", v, source)


def _read_yaml(path: str | Path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found")
    try:
        loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text (byte {e.start})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{p}{where}: not valid YAML ({problem})") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{p}: the top level must be a mapping")
    return loaded


def load_config_with_sources(
    path: str | Path | None = None, overrides: list[str] | None = None
) -> tuple[Config, dict[str, str]]:
    """Like :func:`load_config`, plus ``{dotted key: source}`` for every value not left at its default."""
    data: dict = {}
    sources: dict[str, str] = {}
    if path is not None:
        data = _read_yaml(path)
        for key, value in data.items():
            _mark(sources, str(key), value, str(path))
    for o in overrides or []:
        _apply_override(data, o, sources)
    return validate_config(data), sources


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults) and apply ``key.path=value`` overrides.

    Raises:
        ConfigError: unknown keys, wrong types or bad values, naming the key.
    """
    return load_config_with_sources(path, overrides)[0]


def _flow(value: Any) -> str:
    """One YAML flow scalar, list or mapping on one line."""
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()


def render_config(config: Config, sources: dict[str, str] | None = None) -> str:
    """The resolved config as YAML, each value followed by ``# <source>`` (file, --set or default).

    The text loads back (``load_config``) to the same config.
    """
    sources = sources or {}
    lines = []
    for section, values in config.to_dict().items():
        lines.append(f"{section}:")
        for key, value in values.items():
            dotted = f"{section}.{key}"
            source = sources.get(dotted) or sources.get(section) or DEFAULT_SOURCE
            lines.append(f"  {key}: {_flow(value)}  # {source}")
    return "\n".join(lines) + "\n"


def with_overrides(config: Config, overrides: Sequence[str]) -> Config:
    """``config`` with ``key.path=value`` overrides applied (as ``--set`` does), validated again."""
    if not overrides:
        return config
    data = config.to_dict()
    for o in overrides:
        _apply_override(data, o, {})
    return validate_config(data)
