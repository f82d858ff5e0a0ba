"""Dense sentence retrieval: sentence-transformers embeddings in a FAISS inner-product index.

Vectors are L2-normalised, so every score is a cosine similarity.  FAISS ids
are the sentence store's row ids.  The artifact directory holds the index
(``index.faiss``), the vectors themselves (``vectors.npy``, whose rows
:meth:`FaissDenseRetriever.vectors` reads from the file, a few at a time) and ``meta.json``.
How the index kind is chosen and built in bounded memory: retrievers/dense_index.py.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from garag.artifacts import build_artifact, read_meta
from garag.config import DenseConfig
from garag.lru import LRU
from garag.text import detokenize, page_to_title
from garag.types import Hit
from retrievers.base import IndexContext
from retrievers.dense_index import (
    ADD_CHUNK,
    VectorFile,
    VectorWriter,
    build_index,
    choose_index,
    index_settings,
    ivf_nlist,
)
from retrievers.embeddings import EmbeddingCache, SentenceEncoder

__all__ = ["FaissDenseRetriever", "choose_index", "ivf_nlist", "sentence_text"]

logger = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
VECTORS_FILE = "vectors.npy"
_CHUNK = 16_384
_PER_ENCODER = 2_048  # sentences per Ray encoder actor in one chunk (a chunk waits for its slowest)
_QUERY_LRU = 4096


def sentence_text(page: str, text: str, title_prefix: bool) -> str:
    """The text embedded for one sentence: ``"Title: sentence"`` with PTB tokens undone."""
    sentence = detokenize(text)
    return f"{page_to_title(page)}: {sentence}" if title_prefix else sentence


def _faiss() -> Any:
    import faiss

    return faiss


class FaissDenseRetriever:
    """Bi-encoder retrieval over every sentence of the store.

    Scores are inner products of unit vectors (cosines), higher is better.
    """

    def __init__(
        self,
        config: DenseConfig,
        ctx: IndexContext,
        name: str = "dense",
        encoder: SentenceEncoder | None = None,
        cache_dtype: str = "float16",
    ) -> None:
        """Cheap: no model, no index.

        Args:
            config: encoder and index settings.
            ctx: store, cache root and corpus fingerprint.
            name: retriever name put on every hit.
            encoder: share an already constructed encoder (e.g. with graph retrieval);
                by default one is made from ``config``.
            cache_dtype: storage type of the embedding cache, ``"float16"`` or ``"float32"``.
        """
        self.name = name
        self.config = config
        self.ctx = ctx
        self.encoder = encoder or SentenceEncoder(config.model, config.device, config.batch_size)
        self.cache = EmbeddingCache(self.encoder, ctx.cache_dir, dtype=cache_dtype, progress=ctx.progress)
        self.path: Path | None = None
        self.meta: dict | None = None
        self._index: Any = None
        self._vectors: VectorFile | None = None
        self._gpu_res: Any = None
        self._query_lru: LRU[str, np.ndarray] = LRU(_QUERY_LRU)

    # ----------------------------------------------------------------- build
    def settings(self, n: int | None = None) -> dict:
        """Everything that changes the artifact (search-time knobs excluded), for ``n`` sentences
        (default: the store's)."""
        n = len(self.ctx.store) if n is None else n
        # auto weighs each kind's memory and ivf_pq splits the vectors: both need their
        # dimension (a model load)
        dim = self.encoder.dim if self.config.index in ("auto", "ivf_pq") else 0
        kind = choose_index(self.config, n, dim)
        return {
            "model_identity": self.encoder.identity,
            "title_prefix": self.config.title_prefix,
            "cache_dtype": self.cache.dtype.name,
            **index_settings(self.config, kind, n, dim),
        }

    def build(self, force: bool = False) -> Path:
        """Build (or reuse) the index and load it.

        Raises:
            ValueError: an empty store, bad IVF settings, or ``use_gpu="yes"`` without a GPU.
        """
        if len(self.ctx.store) == 0:
            raise ValueError(f"{self.ctx.store.db_path}: the sentence store is empty, nothing to index")
        parent = None
        if not force and self.ctx.parent is not None:  # the corpus this one is an edit of
            parent = self.ctx.parent_artifact("dense", self.settings(len(self.ctx.parent.store)))
        build = self._build_into if parent is None else lambda tmp: self._build_into(tmp, parent)
        path = build_artifact(
            self.ctx.cache_dir, "dense", self.settings(), self.ctx.fingerprint, build, force=force
        )
        self.load(path)
        return path

    def _iter_chunks(self, first: int = 0, size: int = _CHUNK) -> Iterator[tuple[int, list[str]]]:
        """``(first_row, texts)`` chunks of ``size`` in row order from row ``first`` on; rows must
        be dense."""
        expected = first
        texts: list[str] = []
        for row, page, text in self.ctx.store.iter_rows(batch_size=_CHUNK, first=first):
            if row != expected:
                raise ValueError(
                    f"{self.ctx.store.db_path}: row ids are not dense (got {row}, expected {expected})"
                )
            expected += 1
            texts.append(sentence_text(page, text, self.config.title_prefix))
            if len(texts) == size:
                yield row + 1 - len(texts), texts
                texts = []
        if texts:
            yield expected - len(texts), texts

    def _build_into(self, tmp: Path, parent: Path | None = None) -> dict:
        """Encode every sentence (or, with ``parent``, take the kept ones' vectors from the parent
        artifact and encode only the new ones) into ``vectors.npy`` in row order, then build the
        FAISS index from that file (retrievers/dense_index.py: bounded memory)."""
        faiss = _faiss()
        n = len(self.ctx.store)
        settings = self.settings()
        started = time.time()
        before = self.cache.texts_encoded
        with contextlib.ExitStack() as stack:
            writer: VectorWriter | None = None

            def out(dim: int) -> VectorWriter:
                return stack.enter_context(VectorWriter(tmp / VECTORS_FILE, n, dim))

            first_new = 0
            if parent is not None:
                assert self.ctx.delta is not None
                old = VectorFile(parent / VECTORS_FILE)
                writer = out(old.shape[1])
                row_map = self.ctx.delta.row_map
                for i in range(0, old.shape[0], ADD_CHUNK):
                    rows = row_map[i : i + ADD_CHUNK]
                    kept = rows >= 0
                    if not np.array_equal(rows[kept], np.arange(writer.written, writer.written + kept.sum())):
                        raise ValueError(f"{parent}: kept rows must keep their order and come first")
                    writer.write(old.read(i, min(old.shape[0], i + ADD_CHUNK))[kept])
                first_new = self.ctx.delta.kept_rows
            engine = self.ctx.engine
            pool, size = None, _CHUNK
            if engine is not None and hasattr(engine, "encoders"):  # Ray actors encode the chunks
                enc = self.encoder
                pool = stack.enter_context(
                    engine.encoders(enc.model, enc.device, enc.batch_size, enc.identity)
                )
                size = max(_CHUNK, _PER_ENCODER * len(pool.actors))
            for _, texts in self._iter_chunks(first_new, size):
                vecs = self.cache.encode_cached(texts, pool)
                if writer is None:
                    writer = out(vecs.shape[1])
                writer.write(vecs)
            if writer is None:
                raise ValueError(f"{self.ctx.store.db_path}: the sentence store is empty, nothing to index")
        encode_seconds = time.time() - started
        encoded = self.cache.texts_encoded - before

        started = time.time()
        vectors = VectorFile(tmp / VECTORS_FILE)
        dim = vectors.shape[1]
        index = build_index(vectors, settings)
        faiss.write_index(index, str(tmp / INDEX_FILE))
        index_seconds = time.time() - started
        logger.info(
            "dense: %d sentences (%d newly encoded) in %.1fs, %s index in %.1fs",
            n,
            encoded,
            encode_seconds,
            settings["index"],
            index_seconds,
        )
        return {
            **({"derived_from": parent.name} if parent is not None else {}),
            "index_type": settings["index"],
            "n": n,
            "dim": dim,
            "model": self.encoder.name,
            "model_path": self.encoder.model,
            "texts_encoded": encoded,
            "encode_seconds": round(encode_seconds, 3),
            "index_seconds": round(index_seconds, 3),
        }

    # ------------------------------------------------------------------ load
    def load(self, path: str | Path) -> None:
        """Load a built artifact: the index (moved to a GPU if configured) and the vectors.

        Raises:
            ValueError: not a complete dense artifact, or ``use_gpu="yes"`` without a usable GPU.
        """
        faiss = _faiss()
        path = Path(path)
        meta = read_meta(path)
        if meta is None or meta.get("kind") != "dense":
            raise ValueError(f"{path}: not a complete dense artifact (no meta.json of kind 'dense')")
        index = faiss.read_index(str(path / INDEX_FILE))
        kind = meta["index_type"]
        if kind in ("ivf", "ivf_pq"):
            index.nprobe = min(self.config.ivf_nprobe, index.nlist)
        elif kind == "hnsw":
            index.hnsw.efSearch = self.config.hnsw_ef_search
        self._index = self._maybe_to_gpu(index, kind)
        self._vectors = VectorFile(path / VECTORS_FILE)
        self.path, self.meta = path, meta

    def _maybe_to_gpu(self, index: Any, kind: str) -> Any:
        faiss = _faiss()
        if self.config.use_gpu == "no":
            return index
        n_gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        if n_gpus == 0 or not hasattr(faiss, "StandardGpuResources"):
            if self.config.use_gpu == "yes":
                raise ValueError(
                    "dense.use_gpu=yes but FAISS sees no GPU (install faiss-gpu, e.g. "
                    "`pip install garag[gpu]`, on a machine with CUDA), or set dense.use_gpu=auto"
                )
            return index
        if kind == "hnsw":
            if self.config.use_gpu == "yes":
                raise ValueError(
                    "dense.use_gpu=yes: FAISS has no GPU HNSW index; use dense.index=flat or ivf "
                    "for GPU search, or dense.use_gpu=auto"
                )
            return index
        self._gpu_res = faiss.StandardGpuResources()
        gpu_index = faiss.index_cpu_to_gpu(self._gpu_res, 0, index)
        if kind in ("ivf", "ivf_pq"):
            faiss.GpuParameterSpace().set_index_parameter(gpu_index, "nprobe", index.nprobe)
        logger.info("dense: %s index moved to GPU 0", kind)
        return gpu_index

    def _require_loaded(self) -> Any:
        if self._index is None:
            raise RuntimeError(f"{self.name}: call build() before retrieving")
        return self._index

    # -------------------------------------------------------------- retrieve
    @property
    def dim(self) -> int:
        """Embedding dimension of the loaded index."""
        return int(self._require_loaded().d)

    def clear_query_cache(self) -> None:
        """Forget cached query embeddings (benchmarks time the encoder, not the cache)."""
        self._query_lru.clear()

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """Unit query vectors, shape ``(len(queries), dim)``; recent queries come from an LRU.

        Raises:
            ValueError: an empty or blank query.
        """
        if isinstance(queries, str):
            raise TypeError("encode_queries() takes a list of queries, not a single string")
        for i, q in enumerate(queries):
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"{self.name}: query {i} is empty; a dense query needs text")
        vectors = self._query_lru.values(queries, lambda todo: list(self.encoder.encode(todo)))
        return np.stack(vectors) if vectors else np.zeros((0, self.dim), np.float32)

    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """FAISS search: ``(scores, rows)``, each ``(n_queries, k)``; missing slots have row -1.

        An ivf_pq index's scores are approximate: its ``k * dense.pq_refine`` best candidates are
        re-scored with the stored vectors (exact cosines) and the top ``k`` of those returned."""
        if k <= 0:
            raise ValueError(f"{self.name}: k must be > 0, got {k}")
        index = self._require_loaded()
        k = min(k, index.ntotal)
        queries = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if self.meta is None or self.meta["index_type"] != "ivf_pq":
            return index.search(queries, k)
        _, rows = index.search(queries, min(k * self.config.pq_refine, index.ntotal))
        found = rows >= 0
        # one (queries, candidates, dim) block of stored vectors (row 0 stands in for a missing one)
        stored = self.vectors(np.where(found, rows, 0).ravel()).reshape(*rows.shape, -1)
        exact = np.where(found, np.einsum("qkd,qd->qk", stored, queries), -np.inf).astype(np.float32)
        del stored
        order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
        top = np.take_along_axis(exact, order, 1)
        return np.where(np.isfinite(top), top, 0.0), np.where(
            np.isfinite(top), np.take_along_axis(rows, order, 1), -1
        )

    def retrieve(self, query: str, k: int) -> list[Hit]:
        """Top-``k`` sentences by cosine similarity to ``query``, best first."""
        return self.retrieve_batch([query], k)[0]

    def retrieve_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """``retrieve`` for many queries with one encoder call and one FAISS search."""
        if k <= 0:
            raise ValueError(f"{self.name}: k must be > 0, got {k}")
        if not queries:
            return []
        self._require_loaded()
        scores, rows = self.search(self.encode_queries(queries), k)
        valid = sorted({int(r) for r in rows.ravel() if r >= 0})
        ids = dict(zip(valid, self.ctx.store.ids_of_rows(valid), strict=True))
        return [
            [Hit(ids[int(r)], float(s), self.name, q) for s, r in zip(srow, rrow, strict=True) if r >= 0]
            for q, srow, rrow in zip(queries, scores, rows, strict=True)
        ]

    def vectors(self, rows: list[int] | np.ndarray) -> np.ndarray:
        """Stored unit vectors of sentences by row id, shape ``(len(rows), dim)``, float32.

        Raises:
            ValueError: a row id outside ``0..N-1``.
        """
        self._require_loaded()
        stored = self._vectors
        if stored is None:
            raise RuntimeError(f"{self.name}: vectors are not loaded")
        idx = np.asarray(rows, dtype=np.int64).reshape(-1)
        n = stored.shape[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = idx[(idx < 0) | (idx >= n)][:5].tolist()
            raise ValueError(f"{self.name}: row ids out of range 0..{n - 1}: {bad}")
        return stored.take(idx)
