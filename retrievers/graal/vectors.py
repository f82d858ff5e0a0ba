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
import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from garag.artifacts import artifact_dir, read_meta
from garag.config import DenseConfig
from retrievers.base import IndexContext
from retrievers.dense import VECTORS_FILE, FaissDenseRetriever
from retrievers.embeddings import EmbeddingCache

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexVectors:
    """Unit sentence vectors by store row (an ``(N, dim)`` array, usually a file mapping; rows of
    another type than float32 are read as float32 and re-normalised, as the embedding cache does).

    Attributes:
        matrix: row ``r`` is the vector of the store's sentence at row ``r``.
        source: where they come from (a path, or a name), for logs and benchmarks.
        mapped: the file mapping ``matrix`` views (:func:`open_vectors`), whose pages that rows are
            read from are asked for all at once before they are read; None for an array in memory.
        offset: the byte offset of row 0 in ``mapped``.
    """

    matrix: np.ndarray
    source: str
    mapped: mmap.mmap | None = None
    offset: int = 0

    def __post_init__(self) -> None:
        if self.matrix.ndim != 2:
            raise ValueError(f"{self.source}: sentence vectors must be a 2-d array, got {self.matrix.shape}")

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def rows(self, rows: list[int] | np.ndarray) -> np.ndarray:
        """float32 vectors of ``rows`` in the order given, read in ascending row order (each page's
        sentences are consecutive rows).

        Raises:
            ValueError: a row outside ``0..N-1``.
        """
        idx = np.asarray(rows, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            bad = idx[(idx < 0) | (idx >= len(self))][:5].tolist()
            raise ValueError(f"{self.source}: row ids out of range 0..{len(self) - 1}: {bad}")
        order = np.argsort(idx, kind="stable")
        if self.mapped is not None and idx.size:
            self._prefetch(idx[order])
        out = np.empty((idx.size, self.dim), dtype=np.float32)
        out[order] = self.matrix[idx[order]]
        if self.matrix.dtype != np.float32:  # as the embedding cache reads float16: re-normalised
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _prefetch(self, rows: np.ndarray) -> None:
        """Ask the kernel for the file pages of ``rows`` (ascending) at once (``MADV_WILLNEED`` per run
        of adjacent pages), so that rows not in the page cache are read from disk in parallel rather
        than one page fault after another (benchmarks/results/graal_cold.md, "reading rows")."""
        assert self.mapped is not None
        size = self.dim * self.matrix.dtype.itemsize
        first = (self.offset + rows * size) // mmap.PAGESIZE
        last = (self.offset + (rows + 1) * size - 1) // mmap.PAGESIZE
        breaks = np.flatnonzero(first[1:] > last[:-1] + 1) + 1
        for a, b in zip(first[np.r_[0, breaks]], last[np.r_[breaks - 1, len(rows) - 1]], strict=True):
            self.mapped.madvise(mmap.MADV_WILLNEED, int(a) * mmap.PAGESIZE, int(b - a + 1) * mmap.PAGESIZE)


def open_vectors(path: Path) -> IndexVectors:
    """Map an ``.npy`` matrix of vectors by store row read-only, telling the kernel that its rows are
    read at random (a few per query: no read-ahead of megabytes around each); the rows a query reads
    are prefetched together (:meth:`IndexVectors.rows`).

    Raises:
        OSError, ValueError: not a readable ``.npy`` file of a 2-d C-order matrix.
    """
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else None
        shape, fortran, dtype = (read_header or np.lib.format.read_array_header_2_0)(f)
        if fortran or len(shape) != 2:
            raise ValueError(f"{path}: not a 2-d C-order matrix (shape {shape})")
        offset = f.tell()
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_RANDOM"):
        mapped.madvise(mmap.MADV_RANDOM)
    matrix = np.frombuffer(mapped, dtype=dtype, count=shape[0] * shape[1], offset=offset).reshape(shape)
    return IndexVectors(matrix, str(path), mapped if hasattr(mmap, "MADV_WILLNEED") else None, offset)


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
        found = open_vectors(vectors)
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable (%s); GRAAL encodes its candidates", vectors, exc)
        return None
    if len(found) != n or meta.get("n") != n:
        shape = found.matrix.shape
        logger.warning(
            "%s: shape %s for a store of %d sentences; GRAAL encodes its candidates", vectors, shape, n
        )
        return None
    logger.info("graal: candidates' vectors from the dense index %s", path.name)
    return found
