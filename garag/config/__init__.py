"""Typed configuration: one pydantic model per section, loaded from YAML.

Unknown keys are errors; every numeric setting declares its range once, in its
field; bad values raise :class:`ConfigError` with one line naming the key, what
is expected and the value given.  ``--set a.b=c`` overrides apply before
validation.  A file may ``extends:`` others, and ``a.yaml+b.yaml`` stacks files (``loader.py``).
The sections live by concern in ``run.py`` (data, paths, eval,
pipeline), ``retrieval.py`` (BM25, dense, pages, fusion, retrieval, GRAAL),
``models.py`` (verifier, training, LLM) and ``graph.py`` (decomposition,
triplets, propagation, linearization).
"""

from garag.config.base import ConfigError, Section, bounds_of, describe_range
from garag.config.graph import (
    DecompositionConfig,
    LinearizeConfig,
    PropagationConfig,
    ReasoningConfig,
    TripletConfig,
)
from garag.config.loader import (
    Config,
    check_override_scopes,
    config_files,
    config_name,
    load_config,
    load_config_with_sources,
    render_config,
    scoped_overrides,
    validate_config,
    with_overrides,
)
from garag.config.models import LLMConfig, TrainConfig, VerifierConfig
from garag.config.retrieval import (
    RETRIEVERS,
    BM25Config,
    DenseConfig,
    FusionConfig,
    GraalConfig,
    PagesConfig,
    RetrievalConfig,
)
from garag.config.run import DataConfig, EvalConfig, PathsConfig, PipelineConfig

__all__ = [
    "RETRIEVERS",
    "BM25Config",
    "Config",
    "ConfigError",
    "DataConfig",
    "DecompositionConfig",
    "DenseConfig",
    "EvalConfig",
    "FusionConfig",
    "GraalConfig",
    "LLMConfig",
    "LinearizeConfig",
    "ReasoningConfig",
    "PagesConfig",
    "PathsConfig",
    "PipelineConfig",
    "PropagationConfig",
    "RetrievalConfig",
    "Section",
    "TrainConfig",
    "TripletConfig",
    "VerifierConfig",
    "bounds_of",
    "check_override_scopes",
    "config_files",
    "config_name",
    "describe_range",
    "load_config",
    "load_config_with_sources",
    "render_config",
    "scoped_overrides",
    "validate_config",
    "with_overrides",
]
