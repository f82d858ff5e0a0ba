"""The FAISS index of the dense retriever: which kind a corpus gets, what it costs in memory, and
its build from the vectors file in bounded memory.

``dense.index: auto`` takes the first kind that fits ``dense.index_memory_gb``: the flat index up to
``dense.flat_max`` vectors, then ``dense.large_index``, else IVF-PQ (the smallest: ``pq_m`` + 8 bytes
a vector, the retriever re-scores its candidates exactly from the stored vectors).  The memory of
each kind is :func:`index_memory`, a model of FAISS's layout whose constants come from peak RSS
measured while building and searching (benchmarks/index_memory.py).

The build never holds the vectors in memory: they are written row block by row block to
``vectors.npy`` (:class:`VectorWriter`), IVF cells are trained on a sample of at most
``IVF_TRAIN_MAX`` rows, and the index takes the rows in blocks of ``ADD_CHUNK`` (:class:`VectorFile`).
Searches read the rows they re-score the same way.  Plain file reads, not a memory map: a memory
map would keep every page it touched (and, once the file is in the page cache, the 16 pages around
each: the kernel's fault-around) counted in the process's resident memory, up to the whole file.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from garag.config import DenseConfig

ADD_CHUNK = 65_536  # rows added to the index at a time
IVF_TRAIN_PER_LIST = 256  # k-means reads at most this many points per cell (FAISS's own cap)
IVF_TRAIN_MAX = 262_144  # rows of the training sample, whatever the corpus size
IVF_MIN_PER_LIST = 64  # ... so ``ivf_nlist: 0`` makes at most IVF_TRAIN_MAX / 64 = 4,096 cells
PQ_CODES = 256  # centroids per 8-bit sub-quantizer
SEED = 1234
_GB = 1 << 30

# Bytes beyond the vectors' own (benchmarks/results/index_memory.md): a FAISS vector store (an
# inverted list, HNSW's flat storage) grows as a std::vector does, to up to twice its entries while
# the index is built (GROWTH; IVF-PQ's lists measured 1.4x on average, 2x bounds it); IVF training
# holds the sample and FAISS's copies of it (IVF_TRAIN_COPIES; measured 1.54x); an HNSW vector
# keeps 2 x hnsw_m neighbour ids of 4 bytes at level 0 and about 1 / (hnsw_m - 1) of that above.
GROWTH = 2.0
IVF_TRAIN_COPIES = 1.6
IVF_ID_BYTES = 8


def ivf_nlist(config: DenseConfig, n: int) -> int:
    """IVF cell count: ``dense.ivf_nlist``, or ``4*sqrt(n)`` (at most ``IVF_TRAIN_MAX / 64``) when 0.

    Raises:
        ValueError: more cells than vectors.
    """
    nlist = config.ivf_nlist or min(max(1, int(round(4 * math.sqrt(n)))), IVF_TRAIN_MAX // IVF_MIN_PER_LIST)
    if nlist > n:
        raise ValueError(f"dense.ivf_nlist: {nlist} IVF cells for only {n} vectors (need nlist <= N)")
    return nlist


def ivf_train_size(n: int, nlist: int) -> int:
    """Rows of the IVF training sample: all of a small corpus, at most 256 per cell (k-means would
    subsample the rest) and at most ``IVF_TRAIN_MAX``."""
    return min(n, IVF_TRAIN_PER_LIST * nlist, IVF_TRAIN_MAX)


def pq_bytes(config: DenseConfig, dim: int) -> int:
    """IVF-PQ bytes per vector: ``dense.pq_m``, or with 0 one per 8 dimensions (the largest
    divisor of ``dim`` up to ``dim / 8``).

    Raises:
        ValueError: ``dense.pq_m`` does not divide ``dim``.
    """
    if config.pq_m:
        if dim % config.pq_m:
            raise ValueError(f"dense.pq_m: {dim}-d vectors do not split into {config.pq_m} sub-vectors")
        return config.pq_m
    return max(m for m in range(1, max(1, dim // 8) + 1) if dim % m == 0)


def index_memory(kind: str, n: int, dim: int, config: DenseConfig) -> int:
    """Bytes an index of ``kind`` over ``n`` vectors of ``dim`` floats holds at its peak, in its
    build or its search (the process's own baseline excluded)."""
    vector = 4 * dim
    if kind == "flat":  # filled in place (_fill_flat): the vectors and one block read
        return n * vector + ADD_CHUNK * vector
    if kind == "hnsw":
        links = 4 * 2 * config.hnsw_m * (1 + 1 / max(config.hnsw_m - 1, 1))
        return int(n * (GROWTH * vector + links)) + ADD_CHUNK * vector
    nlist = ivf_nlist(config, n)
    code = vector if kind == "ivf" else pq_bytes(config, dim)
    lists = int(GROWTH * n * (code + IVF_ID_BYTES))
    train = int(IVF_TRAIN_COPIES * ivf_train_size(n, nlist) * vector)
    return nlist * vector + max(lists + ADD_CHUNK * vector, train)


def choose_index(config: DenseConfig, n: int, dim: int) -> str:
    """The FAISS index kind for ``n`` vectors of ``dim`` floats: "flat", "ivf", "ivf_pq" or "hnsw".

    ``dense.index: auto``: "flat" up to ``flat_max`` vectors, else ``large_index``, each only while
    :func:`index_memory` stays within ``index_memory_gb``; otherwise "ivf_pq", the smallest.
    """
    if config.index != "auto":
        return config.index
    budget = config.index_memory_gb * _GB
    for kind in (["flat"] if n <= config.flat_max else []) + [config.large_index]:
        if index_memory(kind, n, dim, config) <= budget:
            return kind
    return "ivf_pq"


def index_settings(config: DenseConfig, kind: str, n: int, dim: int) -> dict:
    """What changes an index of ``kind`` over ``n`` vectors of ``dim`` floats (for the artifact's
    hash; ``dim`` is read only by ivf_pq).

    Raises:
        ValueError: settings this index cannot be built with (checked before any encoding).
    """
    settings: dict = {"index": kind}
    if kind in ("ivf", "ivf_pq"):
        settings["ivf_nlist"] = ivf_nlist(config, n)
        settings["ivf_train"] = ivf_train_size(n, settings["ivf_nlist"])
    if kind == "ivf_pq":
        settings["pq_m"] = pq_bytes(config, dim)
    elif kind == "hnsw":
        settings["hnsw_m"] = config.hnsw_m
    return settings


def new_index(settings: dict, dim: int) -> Any:
    """An empty FAISS index for ``settings`` (``index`` kind and its parameters), inner product."""
    import faiss

    kind = settings["index"]
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind in ("ivf", "ivf_pq"):
        quantizer = faiss.IndexFlatIP(dim)
        nlist = settings["ivf_nlist"]
        if kind == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            m = settings["pq_m"]
            if dim % m:
                raise ValueError(f"dense.pq_m: {dim}-d vectors do not split into {m} sub-vectors")
            index = faiss.IndexIVFPQ(quantizer, dim, nlist, m, 8, faiss.METRIC_INNER_PRODUCT)
        # Unit vectors: spherical k-means keeps centroids on the sphere, so IP assignment means cosine.
        index.cp.spherical = True
        return index
    return faiss.IndexHNSWFlat(dim, settings["hnsw_m"], faiss.METRIC_INNER_PRODUCT)


def build_index(vectors: VectorFile, settings: dict) -> Any:
    """The index of ``settings`` over every row of ``vectors``: IVF kinds trained on a seeded
    sample of ``settings["ivf_train"]`` rows, then the rows added ``ADD_CHUNK`` at a time.

    Raises:
        ValueError: an IVF-PQ index with fewer rows than its quantizers need, or bad ``pq_m``.
    """
    n, dim = vectors.shape
    index = new_index(settings, dim)
    if settings["index"] == "flat":
        return _fill_flat(index, vectors)
    if settings["index"] in ("ivf", "ivf_pq"):
        n_train = settings["ivf_train"]
        if settings["index"] == "ivf_pq" and n_train < PQ_CODES:
            raise ValueError(
                f"dense.index: ivf_pq needs at least {PQ_CODES} sentences to train its "
                f"quantizers, the store has {n}; use flat or ivf"
            )
        rows = np.sort(np.random.default_rng(SEED).choice(n, size=n_train, replace=False))
        index.train(vectors.take(rows))
    for start in range(0, n, ADD_CHUNK):
        index.add(vectors.read(start, min(n, start + ADD_CHUNK)))
    return index


def _fill_flat(index: Any, vectors: VectorFile) -> Any:
    """The flat index of ``vectors``: its code buffer (the raw float32 rows) sized once and filled
    block by block.  ``add`` in blocks would grow the buffer as a std::vector grows, to about twice
    the vectors' bytes at its peak; the index is the same (tests/retrievers/test_dense_index.py)."""
    import faiss

    n, dim = vectors.shape
    index.codes.resize(n * dim * 4)
    codes = faiss.rev_swig_ptr(index.codes.data(), n * dim * 4).view(np.float32).reshape(n, dim)
    for start in range(0, n, ADD_CHUNK):
        stop = min(n, start + ADD_CHUNK)
        codes[start:stop] = vectors.read(start, stop)
    index.ntotal = n
    return index


class VectorWriter:
    """A float32 ``.npy`` matrix of known shape written row block by row block (nothing kept)."""

    def __init__(self, path: Path, n: int, dim: int) -> None:
        self.path, self.shape, self.written = Path(path), (n, dim), 0
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed by __exit__
        header = {"descr": "<f4", "fortran_order": False, "shape": self.shape}
        np.lib.format.write_array_header_1_0(self._file, header)

    def write(self, rows: np.ndarray) -> None:
        """Append ``rows`` (shape ``(m, dim)``)."""
        if rows.ndim != 2 or rows.shape[1] != self.shape[1] or self.written + len(rows) > self.shape[0]:
            raise ValueError(f"{self.path}: {rows.shape} rows do not fit a {self.shape} matrix "
                             f"after {self.written} rows")  # fmt: skip
        np.ascontiguousarray(rows, dtype="<f4").tofile(self._file)
        self.written += len(rows)

    def __enter__(self) -> VectorWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        """Close the file; after a clean exit, check that every row was written."""
        self._file.close()
        if exc_type is None and self.written != self.shape[0]:
            raise RuntimeError(f"{self.path}: wrote {self.written} rows, expected {self.shape[0]}")


class VectorFile:
    """Rows of a 2-d C-order float32 (or float16) ``.npy`` matrix, read with plain file reads: the
    OS page cache holds the file, not this process (no memory map whose touched pages would count
    in its RSS).  Rows come back as float32; float16 rows are converted, not re-normalised.

    Raises (constructor):
        OSError: the file cannot be read.
        ValueError: not such a matrix, or shorter than its header says (truncated).
    """

    DTYPES = ("<f4", "<f2")

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(f)
            self._offset = f.tell()
        if len(shape) != 2 or fortran or dtype.str not in self.DTYPES:
            raise ValueError(
                f"{self.path}: not a 2-d C-order float32/float16 matrix ({dtype}, shape {shape})"
            )
        self.shape: tuple[int, int] = (int(shape[0]), int(shape[1]))
        self.dtype: str = dtype.str
        self._row = dtype.itemsize * self.shape[1]
        if self.path.stat().st_size < self._offset + self.shape[0] * self._row:
            raise ValueError(f"{self.path}: shorter than its {self.shape} matrix (truncated)")

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop - 1``."""
        count = (stop - start) * self.shape[1]
        with open(self.path, "rb") as f:
            f.seek(self._offset + start * self._row)
            out = np.fromfile(f, dtype=self.dtype, count=count)
        if out.size != count:
            raise ValueError(f"{self.path}: rows {start}..{stop - 1} are past the end of the file")
        return out.reshape(stop - start, self.shape[1]).astype(np.float32, copy=False)

    def take(self, rows: list[int] | np.ndarray) -> np.ndarray:
        """The given rows (any order, repeats allowed): one read per run of consecutive rows (at
        most ``ADD_CHUNK`` rows a read), every run asked for first (``POSIX_FADV_WILLNEED``), so
        rows not in the page cache come from disk in parallel, not one read after another.

        Raises:
            ValueError: a row outside ``0..N-1``.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        if not len(rows):
            return out
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        if ordered[0] < 0 or ordered[-1] >= self.shape[0]:
            bad = rows[(rows < 0) | (rows >= self.shape[0])][:5].tolist()
            raise ValueError(f"{self.path}: row ids out of range 0..{self.shape[0] - 1}: {bad}")
        # runs of rows r, r+1, ... (a repeat continues a run: its row is read once), cut every
        # ADD_CHUNK rows
        block_of = (ordered - ordered[0]) // ADD_CHUNK
        breaks = np.diff(ordered, prepend=ordered[0] - 2) > 1
        breaks[1:] |= block_of[1:] != block_of[:-1]
        starts = np.flatnonzero(breaks)
        ends = np.append(starts[1:], len(ordered))
        spans = [(int(ordered[a]), int(ordered[b - 1]) + 1) for a, b in zip(starts, ends, strict=True)]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead around a few rows
            for first, stop in spans if len(spans) > 1 else ():
                os.posix_fadvise(fd, self._offset + first * self._row, (stop - first) * self._row,
                                 os.POSIX_FADV_WILLNEED)  # fmt: skip
            for (first, stop), a, b in zip(spans, starts, ends, strict=True):
                block = np.empty((stop - first, self.shape[1]), dtype=self.dtype)
                if os.preadv(fd, [block], self._offset + first * self._row) != block.nbytes:
                    raise ValueError(f"{self.path}: rows {first}..{stop - 1} are past the end of the file")
                out[order[a:b]] = block[ordered[a:b] - first]
        finally:
            os.close(fd)
        return out
