"""The whole config: YAML files, ``--set a.b=c`` overrides, and where each value came from.

A config file may say ``extends: base.yaml`` (or a list of files, applied in order; paths are
relative to the file that says it): its values are merged over the base's, mappings key by key,
any other value (a list too) replaced.  A config *spec* is one file or several joined by ``+``
(``configs/graph.yaml+configs/joint.yaml``), each merged over the ones before it in the same way;
it is named by its files' stems joined by ``-`` (``graph-joint``).
"""

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
EXTENDS = "extends"
SPEC_SEPARATOR = "+"
ConfigSpec = str | Path | Sequence[str | Path]


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


def validate_config(data: Any, sources: dict[str, str] | None = None) -> Config:
    """Build a :class:`Config` from a nested mapping.

    Raises:
        ConfigError: unknown keys, wrong types or bad values, naming the key (and, for an
            unknown key, the file it came from where ``sources`` records one).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"config: expected a mapping, got {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except _ValidationError as e:
        message = describe_error(e, Config)
        key = _unknown_key(data)
        where = (sources or {}).get(key or "", "")
        if key and message.startswith(f"{key.rpartition('.')[0] or 'config'}: unknown key(s)"):
            if where and not where.startswith("--set"):
                message = f"{where}: {message}"
        raise ConfigError(message) from None


def _unknown_key(data: dict) -> str | None:
    """The first key of ``data`` that is no section, or no key of its section (dotted)."""
    for section, values in data.items():
        info = Config.model_fields.get(str(section))
        if info is None:
            return str(section)
        if isinstance(values, dict):
            known = info.annotation.model_fields  # type: ignore[union-attr]
            unknown = [k for k in values if str(k) not in known]
            if unknown:
                return f"{section}.{unknown[0]}"
    return None


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


def _merge(
    data: dict, sources: dict[str, str], over: dict, over_sources: dict[str, str], prefix: str = ""
) -> None:
    """Merge ``over`` into ``data`` in place: mappings key by key, any other value replaced.

    ``sources`` takes each merged value's source from ``over_sources``; a mapping that both sides
    fill is recorded as ``"<earlier source> + <later source>"``.
    """
    for k, v in over.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            if key in sources:
                both = [*sources[key].split(" + "), *over_sources[key].split(" + ")]
                sources[key] = " + ".join(dict.fromkeys(both))
            _merge(data[k], sources, v, over_sources, f"{key}.")
            continue
        below = f"{key}."
        for stale in [s for s in sources if s.startswith(below)]:
            del sources[stale]
        data[k] = v
        sources.update({s: src for s, src in over_sources.items() if s == key or s.startswith(below)})


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


def config_files(spec: ConfigSpec) -> list[Path]:
    """The files of a config spec: a path, a string of paths joined by ``+``, or a list of paths."""
    if isinstance(spec, Path):
        return [spec]
    parts = spec.split(SPEC_SEPARATOR) if isinstance(spec, str) else [str(p) for p in spec]
    if not parts or not all(p.strip() for p in parts):
        raise ConfigError(f"{spec}: expected FILE or FILE{SPEC_SEPARATOR}FILE..., with no empty file name")
    return [Path(p.strip()) for p in parts]


def config_name(spec: ConfigSpec) -> str:
    """A config spec's name: its files' stems joined by ``-`` (``graph.yaml+joint.yaml``: ``graph-joint``)."""
    return "-".join(p.stem for p in config_files(spec))


def _load_file(path: Path, chain: tuple[Path, ...] = ()) -> tuple[dict, dict[str, str]]:
    """One file's values merged over those of the files it extends, and each value's file."""
    data = _read_yaml(path)
    bases = data.pop(EXTENDS, None)
    sources: dict[str, str] = {}
    for key, value in data.items():
        _mark(sources, str(key), value, str(path))
    if bases is None:
        return data, sources
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not bases or not all(isinstance(b, str) and b.strip() for b in bases):
        raise ConfigError(f"{path}: {EXTENDS}: expected a file name or a list of them, got {bases!r}")
    chain = (*chain, path)
    merged: dict = {}
    merged_sources: dict[str, str] = {}
    for name in bases:
        base = path.parent / name
        seen = [c.resolve() for c in chain]
        if base.resolve() in seen:
            cycle = [*chain[seen.index(base.resolve()) :], base]
            raise ConfigError(f"{chain[0]}: {EXTENDS} cycle {' -> '.join(str(c) for c in cycle)}")
        if not base.is_file():
            raise ConfigError(f"{path}: {EXTENDS} {name}: config file not found ({base})")
        _merge(merged, merged_sources, *_load_file(base, chain))
    _merge(merged, merged_sources, data, sources)
    return merged, merged_sources


def load_config_with_sources(
    spec: ConfigSpec | None = None, overrides: list[str] | None = None
) -> tuple[Config, dict[str, str]]:
    """Like :func:`load_config`, plus ``{dotted key: source}`` for every value not left at its default
    (the file it came from, through ``extends`` and ``+`` too, or the ``--set``)."""
    data: dict = {}
    sources: dict[str, str] = {}
    if spec is not None:
        for path in config_files(spec):
            _merge(data, sources, *_load_file(path))
    for o in overrides or []:
        _apply_override(data, o, sources)
    return validate_config(data, sources), sources


def load_config(spec: ConfigSpec | None = None, overrides: list[str] | None = None) -> Config:
    """Load a config spec (one YAML file, or files joined by ``+``; None: the defaults) and apply
    ``key.path=value`` overrides.

    Raises:
        ConfigError: unknown keys, wrong types or bad values, naming the key; a missing file,
            a missing base or a cycle of ``extends``, naming the file.
    """
    return load_config_with_sources(spec, overrides)[0]


def scoped_overrides(name: str, overrides: Sequence[str]) -> list[str]:
    """The overrides for the config named ``name``: ``key=value`` ones, and ``NAME:key=value`` ones for it."""
    out = []
    for o in overrides:
        scope, sep, rest = o.partition(":")
        if sep and "=" not in scope:
            if scope == name:
                out.append(rest)
        else:
            out.append(o)
    return out


def check_override_scopes(names: Sequence[str], overrides: Sequence[str]) -> None:
    """Refuse a ``NAME:key=value`` override whose NAME is none of ``names``."""
    for o in overrides:
        scope, sep, _ = o.partition(":")
        if sep and "=" not in scope and scope not in names:
            known = f"the names: {', '.join(names)}" if names else "no --config is given"
            raise ConfigError(f"--set {o!r}: no config is named {scope!r} ({known})")


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
