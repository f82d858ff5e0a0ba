"""Retrievers by name, imported lazily, with an install hint for missing extras."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from garag.config import Config
from garag.config.base import check_component_name
from garag.config.retrieval import RETRIEVERS, register_retriever_name
from retrievers.base import IndexContext, Retriever

RetrieverFactory = Callable[[Config, IndexContext], Retriever]


def _bm25(config: Config, ctx: IndexContext) -> Retriever:
    from retrievers.bm25 import BM25Retriever

    return BM25Retriever(config.bm25, ctx)


def _dense(config: Config, ctx: IndexContext) -> Retriever:
    from retrievers.dense import FaissDenseRetriever

    return FaissDenseRetriever(config.dense, ctx)


def _pages(config: Config, ctx: IndexContext) -> Retriever:
    from retrievers.pages import PageRetriever

    return PageRetriever(config.pages, config.bm25, ctx)


def _graal(config: Config, ctx: IndexContext) -> Retriever:
    from retrievers.graal.retriever import GraalRetriever

    return GraalRetriever(config.graal, config.dense, ctx)


_FACTORIES: dict[str, tuple[RetrieverFactory, tuple[str, ...]]] = {
    "bm25": (_bm25, ("bm25s", "Stemmer")),
    "dense": (_dense, ("faiss", "sentence_transformers")),
    "pages": (_pages, ("bm25s",)),
    "graal": (_graal, ("spacy", "sentence_transformers")),
}


def register_retriever(name: str, factory: RetrieverFactory, modules: tuple[str, ...] = ()) -> None:
    """Add a retriever that configs can then name in ``retrieval.retrievers`` and weigh in
    ``fusion.weights``.

    Args:
        name: its name (letters, digits, ``_`` and ``-``); garag's own names are taken.
        factory: ``(config, ctx) -> retriever``, cheap (the index is built in ``build()``).
        modules: Python modules it needs, checked before ``factory`` runs for an install hint.

    Raises:
        ValueError: a bad or taken name.
    """
    check_component_name("retriever", name, RETRIEVERS)
    _FACTORIES[name] = (factory, tuple(modules))
    register_retriever_name(name)


def available() -> list[str]:
    """Names of all registered retrievers."""
    return sorted(_FACTORIES)


def create_retriever(name: str, config: Config, ctx: IndexContext) -> Retriever:
    """Construct (cheaply) the retriever called ``name``.

    Raises:
        ValueError: unknown name.
        ImportError: an optional dependency is missing, with the pip command to fix it.
    """
    if name not in _FACTORIES:
        raise ValueError(f"unknown retriever {name!r} (known: {', '.join(available())})")
    factory, modules = _FACTORIES[name]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ImportError(
                f"retriever {name!r} needs the Python module {module!r}: pip install garag"
            ) from e
    return factory(config, ctx)
