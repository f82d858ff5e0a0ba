"""BM25 built shard by shard through disk: bounded memory for a corpus of any size.

Each shard of ``shard_docs`` documents is tokenised with a fresh tokenizer (``tokenise_shard``:
in this process, or in ``bm25.workers`` processes at once); ``Vocabulary`` numbers the shards'
words in shard order, each shard's in its own order of first occurrence, which is exactly the
numbering of one tokenizer reading the whole stream.  A shard's postings, renumbered, are
counting-sorted by term and written as raw files (``write_shard``).  ``merge_shards`` then walks
the vocabulary in blocks of about ``chunk`` postings: a shard's postings of a block are one
contiguous slice of its files (its columns are in term order); the slices of all shards are laid
side by side term by term (shards in document order, so every posting list stays in document
order), weighted with the corpus-wide document frequencies and lengths, and appended to the
index's ``.npy`` files.

What is held in memory besides a few shards or one block: the document lengths (4 bytes per
document), the document frequencies and the vocabulary.  The files written are the ones
``BM25Index.build`` + ``save`` writes for the whole corpus at once (tests/retrievers/test_bm25.py).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrievers.bm25_weights import _make_tokenizer, _tokenise, posting_weights, term_weights

_INDPTR, _DOCS, _TFS = "indptr.i64", "docs.i32", "tf.u16"


@dataclass(frozen=True)
class Shard:
    """One shard's postings on disk: column pointers over its vocabulary, then document ids
    (shard-local) and term counts in term order."""

    path: Path
    first_doc: int
    n_terms: int  # vocabulary size when the shard was written

    def indptr(self, t0: int, t1: int) -> np.ndarray:
        """Column pointers of terms ``t0 .. t1`` (``t1 - t0 + 1`` values; ``t1 <= n_terms``)."""
        return np.fromfile(self.path / _INDPTR, dtype=np.int64, count=t1 - t0 + 1, offset=8 * t0)

    def postings(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Corpus-wide document ids and term counts of postings ``start .. end - 1``."""
        docs = np.fromfile(self.path / _DOCS, dtype=np.int32, count=end - start, offset=4 * start)
        tfs = np.fromfile(self.path / _TFS, dtype=np.uint16, count=end - start, offset=2 * start)
        return docs + np.int32(self.first_doc), tfs

    def df(self) -> np.ndarray:
        """Postings per term (``n_terms`` values)."""
        return np.diff(self.indptr(0, self.n_terms))

    def block(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Terms, corpus-wide documents and term counts of the postings of terms ``t0 .. t1 - 1``."""
        hi = min(t1, self.n_terms)
        if hi <= t0:
            return _EMPTY
        ptr = self.indptr(t0, hi)
        docs, tfs = self.postings(int(ptr[0]), int(ptr[-1]))
        return np.repeat(np.arange(t0, hi, dtype=np.int32), np.diff(ptr)), docs, tfs


class ParentShard:
    """A saved index's postings as the first shard of an edited corpus (``BM25Index.derive_saved``):
    its kept documents renumbered by ``doc_map`` (-1: dropped; kept ones keep their order and come
    first), read block by block from the memory-mapped column arrays.

    Args:
        indptr: the parent's column pointers (one per term, plus one).
        indices: its document ids in column order.
        tfs: its term counts in the same order.
        doc_map: parent document -> document of the edited corpus, -1 for a dropped one.
        chunk: parent postings read at a time when counting the kept ones.
    """

    first_doc = 0

    def __init__(
        self, indptr: np.ndarray, indices: np.ndarray, tfs: np.ndarray, doc_map: np.ndarray, chunk: int
    ) -> None:
        self._indptr, self._indices, self._tfs = indptr, indices, tfs
        self._map = np.asarray(doc_map, dtype=np.int64)
        self._chunk = chunk
        self.n_terms = len(indptr) - 1

    def df(self) -> np.ndarray:
        """Kept postings per term, counted in one pass over the parent's postings."""
        out = np.zeros(self.n_terms, dtype=np.int64)
        ptr, t0 = self._indptr, 0
        while t0 < self.n_terms:
            t1 = block_end(ptr, t0, self._chunk)
            terms, _, _ = self.block(t0, t1)
            out[t0:t1] = np.bincount(terms - t0, minlength=t1 - t0)
            t0 = t1
        return out

    def block(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Terms, documents (renumbered) and term counts of the kept postings of terms ``t0 .. t1 - 1``."""
        hi = min(t1, self.n_terms)
        if hi <= t0:
            return _EMPTY
        ptr = np.asarray(self._indptr[t0 : hi + 1], dtype=np.int64)
        start, end = int(ptr[0]), int(ptr[-1])
        docs = self._map[np.asarray(self._indices[start:end])]
        keep = docs >= 0
        terms = np.repeat(np.arange(t0, hi, dtype=np.int32), np.diff(ptr))[keep]
        return terms, docs[keep].astype(np.int32), np.asarray(self._tfs[start:end], dtype=np.uint16)[keep]


def block_end(indptr: np.ndarray, t0: int, chunk: int) -> int:
    """The term after a block that starts at term ``t0``: about ``chunk`` postings (column pointers
    ``indptr``), at least one term, never past the last."""
    t1 = int(np.searchsorted(indptr, indptr[t0] + chunk, side="right")) - 1
    return min(max(t1, t0 + 1), len(indptr) - 1)


Prepare = Callable[[object], str]  # an item of a BM25 build's stream -> the text indexed

_EMPTY = (np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.uint16))


def tokenise_shard(
    texts: list, stopwords: str | list[str], stemmer: str, prepare: Prepare | None = None
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One shard's postings (``_chunk_postings``'s arrays) under a tokenizer of its own, and its
    vocabulary: word (or stem) of local term id ``i`` at position ``i``.

    ``prepare``: makes each item of ``texts`` the text to index (a module-level function or a
    ``functools.partial`` of one, so that it travels to the process or actor tokenising the shard
    and the text is prepared there); None: the items are the texts."""
    tokenizer = _make_tokenizer(stopwords, stemmer)
    docs = texts if prepare is None else map(prepare, texts)
    terms, tfs, doc_len, per_doc = _tokenise(tokenizer, docs, False, None)
    return list(tokenizer.get_vocab_dict()), terms, tfs, doc_len, per_doc


class ShardTokeniser:
    """A worker that tokenises shards (``tokenise_shard``) with one tokenizer setting and text
    preparation: what a Ray actor of ``garag index --engine ray`` runs."""

    def __init__(self, stopwords: str | list[str], stemmer: str, prepare: Prepare | None = None) -> None:
        self.stopwords, self.stemmer, self.prepare = stopwords, stemmer, prepare

    def tokenise(self, texts: list) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return tokenise_shard(texts, self.stopwords, self.stemmer, self.prepare)


class ProcessTokenisers:
    """``workers`` spawned processes behind the pool interface of ``RayEngine.tokenisers``:
    ``tokenise(texts)`` returns a result whose ``get()`` waits; ``in_flight`` bounds the shards
    submitted ahead."""

    def __init__(
        self, workers: int, stopwords: str | list[str], stemmer: str, prepare: Prepare | None = None
    ) -> None:
        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        self.stopwords, self.stemmer, self.prepare, self.in_flight = stopwords, stemmer, prepare, workers + 1

    def tokenise(self, texts: list) -> _Pending:
        return _Pending(self.pool.submit(tokenise_shard, texts, self.stopwords, self.stemmer, self.prepare))

    def __enter__(self) -> ProcessTokenisers:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=exc_type is not None)


class _Pending:
    def __init__(self, future: Future) -> None:
        self.get = future.result


class Vocabulary:
    """Global term ids of the shards' words, numbered in shard order as one tokenizer would."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def renumber(self, words: list[str], terms: np.ndarray) -> np.ndarray:
        """A shard's local term ids (``terms``, over ``words``) as global ones; new words get the
        next ids in the shard's order."""
        ids = self.ids
        table = np.fromiter((ids.setdefault(w, len(ids)) for w in words), dtype=np.int32, count=len(words))
        return table[terms]


def write_shard(
    path: Path, first_doc: int, terms: np.ndarray, tfs: np.ndarray, per_doc: np.ndarray, n_terms: int
) -> Shard:
    """Write document-grouped postings (``_chunk_postings``'s arrays) as a shard in term order."""
    path.mkdir(parents=True)
    order = np.argsort(terms, kind="stable")  # stable: documents stay in order within a term
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=indptr[1:])
    indptr.tofile(path / _INDPTR)
    np.repeat(np.arange(len(per_doc), dtype=np.int32), per_doc)[order].tofile(path / _DOCS)
    tfs[order].tofile(path / _TFS)
    return Shard(path, first_doc, n_terms)


class NpyWriter:
    """A 1-d ``.npy`` file of known length written block by block (nothing held in memory)."""

    def __init__(self, path: Path, dtype: type, length: int) -> None:
        self.path, self.dtype, self.length, self.written = path, np.dtype(dtype), length, 0
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (length,),
        }
        np.lib.format.write_array_header_1_0(self._file, header)

    def write(self, values: np.ndarray) -> None:
        np.ascontiguousarray(values, dtype=self.dtype).tofile(self._file)
        self.written += len(values)

    def close(self) -> None:
        self._file.close()

    def finish(self) -> None:
        """Close the file, checking that it holds the length its header declares."""
        self.close()
        if self.written != self.length:
            raise RuntimeError(f"{self.path}: wrote {self.written} values, expected {self.length}")


def merge_shards(
    shards: list[Shard | ParentShard],
    doc_len: np.ndarray,
    n_vocab: int,
    method: str,
    k1: float,
    b: float,
    delta: float,
    out: dict[str, Path],
    chunk: int,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Merge shards into the CSC arrays of the whole corpus, written to ``out``'s files.

    Args:
        shards: in document order, covering documents ``0 .. len(doc_len) - 1``.
        doc_len: every document's length in tokens.
        n_vocab: vocabulary size after the last shard.
        method, k1, b, delta: bm25s's scoring parameters.
        out: file for each array: ``data`` (float32 weights), ``indices`` (int32 documents),
            ``tf`` (uint16 term counts in the same order).
        chunk: postings merged per block (one term's postings always go in one block).

    Returns:
        The column pointers (int64, ``n_vocab + 1``) and the non-occurrence array of BM25L/BM25+.
    """
    n_docs = len(doc_len)
    if n_docs >= 2**31:
        raise ValueError(f"{n_docs} documents do not fit bm25s's int32 document ids")
    avgdl = float(doc_len.mean())
    df = np.zeros(n_vocab, dtype=np.int64)
    for shard in shards:
        df[: shard.n_terms] += shard.df()
    idf32, nonocc = term_weights(df, n_docs, avgdl, method, k1, b, delta)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    del df
    writers = {key: NpyWriter(out[key], dtype, int(indptr[-1])) for key, dtype in _ARRAYS.items()}
    try:
        t0 = 0
        while t0 < n_vocab:
            t1 = block_end(indptr, t0, chunk)
            terms, docs, tfs = _block(shards, t0, t1)
            weights = posting_weights(terms, tfs, doc_len[docs], idf32, nonocc, avgdl, method, k1, b, delta)
            writers["data"].write(weights)
            writers["indices"].write(docs)
            writers["tf"].write(tfs)
            t0 = t1
    except BaseException:
        for writer in writers.values():
            writer.close()  # no length check: the error that stopped the merge is the one to see
        raise
    for writer in writers.values():
        writer.finish()
    return indptr, nonocc


_ARRAYS = {"data": np.float32, "indices": np.int32, "tf": np.uint16}


def _block(shards: list, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All shards' postings of terms ``t0 .. t1 - 1``, by term, documents in order within each."""
    parts = [p for p in (shard.block(t0, t1) for shard in shards) if len(p[0])]
    if not parts:
        return _EMPTY
    all_terms = np.concatenate([p[0] for p in parts])
    order = np.argsort(all_terms, kind="stable")  # stable: shards are in document order
    return (
        all_terms[order],
        np.concatenate([p[1] for p in parts])[order],
        np.concatenate([p[2] for p in parts])[order],
    )
