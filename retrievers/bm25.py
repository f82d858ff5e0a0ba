"""BM25 with bm25s: a reusable on-disk index and the sentence retriever built on it.

``BM25Index`` tokenises with ``bm25s.tokenization.Tokenizer`` (streaming, so
the corpus text is never held in memory; only compact token-id postings are),
computes bm25s's own term weights (``bm25s.scoring``) and hands the sparse
matrix to a ``bm25s.BM25`` object, which saves, memory-maps and scores it.
Building the matrix with numpy in document chunks instead of ``BM25.index``
keeps peak memory at about 14 bytes per (document, term) pair; the test suite
checks that the result equals ``BM25.index`` on the same tokens.

A corpus longer than ``bm25.shard_docs`` documents is built shard by shard through disk
(``build_saved``, retrievers/bm25_shards.py): memory then stays bounded whatever the corpus size,
and the files are the same.

``BM25Retriever`` indexes every sentence of the store (optionally with its
page title in front); document ``i`` of the index is store row ``i``.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import shutil
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
from bm25s.tokenization import Tokenizer
from tqdm import tqdm

from garag.artifacts import build_artifact
from garag.config import BM25Config
from garag.store import SentenceStore
from garag.text import detokenize, page_to_title
from garag.types import Hit
from retrievers.base import IndexContext
from retrievers.bm25_shards import (
    ParentShard,
    Prepare,
    ProcessTokenisers,
    Shard,
    Vocabulary,
    merge_shards,
    tokenise_shard,
    write_shard,
)
from retrievers.bm25_weights import (
    _DELTA,
    _MATRIX_CHUNK,
    _make_stemmer,
    _make_tokenizer,
    _seed_vocab,
    _tokenise,
    bm25_matrix,
    normalize_text,
)

logger = logging.getLogger(__name__)

_META_FILE = "garag_bm25.json"
_TF_FILE = "garag_tf.npy"  # term counts in the weights' order (for ``BM25Index.derive``)
_LEN_FILE = "garag_doc_len.npy"
_SHARDS = "shards.tmp"  # the shards of a sharded build, removed once merged
_CSC_FILES = {"data": "data.csc.index.npy", "indices": "indices.csc.index.npy"}  # bm25s's names


class BM25Index:
    """A bm25s index with the tokenizer settings that built it.

    Build with ``BM25Index.build(texts, config)`` (or ``cached`` for an artifact),
    ``save`` it, ``load`` it back (memory-mapped).  Search returns document
    indices in build order.  Queries are tokenised exactly like the documents
    (same splitter, stopwords and stemmer); unknown words are dropped.
    """

    FORMAT = 2  # bump when the on-disk layout or the text normalisation changes

    def __init__(self, model: bm25s.BM25, stopwords: list[str], stemmer: str) -> None:
        self.model = model
        self.stemmer_language = stemmer
        self._splitter = Tokenizer(stopwords=None).splitter
        self._stopwords = frozenset(stopwords)
        self._stem = _make_stemmer(stemmer)
        self._vocab: dict[str, int] = model.vocab_dict
        self._counts: tuple[np.ndarray, np.ndarray] | None = None
        self.tokenised = 0  # documents tokenised by the build that made this object

    # -- building and persistence -------------------------------------------------------------

    @classmethod
    def build(
        cls, texts: Iterable[str], config: BM25Config, progress: bool = False, total: int | None = None
    ) -> BM25Index:
        """Index ``texts`` (any iterable, consumed once) with ``config``'s tokenizer and BM25 variant.

        Raises:
            ValueError: no texts, or an unknown stopword list / stemmer language.
        """
        tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
        terms, tfs, doc_len, per_doc = _tokenise(tokenizer, texts, progress, total)
        return cls._weigh(terms, tfs, doc_len, per_doc, tokenizer, config, len(doc_len))

    @classmethod
    def build_saved(
        cls,
        path: str | Path,
        texts: Iterable[str],
        config: BM25Config,
        progress: bool = False,
        total: int | None = None,
        engine: Any = None,
        prepare: Prepare | None = None,
    ) -> BM25Index:
        """``build`` + ``save`` into the new directory ``path``, in bounded memory for any corpus.

        Up to ``config.shard_docs`` documents are indexed in memory as ``build`` does.  A longer
        stream is tokenised in shards of that many documents, the first one too (by ``engine``'s
        Ray actors when it has ``tokenisers``, else by ``config.workers`` processes), whose
        postings are written to disk and merged term by term (retrievers/bm25_shards.py); the
        index is then loaded back memory-mapped.  The saved files are the same either way.

        ``prepare``: makes each item of ``texts`` its text (``tokenise_shard``), where the shard is
        tokenised: the text preparation is then shared out with the tokenising.

        Raises:
            ValueError: no texts, or an unknown stopword list / stemmer language.
        """
        path = Path(path)
        docs = iter(texts)
        head = list(itertools.islice(docs, config.shard_docs + 1))
        if len(head) <= config.shard_docs:
            tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
            first = _tokenise(tokenizer, head if prepare is None else map(prepare, head), progress, total)
            index = cls._weigh(*first, tokenizer, config, len(first[2]))
            index.save(path)
            return index
        work, vocabulary = path / _SHARDS, Vocabulary()
        shards: list[Shard] = []
        lengths: list[np.ndarray] = []
        bar = tqdm(total=total, desc="bm25: shards", unit=" docs", disable=not progress, mininterval=1.0)
        stream = _shards(_emptying(head, docs), config, engine, prepare)
        _write_shards(work, stream, vocabulary, shards, lengths, bar)
        doc_len = np.concatenate(lengths)
        del lengths
        tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
        return cls._save_merged(path, shards, doc_len, vocabulary.ids, tokenizer, config, len(doc_len))

    @classmethod
    def _save_merged(
        cls,
        path: Path,
        shards: list,
        doc_len: np.ndarray,
        vocab: dict[str, int],
        tokenizer: Tokenizer,
        config: BM25Config,
        tokenised: int,
    ) -> BM25Index:
        """Merge ``shards`` into the index files in ``path`` (the shards' directory removed after)
        and load the index back memory-mapped."""
        logger.info("bm25: %d documents in %d shards, %d terms", len(doc_len), len(shards), len(vocab))
        final = {
            "data": path / _CSC_FILES["data"],
            "indices": path / _CSC_FILES["indices"],
            "tf": path / _TF_FILE,
        }
        merged = {key: file.with_name(file.name + ".part") for key, file in final.items()}
        indptr, nonocc = merge_shards(
            shards, doc_len, len(vocab), config.method, config.k1, config.b, _DELTA, merged, _MATRIX_CHUNK
        )
        shutil.rmtree(path / _SHARDS, ignore_errors=True)
        model = bm25s.BM25(k1=config.k1, b=config.b, delta=_DELTA, method=config.method, backend="numpy")
        # bm25s writes the vocabulary and parameters; the merged arrays then replace its empty ones
        model.scores = {
            "data": np.empty(0, dtype=np.float32),
            "indices": np.empty(0, dtype=np.int32),
            "indptr": indptr,
            "num_docs": len(doc_len),
        }
        model.nonoccurrence_array = nonocc
        model.vocab_dict = vocab
        index = cls(model, list(tokenizer.stopwords), config.stemmer)
        index.save(path)
        np.save(path / _LEN_FILE, doc_len)
        for key, file in final.items():
            os.replace(merged[key], file)
        loaded = cls.load(path)
        loaded.tokenised = tokenised
        return loaded

    @classmethod
    def derive(
        cls,
        parent: str | Path,
        doc_map: np.ndarray,
        texts: Iterable[str],
        config: BM25Config,
        progress: bool = False,
        total: int | None = None,
    ) -> BM25Index | None:
        """The index of an edited document list, from the index of the list before the edit.

        Only the new documents are tokenised: the parent's term counts are re-numbered and the
        weights recomputed for the new document count, lengths and document frequencies, so the
        result scores exactly like ``build`` over the same documents (term ids may differ).

        Args:
            parent: directory of the parent index (saved by ``save``).
            doc_map: parent document -> document here, -1 for a dropped one; kept documents keep
                their order and come first.
            texts: the documents after the kept ones, in order.
            config: the parent's tokenizer and BM25 settings.

        Returns:
            The index, or None when the parent was saved without its term counts (an index built
            before they were kept): it must then be built from scratch.
        """
        parent = Path(parent)
        if not ((parent / _TF_FILE).is_file() and (parent / _LEN_FILE).is_file()):
            return None
        old = cls.load(parent)
        indptr = np.asarray(old.model.scores["indptr"], dtype=np.int64)
        tf = np.load(parent / _TF_FILE)
        doc_len = np.load(parent / _LEN_FILE)
        kept = doc_map >= 0
        terms = np.repeat(np.arange(len(indptr) - 1, dtype=np.int32), np.diff(indptr))
        docs = np.asarray(doc_map)[np.asarray(old.model.scores["indices"])]
        keep = docs >= 0
        docs, terms, tf = docs[keep], terms[keep], tf[keep]
        order = np.argsort(docs, kind="stable")  # by document, terms in id order within each
        n_kept = int(kept.sum())
        per_doc = np.bincount(docs, minlength=n_kept).astype(np.int32)
        tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
        _seed_vocab(tokenizer, old.model.vocab_dict)
        new = _tokenise(tokenizer, texts, progress, total)
        return cls._weigh(
            np.concatenate([terms[order], new[0]]),
            np.concatenate([tf[order], new[1]]),
            np.concatenate([doc_len[kept], new[2]]),
            np.concatenate([per_doc, new[3]]),
            tokenizer,
            config,
            len(new[2]),
        )

    @classmethod
    def derive_saved(
        cls,
        path: str | Path,
        parent: str | Path,
        doc_map: np.ndarray,
        texts: Iterable[str],
        config: BM25Config,
        progress: bool = False,
        total: int | None = None,
        engine: Any = None,
        prepare: Prepare | None = None,
    ) -> BM25Index | None:
        """``derive`` + ``save`` into the new directory ``path``, in bounded memory for any corpus.

        The parent's postings are read memory-mapped block by block as the first shard (its kept
        documents renumbered), the new documents are tokenised in shards of ``config.shard_docs``
        (as ``build_saved`` does, here, in processes or on Ray actors), and all are merged term by
        term (retrievers/bm25_shards.py).  The saved files are the ones ``derive`` + ``save`` write.
        ``prepare``: as for ``build_saved``.

        Returns:
            The index (loaded memory-mapped), or None when the parent was saved without its term
            counts: it must then be built from scratch.
        """
        parent, path = Path(parent), Path(path)
        if not ((parent / _TF_FILE).is_file() and (parent / _LEN_FILE).is_file()):
            return None
        old = cls.load(parent)
        ids = {str(k): int(v) for k, v in old.model.vocab_dict.items()}
        if sorted(ids.values()) != list(range(len(ids))):
            raise ValueError(f"{parent}: the vocabulary's term ids are not 0 .. {len(ids) - 1}")
        doc_map = np.asarray(doc_map, dtype=np.int64)
        kept = doc_map >= 0
        n_kept = int(kept.sum())
        if not np.array_equal(doc_map[kept], np.arange(n_kept)):
            raise ValueError("doc_map: kept documents must keep their order and come first")
        scores = old.model.scores
        indptr = np.asarray(scores["indptr"], dtype=np.int64)
        tf = np.load(parent / _TF_FILE, mmap_mode="r")
        parent_shard = ParentShard(indptr, scores["indices"], tf, doc_map, _MATRIX_CHUNK)
        shards: list = [parent_shard]
        lengths = [np.load(parent / _LEN_FILE, mmap_mode="r")[kept]]
        vocabulary = Vocabulary()
        vocabulary.ids = ids
        bar = tqdm(total=total, desc="bm25: new shards", unit=" docs", disable=not progress, mininterval=1.0)
        stream = _shards(iter(texts), config, engine, prepare)
        _write_shards(path / _SHARDS, stream, vocabulary, shards, lengths, bar)
        doc_len = np.concatenate(lengths)
        tokenizer = _make_tokenizer(config.stopwords, config.stemmer)
        return cls._save_merged(path, shards, doc_len, ids, tokenizer, config, len(doc_len) - n_kept)

    @classmethod
    def _weigh(
        cls,
        terms: np.ndarray,
        tfs: np.ndarray,
        doc_len: np.ndarray,
        per_doc: np.ndarray,
        tokenizer: Tokenizer,
        config: BM25Config,
        tokenised: int,
    ) -> BM25Index:
        """The index of document-grouped postings (``_chunk_postings``'s arrays, concatenated)."""
        if len(doc_len) == 0:
            raise ValueError("cannot build a BM25 index from no documents")
        vocab = dict(tokenizer.get_vocab_dict())
        logger.info("bm25: %d documents, %d terms, %d postings", len(doc_len), len(vocab), len(terms))
        scores, nonocc = bm25_matrix(
            terms, tfs, doc_len, per_doc, len(vocab), config.method, config.k1, config.b, chunk=_MATRIX_CHUNK
        )
        model = bm25s.BM25(k1=config.k1, b=config.b, delta=_DELTA, method=config.method, backend="numpy")
        model.scores = scores
        model.nonoccurrence_array = nonocc
        model.vocab_dict = vocab
        model.unique_token_ids_set = set(vocab.values())
        index = cls(model, list(tokenizer.stopwords), config.stemmer)
        # term counts in the weights' (CSC) order, and document lengths: what ``derive`` needs
        index._counts = (tfs[np.argsort(terms, kind="stable")], doc_len)
        index.tokenised = tokenised
        return index

    def save(self, path: str | Path) -> None:
        """Write the bm25s files plus the tokenizer settings to directory ``path``."""
        path = Path(path)
        self.model.save(path, show_progress=False)
        meta = {"format": self.FORMAT, "stopwords": sorted(self._stopwords), "stemmer": self.stemmer_language}
        (path / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        if self._counts is not None:
            np.save(path / _TF_FILE, self._counts[0])
            np.save(path / _LEN_FILE, self._counts[1])

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True) -> BM25Index:
        """Load an index written by ``save`` (arrays memory-mapped unless ``mmap=False``).

        Raises:
            FileNotFoundError: ``path`` holds no saved index.
        """
        path = Path(path)
        meta_path = path / _META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"{path}: no BM25 index here ({_META_FILE} missing)")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        model = bm25s.BM25.load(path, mmap=mmap, show_progress=False)
        return cls(model, meta["stopwords"], meta["stemmer"])

    @classmethod
    def cached(
        cls,
        ctx: IndexContext,
        kind: str,
        settings: dict,
        config: BM25Config,
        texts: Callable[[], Iterable[str]],
        total: int | None = None,
        force: bool = False,
        extra: Callable[[Path], dict | None] | None = None,
        edit: Callable[[], tuple[np.ndarray, Iterable]] | None = None,
        prepare: Prepare | None = None,
    ) -> tuple[Path, BM25Index]:
        """Build (unless an identical artifact exists) and load an index under ``ctx.cache_dir``.

        Args:
            ctx: where artifacts live and the corpus fingerprint.
            kind: artifact kind, e.g. ``"bm25"``.
            settings: what the texts are; the BM25 config and format are added.
            config: tokenizer and BM25 variant.
            texts: called once, only when building, to stream the documents.
            total: number of documents, for the progress bar.
            force: rebuild even if the artifact exists.
            extra: called with the build directory after the index is saved, to add
                files of the caller's own; returns extra ``meta.json`` fields.
            edit: for a corpus that is an edit of ``ctx.parent``: returns the parent document ->
                document map and the new documents' texts, to derive the index from the
                parent's (``derive``) when the parent's exists.
            prepare: makes each item of ``texts`` and ``edit``'s documents its text, where it
                is tokenised (``build_saved``); None: they are texts.
        """
        full = {**settings, **cls.settings(config)}
        parent = None if edit is None or force else ctx.parent_artifact(kind, full)

        def build(tmp: Path) -> dict:
            index = None
            if parent is not None and edit is not None:
                doc_map, new_texts = edit()
                index = cls.derive_saved(
                    tmp, parent, doc_map, new_texts, config, ctx.progress, None, ctx.engine, prepare
                )
            derived = index is not None
            if index is None:
                index = cls.build_saved(tmp, texts(), config, ctx.progress, total, ctx.engine, prepare)
            info = {
                "documents": index.num_docs,
                "vocabulary": len(index._vocab),
                "tokenised": index.tokenised,
            }
            if derived:
                info["derived_from"] = parent.name  # type: ignore[union-attr]
            if extra is not None:
                info.update(extra(tmp) or {})
            return info

        path = build_artifact(ctx.cache_dir, kind, full, ctx.fingerprint, build, force=force)
        return path, cls.load(path)

    @classmethod
    def over_sentences(
        cls, config: BM25Config, ctx: IndexContext, force: bool = False
    ) -> tuple[Path, BM25Index]:
        """The sentence index of ``ctx.store`` (document ``i`` = store row ``i``), shared by retrievers."""
        store = ctx.store

        def edit() -> tuple[np.ndarray, Iterable[tuple[str, str]]]:
            assert ctx.delta is not None
            return ctx.delta.row_map, sentence_rows(store, ctx.delta.kept_rows)

        return cls.cached(
            ctx,
            "bm25",
            {"unit": "sentence", "title_prefix": config.title_prefix},
            config,
            lambda: sentence_rows(store),
            total=len(store),
            force=force,
            edit=edit if ctx.delta is not None else None,
            prepare=functools.partial(row_text, title_prefix=config.title_prefix),
        )

    @classmethod
    def settings(cls, config: BM25Config) -> dict:
        """Everything about an index's construction except its texts, for artifact hashes."""
        return {
            "method": config.method,
            "k1": config.k1,
            "b": config.b,
            "stopwords": config.stopwords,
            "stemmer": config.stemmer,
            "format": cls.FORMAT,
            "bm25s": bm25s.__version__,
        }

    # -- querying -----------------------------------------------------------------------------

    @property
    def num_docs(self) -> int:
        return int(self.model.scores["num_docs"])

    def query_ids(self, query: str) -> list[int]:
        """Token ids of ``query`` (repeats kept, as bm25s scores them); unknown words dropped."""
        out = []
        for word in self._splitter(normalize_text(query).lower()):
            if word in self._stopwords:
                continue
            tid = self._vocab.get(self._stem(word) if self._stem else word)
            if tid is not None:
                out.append(tid)
        return out

    def _baseline(self, ids: Sequence[int]) -> float:
        """Score of a document that contains none of ``ids`` (non-zero only for BM25L/BM25+)."""
        nonocc = self.model.nonoccurrence_array
        return float(nonocc[np.asarray(ids)].sum()) if nonocc is not None and len(ids) else 0.0

    def scores(self, query: str | Sequence[int], weight_mask: np.ndarray | None = None) -> np.ndarray:
        """bm25s scores of every document for ``query`` (text or token ids)."""
        ids = self.query_ids(query) if isinstance(query, str) else list(query)
        if not ids:
            return np.zeros(self.num_docs, dtype=np.float32)
        return self.model.get_scores_from_ids(ids, weight_mask=weight_mask)

    def search(self, query: str | Sequence[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents that contain at least one query term, best first.

        Ties are broken by document index, so results are deterministic.

        Returns:
            (document indices as int64, scores as float32); empty when no query word is known.
        """
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        ids = self.query_ids(query) if isinstance(query, str) else list(query)
        if not ids:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        scores = self.model.get_scores_from_ids(ids)
        matched = np.flatnonzero(scores > self._baseline(ids))
        if len(matched) > k:
            part = np.argpartition(-scores[matched], k - 1)[:k]
            matched = matched[part]
        order = np.lexsort((matched, -scores[matched]))
        docs = matched[order].astype(np.int64)
        return docs, scores[docs].astype(np.float32)

    def search_many(
        self, queries: Sequence[str | Sequence[int]], k: int, n_threads: int = 0
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """``search`` for many queries, on ``n_threads`` threads (0 = this thread)."""
        if n_threads <= 0 or len(queries) < 2:
            return [self.search(q, k) for q in queries]
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            return list(pool.map(lambda q: self.search(q, k), queries))

    def score_docs(self, query: str | Sequence[int], docs: Sequence[int] | np.ndarray) -> np.ndarray:
        """Scores of the given documents only (same values as ``scores(query)[docs]``).

        Binary-searches each query term's posting list, so the cost depends on
        ``len(docs)``, not on the corpus size.
        """
        docs = np.asarray(docs, dtype=np.int64)
        if docs.size and (docs.min() < 0 or docs.max() >= self.num_docs):
            raise ValueError(f"document ids must be in 0..{self.num_docs - 1}")
        ids = self.query_ids(query) if isinstance(query, str) else list(query)
        out = np.zeros(len(docs), dtype=np.float32)
        if not ids or not len(docs):
            return out
        data, indices, indptr = (self.model.scores[key] for key in ("data", "indices", "indptr"))
        for tid in ids:
            start, end = int(indptr[tid]), int(indptr[tid + 1])
            if start == end:
                continue
            posting = indices[start:end]
            pos = np.minimum(np.searchsorted(posting, docs), end - start - 1)
            hit = posting[pos] == docs
            out[hit] += data[start:end][pos[hit]]
        if self.model.nonoccurrence_array is not None:
            out += np.float32(self._baseline(ids))
        return out


def _write_shards(
    work: Path, stream: Iterable[tuple], vocabulary: Vocabulary, shards: list, lengths: list, bar: tqdm
) -> None:
    """Renumber each tokenised shard of ``stream`` (``tokenise_shard``'s tuples) into ``vocabulary``,
    write it under ``work`` after the documents already in ``lengths``, and append it and its
    document lengths to ``shards`` and ``lengths``."""
    done = sum(len(x) for x in lengths)
    for words, terms, tfs, doc_len, per_doc in stream:
        terms = vocabulary.renumber(words, terms)
        shards.append(
            write_shard(work / f"{len(shards):06d}", done, terms, tfs, per_doc, len(vocabulary.ids))
        )
        lengths.append(doc_len)
        done += len(doc_len)
        bar.update(len(doc_len))
    bar.close()


def _emptying(head: list, rest: Iterator) -> Iterator:
    """The items of ``head`` (the list emptied as they are taken, so that it holds none of them
    for the rest of the build), then those of ``rest``."""
    head.reverse()
    while head:
        yield head.pop()
    yield from rest


def _shards(
    texts: Iterator, config: BM25Config, engine: Any = None, prepare: Prepare | None = None
) -> Iterator[tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """``tokenise_shard`` of every ``config.shard_docs`` items, in order: by ``engine``'s
    tokenisers (Ray actors), by ``config.workers`` spawned processes, or here."""
    batches = iter(lambda: list(itertools.islice(texts, config.shard_docs)), [])
    if engine is not None and hasattr(engine, "tokenisers"):
        pool = engine.tokenisers(config.stopwords, config.stemmer, prepare)
    elif config.workers > 1:
        pool = ProcessTokenisers(config.workers, config.stopwords, config.stemmer, prepare)
    else:
        for batch in batches:
            yield tokenise_shard(batch, config.stopwords, config.stemmer, prepare)
        return
    with pool:
        pending: deque = deque()
        for batch in batches:
            pending.append(pool.tokenise(batch))
            del batch
            if len(pending) >= pool.in_flight:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def sentence_text(page: str, text: str, title_prefix: bool) -> str:
    """The text indexed for one sentence: readable title (optional) + de-tokenised sentence."""
    body = detokenize(text)
    return f"{page_to_title(page)} {body}" if title_prefix else body


def row_text(row: tuple[str, str], title_prefix: bool) -> str:
    """``sentence_text`` of a ``(page, text)`` row of ``sentence_rows``."""
    return sentence_text(row[0], row[1], title_prefix)


def sentence_rows(store: SentenceStore, first: int = 0) -> Iterator[tuple[str, str]]:
    """Stream ``(page, raw text)`` of every store row from row ``first`` on, in row order."""
    expected = first
    for row, page, text in store.iter_rows(first=first):
        if row != expected:
            raise ValueError(f"{store.db_path}: row ids are not dense (expected {expected}, got {row})")
        expected += 1
        yield page, text


def sentence_texts(store: SentenceStore, title_prefix: bool, first: int = 0) -> Iterator[str]:
    """Stream the indexed text of every store row from row ``first`` on, in row order."""
    return (sentence_text(page, text, title_prefix) for page, text in sentence_rows(store, first))


class BM25Retriever:
    """BM25 over the sentences of the store (bm25s).

    Args:
        config: tokenizer and BM25 parameters.
        ctx: the store, cache directory and corpus fingerprint.
        name: the ``retriever`` field of the hits.
    """

    def __init__(self, config: BM25Config, ctx: IndexContext, name: str = "bm25") -> None:
        self.config = config
        self.ctx = ctx
        self.name = name
        self._index: BM25Index | None = None

    @property
    def index(self) -> BM25Index:
        if self._index is None:
            raise RuntimeError(f"retriever {self.name!r}: call build() before retrieving")
        return self._index

    def build(self, force: bool = False) -> Path:
        """Build (or reuse) the sentence index and load it."""
        path, self._index = BM25Index.over_sentences(self.config, self.ctx, force=force)
        return path

    def retrieve(self, query: str, k: int) -> list[Hit]:
        """Top-``k`` sentences for ``query``; [] when no query word is in the vocabulary.

        Raises:
            ValueError: empty query or ``k <= 0``.
        """
        _check_query(query, k)
        docs, scores = self.index.search(query, k)
        return self._hits(query, docs, scores)

    def retrieve_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """``retrieve`` for each query (scored on two threads)."""
        for q in queries:
            _check_query(q, k)
        results = self.index.search_many(queries, k, n_threads=2)
        return [self._hits(q, d, s) for q, (d, s) in zip(queries, results, strict=True)]

    def _hits(self, query: str, docs: np.ndarray, scores: np.ndarray) -> list[Hit]:
        sids = self.ctx.store.ids_of_rows(docs.tolist())
        return [
            Hit(sentence=sid, score=float(s), retriever=self.name, query=query)
            for sid, s in zip(sids, scores, strict=True)
        ]


def _check_query(query: str, k: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query must be a non-empty string, got {query!r}")
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
