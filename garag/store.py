"""SQLite sentence store: the single source of sentence text for every retriever.

One row per non-empty ``(page, line)`` with its text and hyperlinks, and a page
table.  Row ids are dense, ``0..N-1`` in corpus order, so index-based
retrievers (BM25, FAISS) store row ids and resolve them here.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from tqdm import tqdm

from garag.errors import ErrorPolicy, InputError
from garag.types import Sentence, SentenceId
from garag.wiki import Page, iter_pages

_SCHEMA = """
CREATE TABLE pages (
    page_idx INTEGER PRIMARY KEY,
    page TEXT NOT NULL UNIQUE,
    n_lines INTEGER NOT NULL,
    first_row INTEGER,
    n_sentences INTEGER NOT NULL
);
CREATE TABLE sentences (
    row INTEGER PRIMARY KEY,
    page_idx INTEGER NOT NULL,
    line INTEGER NOT NULL,
    text TEXT NOT NULL,
    links TEXT
);
"""
_INDEXES = "CREATE UNIQUE INDEX sentences_page_line ON sentences(page_idx, line);"


def build_store(
    corpus: str | Path | Iterable[Page],
    db_path: str | Path,
    policy: ErrorPolicy | None = None,
    batch_size: int = 10_000,
    progress: bool = True,
    source: str = "",
) -> dict:
    """Build the store from a wiki-pages corpus (a path, or its pages in order) in one streaming pass.

    ``source`` names the pages in errors (default: the path).

    Raises:
        InputError: a page id repeats (naming it), or a malformed page (unless skipping).

    Returns:
        Counts for ``meta.json``: pages, sentences, empty line slots, skipped records.
    """
    policy = policy or ErrorPolicy()
    pages = iter_pages(corpus, policy) if isinstance(corpus, (str, Path)) else corpus
    con = _create(db_path)
    counts = _append_pages(con, pages, {}, 0, policy, source or str(corpus), batch_size, progress)
    return _finish(con, counts, policy)


def derive_store(
    parent_db: str | Path,
    db_path: str | Path,
    drop: frozenset[str],
    pages: Iterable[Page],
    policy: ErrorPolicy | None = None,
    progress: bool = True,
) -> dict:
    """Build a store from a parent store without the pages ``drop``, then ``pages`` appended.

    The parent's kept rows are copied by SQLite in one statement (renumbered to stay dense, in
    order), so the result equals ``build_store`` over the same pages in the same order.

    Returns:
        Counts for ``meta.json``, as ``build_store``, plus the pages dropped and added.
    """
    policy = policy or ErrorPolicy()
    con = _create(db_path)
    con.execute("ATTACH DATABASE ? AS parent", (str(parent_db),))
    parent = con.execute(
        "SELECT page_idx, page, n_lines, first_row, n_sentences FROM parent.pages ORDER BY page_idx"
    ).fetchall()
    kept, remap, row = [], [], 0
    for old_idx, page, n_lines, first, n in parent:
        if page in drop:
            continue
        kept.append((len(kept), page, n_lines, row if n else None, n))
        if n:
            remap.append((old_idx, len(kept) - 1, row - first))
        row += n
    con.execute("CREATE TEMP TABLE remap (old INTEGER PRIMARY KEY, new INTEGER, shift INTEGER)")
    con.executemany("INSERT INTO temp.remap VALUES (?,?,?)", remap)
    con.executemany("INSERT INTO pages VALUES (?,?,?,?,?)", kept)
    con.execute(
        "INSERT INTO sentences SELECT s.row + m.shift, m.new, s.line, s.text, s.links "
        "FROM parent.sentences s JOIN temp.remap m ON s.page_idx = m.old ORDER BY s.row"
    )
    con.commit()
    con.execute("DETACH DATABASE parent")
    seen = {page: idx for idx, page, *_ in kept}
    counts = _append_pages(con, pages, seen, row, policy, "added pages", 10_000, progress)
    counts["dropped_pages"] = len(parent) - len(kept)
    counts["added_pages"] = counts["pages"] - len(kept)
    counts["line_slots"] += sum(n_lines for _, _, n_lines, _, _ in kept)
    return _finish(con, counts, policy)


def _create(db_path: str | Path) -> sqlite3.Connection:
    con = sqlite3.connect(db_path)
    con.executescript("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;" + _SCHEMA)
    return con


def _append_pages(
    con: sqlite3.Connection,
    pages: Iterable[Page],
    seen_pages: dict[str, int],
    row: int,
    policy: ErrorPolicy,
    source: str,
    batch_size: int,
    progress: bool,
) -> dict:
    """Insert ``pages`` after the ``seen_pages`` and rows already there; return the counts."""
    page_rows: list = []
    sent_rows: list = []
    n_slots = 0
    bar = tqdm(desc="sentence store: pages", unit=" pages", disable=not progress, mininterval=1.0)
    for page in pages:
        if page.id in seen_pages:
            policy.handle(InputError(source, None, f"page id {page.id!r} appears twice"), "duplicate_page")
            continue
        page_idx = len(seen_pages)
        seen_pages[page.id] = page_idx
        first = row
        for line, text, links in page.sentences():
            sent_rows.append((row, page_idx, line, text, json.dumps(links) if links else None))
            row += 1
        n_slots += len(page.lines)
        page_rows.append((page_idx, page.id, len(page.lines), first if row > first else None, row - first))
        if len(sent_rows) >= batch_size:
            _flush(con, page_rows, sent_rows)
        bar.update(1)
    _flush(con, page_rows, sent_rows)
    bar.close()
    return {"pages": len(seen_pages), "sentences": row, "line_slots": n_slots}


def _finish(con: sqlite3.Connection, counts: dict, policy: ErrorPolicy) -> dict:
    con.executescript(_INDEXES)
    con.commit()
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return {**counts, "skipped": dict(policy.counts)}


def _flush(con: sqlite3.Connection, page_rows: list, sent_rows: list) -> None:
    con.executemany("INSERT INTO pages VALUES (?,?,?,?,?)", page_rows)
    con.executemany("INSERT INTO sentences VALUES (?,?,?,?,?)", sent_rows)
    page_rows.clear()
    sent_rows.clear()


class SentenceStore:
    """Read access to a built store.  Cheap to construct; opens SQLite lazily.

    Connections are per thread (SQLite objects cannot cross threads).
    """

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        if not self.db_path.is_file():
            raise FileNotFoundError(f"{self.db_path}: sentence store not found (run `garag index` first)")
        self._con: sqlite3.Connection | None = None
        self._page_idx: dict[str, int] | None = None
        self._page_names: list[str] | None = None

    @property
    def con(self) -> sqlite3.Connection:
        if self._con is None:
            self._con = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, check_same_thread=False)
        return self._con

    def _pages(self) -> tuple[dict[str, int], list[str]]:
        if self._page_idx is None:
            names = [r[0] for r in self.con.execute("SELECT page FROM pages ORDER BY page_idx")]
            self._page_names = names
            self._page_idx = {p: i for i, p in enumerate(names)}
        return self._page_idx, self._page_names  # type: ignore[return-value]

    def __len__(self) -> int:
        return self.con.execute("SELECT COUNT(*) FROM sentences").fetchone()[0]

    @property
    def n_pages(self) -> int:
        return len(self._pages()[1])

    def page_names(self) -> list[str]:
        """All page ids, index = page number."""
        return list(self._pages()[1])

    def page_sizes(self) -> list[tuple[str, int]]:
        """``(page id, non-empty sentences)`` of every page, in page order."""
        return self.con.execute("SELECT page, n_sentences FROM pages ORDER BY page_idx").fetchall()

    def has_page(self, page: str) -> bool:
        return page in self._pages()[0]

    def ids_of_rows(self, rows: Iterable[int]) -> list[SentenceId]:
        """Sentence ids for row ids (same order)."""
        return [s.id for s in self.sentences_by_rows(rows)]

    def sentences_by_rows(self, rows: Iterable[int]) -> list[Sentence]:
        """Sentences for row ids, in the order given.

        Raises:
            KeyError: a row id is not in the store.
        """
        names = self._pages()[1]
        rows = list(rows)
        found: dict[int, Sentence] = {}
        for chunk in _chunks(rows, 900):
            q = f"SELECT row, page_idx, line, text, links FROM sentences WHERE row IN ({_marks(chunk)})"
            for r, p, line, text, links in self.con.execute(q, chunk):
                found[r] = Sentence(
                    SentenceId(names[p], line), text, tuple(json.loads(links)) if links else ()
                )
        missing = [r for r in rows if r not in found]
        if missing:
            raise KeyError(f"rows not in the sentence store: {missing[:5]}")
        return [found[r] for r in rows]

    def _find(self, sid: SentenceId) -> tuple[int, str, str | None] | None:
        """``(row, text, links_json)`` of a sentence, or None."""
        idx = self._pages()[0].get(sid.page)
        if idx is None:
            return None
        return self.con.execute(
            "SELECT row, text, links FROM sentences WHERE page_idx=? AND line=?", (idx, sid.line)
        ).fetchone()

    def get(self, sid: SentenceId) -> Sentence | None:
        """One sentence by FEVER id, or None (unknown page, or an empty line)."""
        found = self._find(sid)
        if found is None:
            return None
        _, text, links = found
        return Sentence(sid, text, tuple(json.loads(links)) if links else ())

    def row_of(self, sid: SentenceId) -> int | None:
        """Row id of a sentence, or None."""
        found = self._find(sid)
        return None if found is None else found[0]

    def page(self, page: str) -> list[Sentence]:
        """All non-empty sentences of a page in line order ([] for an unknown page)."""
        return self.pages([page]).get(page, [])

    def pages(self, pages: Iterable[str]) -> dict[str, list[Sentence]]:
        """Sentences of several pages, keyed by page id (unknown pages are absent)."""
        page_idx, names = self._pages()
        idxs = sorted({page_idx[p] for p in pages if p in page_idx})
        out: dict[str, list[Sentence]] = {}
        for chunk in _chunks(idxs, 900):
            q = (
                "SELECT page_idx, line, text, links FROM sentences "
                f"WHERE page_idx IN ({_marks(chunk)}) ORDER BY page_idx, line"
            )
            for p, line, text, links in self.con.execute(q, chunk):
                out.setdefault(names[p], []).append(
                    Sentence(SentenceId(names[p], line), text, tuple(json.loads(links)) if links else ())
                )
        return out

    def rows_of_pages(self, pages: Iterable[str]) -> dict[str, list[int]]:
        """Row ids of each page's sentences."""
        page_idx, names = self._pages()
        idxs = sorted({page_idx[p] for p in pages if p in page_idx})
        out: dict[str, list[int]] = {}
        for chunk in _chunks(idxs, 900):
            q = f"SELECT page_idx, row FROM sentences WHERE page_idx IN ({_marks(chunk)}) ORDER BY row"
            for p, r in self.con.execute(q, chunk):
                out.setdefault(names[p], []).append(r)
        return out

    def rows_of_ids(self, sids: Iterable[SentenceId]) -> dict[SentenceId, int]:
        """Row ids of sentences by FEVER id (ids not in the store are absent); reads only the
        ``(page, line)`` index, never the text."""
        page_idx, names = self._pages()
        want = set(sids)
        idxs = sorted({page_idx[s.page] for s in want if s.page in page_idx})
        out: dict[SentenceId, int] = {}
        for chunk in _chunks(idxs, 900):
            q = f"SELECT page_idx, line, row FROM sentences WHERE page_idx IN ({_marks(chunk)})"
            for p, line, r in self.con.execute(q, chunk):
                sid = SentenceId(names[p], line)
                if sid in want:
                    out[sid] = r
        return out

    def iter_rows(self, batch_size: int = 10_000, first: int = 0) -> Iterator[tuple[int, str, str]]:
        """Stream ``(row, page, text)`` in row order from row ``first`` on, for index builders."""
        names = self._pages()[1]
        cur = self.con.execute(
            "SELECT row, page_idx, text FROM sentences WHERE row >= ? ORDER BY row", (first,)
        )
        while True:
            batch = cur.fetchmany(batch_size)
            if not batch:
                return
            for r, p, text in batch:
                yield r, names[p], text

    def iter_page_meta(self, first: int = 0) -> Iterator[tuple[str, int, str]]:
        """Stream ``(page, sentences, first sentence's text or "")`` in page order from page
        ``first`` on, without loading the page index."""
        cur = self.con.execute(
            "SELECT p.page, p.n_sentences, s.text FROM pages p LEFT JOIN sentences s ON s.row = p.first_row "
            "WHERE p.page_idx >= ? ORDER BY p.page_idx",
            (first,),
        )
        for page, n, text in cur:
            yield page, n, text or ""

    def iter_pages(self, first: int = 0) -> Iterator[tuple[str, list[Sentence]]]:
        """Stream ``(page, sentences)`` of the pages that have sentences, in page order from page
        ``first`` on, without loading the page index."""
        cur = self.con.execute(
            "SELECT p.page, s.line, s.text, s.links FROM sentences s JOIN pages p ON p.page_idx = s.page_idx "
            "WHERE s.page_idx >= ? ORDER BY s.page_idx, s.line",
            (first,),
        )
        for page, rows in itertools.groupby(cur, key=lambda r: r[0]):
            yield (
                page,
                [
                    Sentence(SentenceId(page, line), text, tuple(json.loads(links)) if links else ())
                    for _, line, text, links in rows
                ],
            )

    def iter_pages_text(self, first: int = 0) -> Iterator[tuple[int, str, list[str]]]:
        """Stream ``(page_idx, page, [sentence texts])`` in page order from page ``first`` on, for
        page-level indexes."""
        cur = self.con.execute(
            "SELECT page_idx, text FROM sentences WHERE page_idx >= ? ORDER BY page_idx, line", (first,)
        )
        names = self._pages()[1]
        current, texts = None, []
        for p, text in cur:
            if p != current:
                if current is not None:
                    yield current, names[current], texts
                current, texts = p, []
            texts.append(text)
        if current is not None:
            yield current, names[current], texts

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _marks(chunk: list) -> str:
    return ",".join("?" * len(chunk))


def _chunks(items: list, n: int) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
