"""Hierarchical retrieval: candidate pages first, then sentences inside them.

As in the FEVER baselines and Nie et al. (2019, "Combining fact extraction
and verification with neural semantic matching networks"), pages are found by
(a) matching claim n-grams against normalised page titles and (b) BM25 over
whole pages; the sentences of the best pages are then ranked by sentence BM25
plus their page's score, so a strong page lifts all of its sentences while
sentence overlap orders them within and across pages.

Artifacts: a ``pages`` directory holding the title table (SQLite, normalised
title key -> page) and the page-level BM25 index; the sentence-level index is
the shared ``bm25`` artifact of ``BM25Index.over_sentences``.  The page index is
built in shards through disk as the sentence index is (``BM25Index.build_saved``),
so its build's memory is bounded by a shard, not by the corpus; the files are
those of a one-shot build.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from array import array
from collections.abc import Iterator, MutableSequence, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bm25s.stopwords import STOPWORDS_EN_PLUS

from garag.artifacts import build_artifact
from garag.config import BM25Config, PagesConfig
from garag.corpus import compact_map
from garag.store import SentenceStore
from garag.text import detokenize, normalize_title, page_to_title
from garag.types import Hit
from retrievers.base import IndexContext
from retrievers.bm25 import BM25Index

_FORMAT = 1
_TITLES_DB = "titles.db"
_PAGE_INDEX = "page_bm25"
_PAGE_ROWS = "page_idx.npy"

# Kinds of title keys in the table.
_EXACT, _DISAMBIGUATED, _ARTICLE = 0, 1, 2
_ARTICLES = ("the ", "a ", "an ")
_STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_POSSESSIVE_RE = re.compile(r"(?<=\w)['\u2019]s\b|(?<=s)['\u2019](?=\s|$)", re.IGNORECASE)
_DISAMBIG_RE = re.compile(r"\(([^()]*)\)\s*$")


@dataclass(frozen=True)
class PageScoring:
    """Internal weights of the page retriever (defaults tuned on the FEVER and HoVer dev subsets).

    Attributes:
        bm25_weight: weight of page BM25, normalised so the best page scores 1.
        sentence_weight: weight of sentence BM25, normalised so the best candidate sentence scores 1.
        disambiguation_factor: title match of ``Title_-LRB-x-RRB-`` when no word of ``x`` is in the claim.
        article_factor: title matched only after dropping its leading article.
        lowercase_factor: claim n-gram that does not start and end with a capitalised word.
        subspan_factor: n-gram lying inside a longer n-gram that also matched a title.
        prefix_factor: page whose title extends a maximal matched n-gram (``Liverpool F.C.`` for
            ``Liverpool``).
        prefix_scan: titles read per prefix.
        prefix_keep: prefix pages kept per n-gram, the best by page BM25.
    """

    bm25_weight: float = 1.0
    sentence_weight: float = 1.0
    disambiguation_factor: float = 0.8
    article_factor: float = 0.9
    lowercase_factor: float = 0.5
    subspan_factor: float = 0.5
    prefix_factor: float = 0.5
    prefix_scan: int = 200
    prefix_keep: int = 3


# -- title keys (pure) -----------------------------------------------------------------------------


def key_tokens(text: str) -> list[str]:
    """Word and punctuation tokens with possessives dropped: ``Bullock's`` -> ``bullock``."""
    return _TOKEN_RE.findall(_POSSESSIVE_RE.sub("", text))


def title_keys(page: str) -> list[tuple[str, int]]:
    """Lookup keys of one page id with their kind (exact, disambiguation stripped, article dropped)."""
    key = " ".join(key_tokens(normalize_title(page)))
    if not key:
        return []
    kind = (
        _EXACT
        if key == " ".join(key_tokens(normalize_title(page, strip_disambiguation=False)))
        else _DISAMBIGUATED
    )
    keys = [(key, kind)]
    for article in _ARTICLES:
        if key.startswith(article) and len(key) > len(article):
            keys.append((key[len(article) :], _ARTICLE))
    return keys


def _is_content(token: str) -> bool:
    return token[0].isalnum() and token not in _STOPWORDS


@dataclass(frozen=True)
class Span:
    """A claim n-gram: its key, token range, content words and whether it looks like a name."""

    key: str
    start: int
    end: int
    content: int
    capitalised: bool


def claim_spans(claim: str, max_ngram: int) -> tuple[list[Span], int]:
    """Claim n-grams (up to ``max_ngram`` tokens) that hold a content word, and the content-word count."""
    raw = key_tokens(unicodedata.normalize("NFKC", claim))
    folded = [t.casefold() for t in raw]
    content = [_is_content(t) for t in folded]
    capital = [t[0].isupper() or t[0].isdigit() for t in raw]
    spans = []
    for i in range(len(folded)):
        for j in range(i + 1, min(len(folded), i + max_ngram) + 1):
            words = [n for n in range(i, j) if content[n]]
            if words:
                cap = capital[words[0]] and capital[words[-1]]
                spans.append(Span(" ".join(folded[i:j]), i, j, len(words), cap))
    return spans, sum(content)


# -- the title table -------------------------------------------------------------------------------


def build_title_table(page_names: list[str], db_path: Path) -> int:
    """Write the SQLite table ``titles(key, page_idx, kind)``; returns the number of keys."""
    con = sqlite3.connect(db_path)
    con.execute("CREATE TABLE titles (key TEXT NOT NULL, page_idx INTEGER NOT NULL, kind INTEGER NOT NULL)")
    rows = ((key, idx, kind) for idx, page in enumerate(page_names) for key, kind in title_keys(page))
    con.executemany("INSERT INTO titles VALUES (?,?,?)", rows)
    con.execute("CREATE INDEX titles_key ON titles(key)")
    n = con.execute("SELECT COUNT(*) FROM titles").fetchone()[0]
    con.commit()
    con.close()
    return n


class TitleTable:
    """Read-only lookups in a built title table."""

    def __init__(self, db_path: Path) -> None:
        self._con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False)

    def exact(self, keys: list[str]) -> list[tuple[str, int, int]]:
        """``(key, page_idx, kind)`` for every stored key among ``keys``."""
        out = []
        for i in range(0, len(keys), 900):
            chunk = keys[i : i + 900]
            q = f"SELECT key, page_idx, kind FROM titles WHERE key IN ({','.join('?' * len(chunk))})"
            out.extend(self._con.execute(q, chunk).fetchall())
        return out

    def extending(self, key: str, limit: int) -> list[int]:
        """Pages whose title key starts with ``key`` followed by more words (at most ``limit``)."""
        q = "SELECT page_idx FROM titles WHERE key > ? AND key < ? AND kind != ? LIMIT ?"
        return [r[0] for r in self._con.execute(q, (key + " ", key + "!", _ARTICLE, limit))]


# -- the retriever ---------------------------------------------------------------------------------


def page_text(page: tuple[str, Sequence[str]]) -> str:
    """The text indexed for a page: its title plus all its sentences, from ``(page id, raw
    sentences)``."""
    return " ".join([page_to_title(page[0]), *(detokenize(t) for t in page[1])])


def _pages(
    store: SentenceStore, page_idx: MutableSequence[int], first: int = 0
) -> Iterator[tuple[str, Sequence[str]]]:
    """``(page id, raw sentences)`` of each page with sentences (from page number ``first`` on),
    for ``page_text``; records each page's number."""
    for idx, page, texts in store.iter_pages_text(first):
        page_idx.append(idx)
        yield page, texts


def _page_texts(store: SentenceStore, page_idx: MutableSequence[int], first: int = 0) -> Iterator[str]:
    """``page_text`` of each page with sentences (from page number ``first`` on); records each
    page's number."""
    return map(page_text, _pages(store, page_idx, first))


@dataclass(frozen=True)
class _Indexes:
    """What ``PageRetriever.build`` loads.

    Attributes:
        titles: the title table.
        page_index: BM25 over pages; document ``d`` is page number ``doc_page[d]``.
        doc_page, page_doc: document -> page number, and page number -> document (-1: no sentences).
        sentences: the shared sentence index (document = store row).
        names: page ids by page number.
    """

    titles: TitleTable
    page_index: BM25Index
    doc_page: np.ndarray
    page_doc: np.ndarray
    sentences: BM25Index
    names: list[str]


class PageRetriever:
    """Pages by title match and page BM25, then their sentences by sentence BM25.

    Args:
        config: page selection settings.
        bm25_config: tokenizer and BM25 parameters for the page and sentence indexes.
        ctx: the store, cache directory and corpus fingerprint.
        name: the ``retriever`` field of the hits.
        scoring: internal weights (see ``PageScoring``).
    """

    def __init__(
        self,
        config: PagesConfig,
        bm25_config: BM25Config,
        ctx: IndexContext,
        name: str = "pages",
        scoring: PageScoring | None = None,
    ) -> None:
        self.config = config
        self.bm25_config = bm25_config
        self.ctx = ctx
        self.name = name
        self.scoring = scoring or PageScoring()
        self._loaded: _Indexes | None = None

    def build(self, force: bool = False) -> Path:
        """Build (or reuse) the title table, the page index and the sentence index, and load them."""
        store, bm25 = self.ctx.store, self.bm25_config
        settings = {"format": _FORMAT, "index": BM25Index.settings(bm25)}
        parent = None if force else self.ctx.parent_artifact("pages", settings)

        # Built in shards through disk as the sentence index is (BM25Index.build_saved), a shard
        # holding about bm25.shard_docs sentences' worth of pages: memory bounded whatever the corpus.
        shard_pages = max(1, bm25.shard_docs * store.n_pages // max(len(store), 1))
        page_bm25 = bm25.replace(shard_docs=shard_pages)
        engine = self.ctx.engine

        def build(tmp: Path) -> dict:
            n_keys = build_title_table(store.page_names(), tmp / _TITLES_DB)
            index, info = None, {}
            if parent is not None:  # an edited corpus: only the new pages are tokenised
                assert self.ctx.delta is not None
                new_idx = self.ctx.delta.page_map[np.load(parent / _PAGE_ROWS)]
                kept = new_idx >= 0
                page_idx = array("q", new_idx[kept].tolist())
                pages = _pages(store, page_idx, self.ctx.delta.kept_pages)
                index = BM25Index.derive_saved(
                    tmp / _PAGE_INDEX, parent / _PAGE_INDEX, compact_map(kept), pages, page_bm25,
                    self.ctx.progress, None, engine, page_text,
                )  # fmt: skip
                info = {"derived_from": parent.name} if index is not None else {}
            if index is None:
                page_idx = array("q")
                index = BM25Index.build_saved(
                    tmp / _PAGE_INDEX, _pages(store, page_idx), page_bm25, self.ctx.progress,
                    store.n_pages, engine, page_text,
                )  # fmt: skip
            np.save(tmp / _PAGE_ROWS, np.frombuffer(page_idx, dtype=np.int64))
            return {"title_keys": n_keys, "pages_with_text": len(page_idx), **info}

        path = build_artifact(self.ctx.cache_dir, "pages", settings, self.ctx.fingerprint, build, force=force)
        _, sentences = BM25Index.over_sentences(bm25, self.ctx, force=force)
        doc_page = np.load(path / _PAGE_ROWS)
        page_doc = np.full(store.n_pages, -1, dtype=np.int64)
        page_doc[doc_page] = np.arange(len(doc_page))
        names = store.page_names()
        self._loaded = _Indexes(
            titles=TitleTable(path / _TITLES_DB),
            page_index=BM25Index.load(path / _PAGE_INDEX),
            doc_page=doc_page,
            page_doc=page_doc,
            sentences=sentences,
            names=names,
        )
        return path

    @property
    def _parts(self) -> _Indexes:
        if self._loaded is None:
            raise RuntimeError(f"retriever {self.name!r}: call build() before retrieving")
        return self._loaded

    # -- page candidates ------------------------------------------------------------------------

    def title_matches(self, claim: str) -> dict[int, float]:
        """Page number -> title-match score for the claim's n-grams (before page BM25)."""
        parts, sc = self._parts, self.scoring
        titles, page_index, page_doc, names = parts.titles, parts.page_index, parts.page_doc, parts.names
        spans, n_content = claim_spans(claim, self.config.max_ngram)
        if not spans:
            return {}
        by_key: dict[str, list[Span]] = {}
        for s in spans:
            by_key.setdefault(s.key, []).append(s)
        found = titles.exact(list(by_key))
        matched = [s for key in {k for k, _, _ in found} for s in by_key[key]]
        claim_words = {s.key for s in spans if s.end - s.start == 1}

        def span_score(s: Span) -> float:
            covered = any(
                o.start <= s.start and s.end <= o.end and o.end - o.start > s.end - s.start for o in matched
            )
            f = (1.0 if s.capitalised else sc.lowercase_factor) * (sc.subspan_factor if covered else 1.0)
            return self.config.title_weight * f * s.content / max(n_content, 1)

        best_span = {key: max(by_key[key], key=span_score) for key in {k for k, _, _ in found}}
        scores: dict[int, float] = {}
        for key, page, kind in found:
            f = 1.0
            if kind == _ARTICLE:
                f = sc.article_factor
            elif kind == _DISAMBIGUATED:
                m = _DISAMBIG_RE.search(page_to_title(names[page]))
                words = {w for w in key_tokens(m.group(1).casefold()) if _is_content(w)} if m else set()
                f = 1.0 if words & claim_words else sc.disambiguation_factor
            scores[page] = max(scores.get(page, 0.0), f * span_score(best_span[key]))
        for key, s in best_span.items():
            maximal = not any(o.start <= s.start and s.end <= o.end and o.key != key for o in matched)
            if not (maximal and s.capitalised):
                continue
            extra = [p for p in titles.extending(key, sc.prefix_scan) if page_doc[p] >= 0 and p not in scores]
            if not extra:
                continue
            bm = page_index.score_docs(claim, page_doc[extra])
            for i in np.argsort(-bm, kind="stable")[: sc.prefix_keep]:
                scores[extra[i]] = sc.prefix_factor * span_score(s)
        return scores

    def candidate_pages(self, claim: str) -> list[tuple[int, float]]:
        """The ``max_pages`` best pages with sentences as (page number, score), best first."""
        parts = self._parts
        page_index, doc_page, page_doc = parts.page_index, parts.doc_page, parts.page_doc
        scores = self.title_matches(claim)
        docs, _ = page_index.search(claim, self.config.page_bm25_k)
        for d in docs:
            scores.setdefault(int(doc_page[d]), 0.0)
        pages = [p for p in scores if page_doc[p] >= 0]
        if not pages:
            return []
        bm = page_index.score_docs(claim, page_doc[pages])
        top = float(bm.max())
        weight = self.scoring.bm25_weight / top if top > 0 else 0.0
        ranked = [(p, scores[p] + weight * float(b)) for p, b in zip(pages, bm, strict=True)]
        ranked.sort(key=lambda x: (-x[1], x[0]))
        return ranked[: self.config.max_pages]

    # -- retrieval -------------------------------------------------------------------------------

    def retrieve(self, query: str, k: int) -> list[Hit]:
        """Top-``k`` sentences of the best pages for ``query``; [] when nothing matches.

        Raises:
            ValueError: empty query or ``k <= 0``.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        parts = self._parts
        store = self.ctx.store
        pages = self.candidate_pages(query)
        if not pages:
            return []
        names = parts.names
        rows_of = store.rows_of_pages([names[p] for p, _ in pages])
        rows, page_score, page_of = [], [], []
        for p, s in pages:
            r = rows_of.get(names[p], [])
            rows.extend(r)
            page_score.extend([s] * len(r))
            page_of.extend([p] * len(r))
        if not rows:
            return []
        rows_arr = np.asarray(rows, dtype=np.int64)
        sent = parts.sentences.score_docs(query, rows_arr).astype(np.float64)
        top = sent.max()
        final = np.asarray(page_score) + (self.scoring.sentence_weight / top * sent if top > 0 else 0.0)
        order = np.lexsort((rows_arr, -final))
        if self.config.sentences_per_page > 0:
            order = _cap_per_page(order, page_of, self.config.sentences_per_page)
        order = order[:k]
        sids = store.ids_of_rows(rows_arr[order].tolist())
        return [
            Hit(sentence=sid, score=float(final[i]), retriever=self.name, query=query)
            for sid, i in zip(sids, order, strict=True)
        ]

    def retrieve_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """``retrieve`` for each query."""
        return [self.retrieve(q, k) for q in queries]


def _cap_per_page(order: np.ndarray, page_of: list[int], n: int) -> np.ndarray:
    """Keep at most ``n`` entries of ``order`` per page."""
    seen: dict[int, int] = {}
    keep = []
    for i in order:
        count = seen.get(page_of[i], 0)
        if count < n:
            seen[page_of[i]] = count + 1
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)
