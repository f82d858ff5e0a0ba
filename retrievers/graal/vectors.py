"""Sentence vectors computed at index time, read by GRAAL's re-ranking instead of encoding its
candidates per query.

The dense index keeps every sentence's vector by store row (``vectors.npy`` of its artifact, see
retrievers/dense.py).  Its artifact is named by the encoder's model identity, the title prefix
and the embedding cache's storage type, the same things that make GRAAL's own encoding of a
sentence (``EmbeddingCache.encode_cached(sentence_text(...))``): when a dense artifact was built
with GRAAL's settings, its row ``r`` *is*, bit for bit, the vector GRAAL's encoder path gives the
sentence at row ``r`` (both come out of the same embedding cache).  :func:`find_index_vectors`
finds that artifact; anything else (no dense index built, another model or dtype) gives None and
GRAAL encodes its candidates as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from garag.artifacts import artifact_dir, read_meta
from garag.config import DenseConfig
from retrievers.base import IndexContext
from retrievers.dense import VECTORS_FILE, FaissDenseRetriever
from retrievers.dense_index import VectorFile
from retrievers.embeddings import EmbeddingCache

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexVectors:
    """Unit sentence vectors by store row, read a few rows at a time from an ``.npy`` file
    (:class:`retrievers.dense_index.VectorFile`): float32 as the dense index writes them, or
    float16 (re-normalised after reading, as the embedding cache reads float16).

    Attributes:
        file: the ``.npy`` file; row ``r`` is the vector of the store's sentence at row ``r``.
    """

    file: VectorFile

    @classmethod
    def open(cls, path: str | Path) -> IndexVectors:
        """Read the file's header (cheap).

        Raises:
            OSError: the file cannot be read.
            ValueError: not an ``.npy`` file of a 2-d C-order float32/float16 matrix, or shorter than
                its header says.
        """
        return cls(VectorFile(path))

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def shape(self) -> tuple[int, int]:
        return self.file.shape

    @property
    def source(self) -> str:
        return str(self.file.path)

    def __len__(self) -> int:
        return self.file.shape[0]

    @property
    def dim(self) -> int:
        return self.file.shape[1]

    def rows(self, rows: list[int] | np.ndarray) -> np.ndarray:
        """float32 unit vectors of ``rows`` in the order given (repeats allowed).

        Raises:
            ValueError: a row outside ``0..N-1``.
        """
        out = self.file.take(rows)
        if self.file.dtype != "<f4":
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        return out


def dense_artifact(dense_config: DenseConfig, ctx: IndexContext, cache: EmbeddingCache, n: int) -> Path:
    """The directory of the dense artifact that ``dense_config`` builds over ``ctx``'s store of
    ``n`` sentences with ``cache``'s encoder and storage type (it may not exist)."""
    dense = FaissDenseRetriever(dense_config, ctx, encoder=cache.encoder, cache_dtype=cache.dtype.name)
    return artifact_dir(ctx.cache_dir, "dense", dense.settings(n), ctx.fingerprint)


def find_index_vectors(
    dense_config: DenseConfig, ctx: IndexContext, cache: EmbeddingCache, n: int
) -> IndexVectors | None:
    """The index-time vectors of ``ctx``'s store that equal ``cache.encode_cached`` of each
    sentence's text: those of a complete dense artifact built with the same model files, title
    prefix and cache storage type over the same corpus; None when there is none.

    Args:
        dense_config: the dense settings GRAAL encodes with (model, title prefix, index choice).
        ctx: store, cache root, corpus fingerprint.
        cache: GRAAL's embedding cache (its encoder and storage type).
        n: the store's sentences.
    """
    try:
        path = dense_artifact(dense_config, ctx, cache, n)
    except ValueError as exc:  # settings no dense index can be built with (e.g. ivf_nlist > n)
        logger.debug("graal: no index-time vectors (%s)", exc)
        return None
    meta = read_meta(path)
    vectors = path / VECTORS_FILE
    if meta is None or meta.get("kind") != "dense" or not vectors.is_file():
        return None
    try:
        found = IndexVectors.open(vectors)
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable (%s); GRAAL encodes its candidates", vectors, exc)
        return None
    if len(found) != n or meta.get("n") != n:
        logger.warning(
            "%s: shape %s for a store of %d sentences; GRAAL encodes its candidates", vectors, found.shape, n
        )
        return None
    logger.info("graal: candidates' vectors from the dense index %s", path.name)
    return found
