"""BM25 term weights from token streams: tokenisation into compact postings and bm25s's weights.

Pure numpy over token ids (no files): ``_tokenise`` streams texts through a bm25s tokenizer into
(term, tf) postings grouped by document, and ``bm25_matrix`` turns postings into bm25s's CSC
weight arrays.  ``BM25Index`` (retrievers/bm25.py) builds, derives and saves indexes with them.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Callable, Iterable

import numpy as np
from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer
from bm25s.tokenization import Tokenizer
from tqdm import tqdm

_CHUNK_DOCS = 50_000  # documents tokenised per numpy batch while building
_MATRIX_CHUNK = 1_000_000  # (document, term) entries weighted per numpy batch
_NONOCCURRENCE_METHODS = ("bm25l", "bm25+")
_DELTA = 0.5  # bm25s's default delta for BM25L / BM25+


def normalize_text(text: str) -> str:
    """Unicode NFKC, applied to documents and queries alike.

    FEVER's wiki text is partly in decomposed form (NFD) while claims are
    composed, and bm25s's word splitter cuts a decomposed ``Simón`` at the accent.
    """
    return unicodedata.normalize("NFKC", text)


def _make_stemmer(language: str) -> Callable[[str], str] | None:
    if not language:
        return None
    import Stemmer

    try:
        return Stemmer.Stemmer(language).stemWord
    except KeyError as e:
        raise ValueError(f"bm25.stemmer: PyStemmer has no language {language!r}") from e


def _make_tokenizer(stopwords: str | list[str], stemmer: str) -> Tokenizer:
    try:
        return Tokenizer(lower=True, stopwords=stopwords or None, stemmer=_make_stemmer(stemmer))
    except ValueError as e:
        raise ValueError(f"bm25.stopwords: {e}") from e


def _chunk_postings(docs: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Token-id lists -> (term, tf) pairs sorted by document, document lengths, pairs per document."""
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    flat = np.fromiter(itertools.chain.from_iterable(docs), dtype=np.int64, count=int(lengths.sum()))
    local = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
    keys, tf = np.unique((local << 32) | flat, return_counts=True)
    terms = (keys & 0xFFFFFFFF).astype(np.int32)
    per_doc = np.bincount(keys >> 32, minlength=len(docs)).astype(np.int32)
    # tf saturates in BM25 long before 65535, so uint16 loses nothing that matters.
    return terms, np.minimum(tf, 65535).astype(np.uint16), lengths.astype(np.int32), per_doc


def _tokenise(
    tokenizer: Tokenizer, texts: Iterable[str], progress: bool, total: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_chunk_postings``'s arrays for all ``texts`` (streamed), growing ``tokenizer``'s vocabulary."""
    stream = tokenizer.streaming_tokenize(map(normalize_text, texts), update_vocab=True, allow_empty=True)
    bar = tqdm(
        stream, total=total, desc="bm25: tokenise", unit=" docs", disable=not progress, mininterval=1.0
    )
    parts: list[tuple[np.ndarray, ...]] = []
    docs = iter(bar)  # one iterator: a disabled tqdm restarts (and loses) the stream on each iter()
    while chunk := list(itertools.islice(docs, _CHUNK_DOCS)):
        parts.append(_chunk_postings(chunk))
    bar.close()
    if not parts:
        empty = np.empty(0, dtype=np.int32)
        return empty, np.empty(0, dtype=np.uint16), empty, empty
    terms, tfs, doc_len, per_doc = (np.concatenate(p) for p in zip(*parts, strict=True))
    return terms, tfs, doc_len, per_doc


def _seed_vocab(tokenizer: Tokenizer, vocab: dict[str, int]) -> None:
    """Start ``tokenizer`` from an index's vocabulary (term or stem -> id), so that new words get
    the next ids and known ones keep theirs."""
    vocab = {str(k): int(v) for k, v in vocab.items()}
    if tokenizer.stemmer is None:
        tokenizer.word_to_id = dict(vocab)
        return
    tokenizer.stem_to_sid = dict(vocab)
    if "" in vocab:  # the empty document's token, which bm25s adds as both a word and a stem
        tokenizer.word_to_id = {"": vocab[""]}
        tokenizer.word_to_stem = {"": ""}


def term_weights(
    df: np.ndarray, n_docs: int, avgdl: float, method: str, k1: float, b: float, delta: float = _DELTA
) -> tuple[np.ndarray, np.ndarray | None]:
    """bm25s's idf of every term (float32) from its document frequency, and the non-occurrence
    array of BM25L/BM25+ (else None)."""
    idf = np.zeros(len(df), dtype=np.float64)
    present = df > 0
    distinct, inverse = np.unique(df[present], return_inverse=True)
    idf_fn = _select_idf_scorer(method)
    idf[present] = np.array([idf_fn(int(d), N=n_docs) for d in distinct], dtype=np.float64)[inverse]
    nonocc = None
    if method in _NONOCCURRENCE_METHODS:
        tfc0 = _select_tfc_scorer(method)(tf_array=0, l_d=avgdl, l_avg=avgdl, k1=k1, b=b, delta=delta)
        nonocc = np.where(present, idf * tfc0, 0.0).astype(np.float32)
    return idf.astype(np.float32), nonocc


def posting_weights(
    terms: np.ndarray,
    tfs: np.ndarray,
    lengths: np.ndarray,
    idf32: np.ndarray,
    nonocc: np.ndarray | None,
    avgdl: float,
    method: str,
    k1: float,
    b: float,
    delta: float = _DELTA,
) -> np.ndarray:
    """The weight of each (term, tf, document length) posting, as float32."""
    # Same operand types and order as bm25s's per-document loop, so the float32 weights match.
    tfc = _select_tfc_scorer(method)(
        tf_array=tfs.astype(np.float32), l_d=lengths, l_avg=np.float64(avgdl), k1=k1, b=b, delta=delta
    )
    weights = idf32[terms] * tfc
    if nonocc is not None:
        weights = weights - nonocc[terms]
    return weights


def bm25_matrix(
    terms: np.ndarray,
    tfs: np.ndarray,
    doc_len: np.ndarray,
    per_doc: np.ndarray,
    n_vocab: int,
    method: str,
    k1: float,
    b: float,
    delta: float = _DELTA,
    chunk: int = _MATRIX_CHUNK,
) -> tuple[dict, np.ndarray | None]:
    """BM25 term weights as bm25s's CSC arrays (pure; no I/O).

    Args:
        terms, tfs: one entry per (document, distinct term), grouped by document in order.
        doc_len: tokens per document (with repeats), as bm25s counts them.
        per_doc: entries per document.
        n_vocab: vocabulary size (term ids are ``0..n_vocab-1``).
        method, k1, b, delta: bm25s's scoring parameters.
        chunk: documents' entries processed at a time (bounds temporary memory).

    Returns:
        bm25s's ``scores`` dict (``data``, ``indices``, ``indptr``, ``num_docs``) with
        each term's postings in document order, and the non-occurrence array of
        BM25L/BM25+ (else None).
    """
    n_docs = len(doc_len)
    if n_docs == 0:
        raise ValueError("cannot build a BM25 index from no documents")
    if n_docs >= 2**31:
        raise ValueError(f"{n_docs} documents do not fit bm25s's int32 document ids")
    avgdl = float(doc_len.mean())
    df = np.bincount(terms, minlength=n_vocab)
    idf32, nonocc = term_weights(df, n_docs, avgdl, method, k1, b, delta)

    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    heads = indptr[:-1].copy()
    data = np.empty(len(terms), dtype=np.float32)
    indices = np.empty(len(terms), dtype=np.int32)
    doc_end = np.cumsum(per_doc, dtype=np.int64)
    d0, e0 = 0, 0
    while d0 < n_docs:
        d1 = int(np.searchsorted(doc_end, e0 + chunk, side="right"))
        d1 = max(d1, d0 + 1)
        e1 = int(doc_end[d1 - 1])
        t = terms[e0:e1]
        docs = np.repeat(np.arange(d0, d1, dtype=np.int32), per_doc[d0:d1])
        weights = posting_weights(t, tfs[e0:e1], doc_len[docs], idf32, nonocc, avgdl, method, k1, b, delta)
        # Counting sort into the columns: stable by term keeps each posting list in document order.
        order = np.argsort(t, kind="stable")
        ts = t[order]
        rank = np.arange(len(ts), dtype=np.int64) - np.searchsorted(ts, ts, side="left")
        pos = heads[ts] + rank
        data[pos] = weights[order]
        indices[pos] = docs[order]
        uniq, counts = np.unique(ts, return_counts=True)
        heads[uniq] += counts
        d0, e0 = d1, e1
    return {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}, nonocc
