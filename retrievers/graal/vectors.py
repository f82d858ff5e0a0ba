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
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from garag.artifacts import artifact_dir, read_meta
from garag.config import DenseConfig
from retrievers.base import IndexContext
from retrievers.dense import VECTORS_FILE, FaissDenseRetriever
from retrievers.embeddings import EmbeddingCache

logger = logging.getLogger(__name__)


_FLOATS = ("<f4", "<f2")


@dataclass(frozen=True)
class IndexVectors:
    """Unit sentence vectors by store row: the rows of an ``.npy`` matrix file, read a few at a time
    with plain file reads (the OS page cache holds the file, not this process's memory: no mapping
    whose touched pages would count in its RSS).  float32 as the dense index writes them, or
    float16 (read as float32 and re-normalised, as the embedding cache reads float16).

    Attributes:
        path: the ``.npy`` file; row ``r`` is the vector of the store's sentence at row ``r``.
        shape: ``(rows, dim)``.
        dtype: ``"<f4"`` or ``"<f2"``.
        offset: the byte offset of row 0 in the file.
    """

    path: Path
    shape: tuple[int, int]
    dtype: str
    offset: int

    @classmethod
    def open(cls, path: str | Path) -> IndexVectors:
        """Read the file's header (cheap).

        Raises:
            OSError: the file cannot be read.
            ValueError: not an ``.npy`` file of a 2-d C-order float32/float16 matrix, or shorter than
                its header says.
        """
        path = Path(path)
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else None
            shape, fortran, dtype = (read_header or np.lib.format.read_array_header_2_0)(f)
            offset = f.tell()
        if fortran or len(shape) != 2 or dtype.str not in _FLOATS:
            raise ValueError(f"{path}: not a 2-d C-order float32/float16 matrix ({dtype}, shape {shape})")
        if path.stat().st_size < offset + shape[0] * shape[1] * dtype.itemsize:
            raise ValueError(f"{path}: shorter than its {shape} matrix (truncated)")
        return cls(path, (int(shape[0]), int(shape[1])), dtype.str, offset)

    @property
    def source(self) -> str:
        return str(self.path)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def dim(self) -> int:
        return self.shape[1]

    def rows(self, rows: list[int] | np.ndarray) -> np.ndarray:
        """float32 vectors of ``rows`` in the order given (repeats allowed): one read per run of
        consecutive rows (a candidate page's sentences are consecutive rows), all the runs asked for
        first (``POSIX_FADV_WILLNEED``), so that rows not in the page cache are read from disk in
        parallel rather than one read after another.

        Raises:
            ValueError: a row outside ``0..N-1``.
        """
        idx = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.empty((idx.size, self.dim), dtype=np.float32)
        if not idx.size:
            return out
        if idx.min() < 0 or idx.max() >= len(self):
            bad = idx[(idx < 0) | (idx >= len(self))][:5].tolist()
            raise ValueError(f"{self.path}: row ids out of range 0..{len(self) - 1}: {bad}")
        order = np.argsort(idx, kind="stable")
        ordered = idx[order]
        starts = np.flatnonzero(np.diff(ordered, prepend=ordered[0] - 2) > 1)  # a repeat continues a run
        ends = np.append(starts[1:], len(ordered))
        size = self.dim * np.dtype(self.dtype).itemsize
        spans = [(int(ordered[a]), int(ordered[b - 1]) + 1) for a, b in zip(starts, ends, strict=True)]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead around a few rows
            for first, stop in spans if len(spans) > 1 else ():
                os.posix_fadvise(
                    fd, self.offset + first * size, (stop - first) * size, os.POSIX_FADV_WILLNEED
                )
            for (first, stop), a, b in zip(spans, starts, ends, strict=True):
                block = os.pread(fd, (stop - first) * size, self.offset + first * size)
                vecs = np.frombuffer(block, dtype=self.dtype).reshape(stop - first, self.dim)
                out[order[a:b]] = vecs[ordered[a:b] - first]
        finally:
            os.close(fd)
        if self.dtype != "<f4":  # as the embedding cache reads float16: re-normalised
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
