"""garag: graph-augmented retrieval-augmented generation for fact verification.

The public entry point is :func:`load` (``garag.load("configs/graph.yaml").verify("claim")``),
which this module reaches lazily, so importing the core (``garag.config``, ``garag.store``, ...)
loads no stage.  The ``garag.*`` submodules are the core: types, readers, the sentence store,
configuration, artifacts and the LLM client.  The stages live in the sibling packages
``retrievers``, ``verifier``, ``pipeline``, ``training`` and ``eval``; the command line, the
service and this API in ``app``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["ClaimVerdict", "EvidenceSentence", "FactChecker", "__version__", "load"]

if TYPE_CHECKING:
    from app.api import ClaimVerdict, EvidenceSentence, FactChecker, load

_API = {"load", "FactChecker", "ClaimVerdict", "EvidenceSentence"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from app import api

        return getattr(api, name)
    raise AttributeError(f"module 'garag' has no attribute {name!r}")
