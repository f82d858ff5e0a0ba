"""The corpus graph (GRAAL's Algorithm 1), stored in SQLite.

An undirected multigraph: vertices are entities (the corpus's pages), and each
pair of distinct entities co-mentioned in a frame gets one edge labelled with
the frame's sentence ``(page, line)`` and frame number (whose span is in the
``frames`` table).  Both frame kinds are stored in one artifact: clause frames
(``frame >= 0``; a sentence without any predicate falls back to one
whole-sentence frame) and whole-sentence edges (``frame = -1``, GraphRetrieve),
so one build serves GRAAL and GraphRetrieve.

Layout, as GRAAL stored its graph per page in a key-value store: every table
is keyed by ``page_idx`` first (a page's partition is one range scan), and the
inverted index ``entity_pages(entity -> pages)`` tells which partitions hold an
entity's mentions and edges, so a claim reads only the part of the graph it
needs.  The parse of every sentence is kept too, so adding pages re-links only
the sentences whose alias lookups changed, without re-parsing: an incremental
add gives the same mentions and edges as a rebuild.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from garag.text import detokenize
from retrievers.graal.aliases import AliasTable
from retrievers.graal.frames import Frame
from retrievers.graal.linker import Mention, ParsedSentence, sentence_keys

SENTENCE_FRAME = -1
_SOURCES = {"text": 0, "link": 1, "page": 2}
SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (page_idx INTEGER PRIMARY KEY, page TEXT NOT NULL UNIQUE,
    n_sentences INTEGER NOT NULL, first_text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parses (page_idx INTEGER, line INTEGER, data TEXT NOT NULL,
    PRIMARY KEY (page_idx, line)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS frames (page_idx INTEGER, line INTEGER, frame INTEGER, start INTEGER,
    "end" INTEGER, predicate TEXT, PRIMARY KEY (page_idx, line, frame)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS mentions (page_idx INTEGER, entity INTEGER, line INTEGER, start INTEGER,
    "end" INTEGER, source INTEGER, PRIMARY KEY (page_idx, entity, line, start)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS edges (page_idx INTEGER, line INTEGER, frame INTEGER, u INTEGER, v INTEGER,
    PRIMARY KEY (page_idx, line, frame, u, v)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entity_pages (entity INTEGER, page_idx INTEGER, n INTEGER,
    PRIMARY KEY (entity, page_idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entity_stats (entity INTEGER PRIMARY KEY, n_mentions INTEGER, n_pages INTEGER);
CREATE TABLE IF NOT EXISTS sentence_keys (key TEXT, page_idx INTEGER, line INTEGER,
    PRIMARY KEY (key, page_idx, line)) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Edge:
    """One edge of the multigraph: entities ``u < v`` (page numbers) joined in a frame of a sentence."""

    page_idx: int
    line: int
    frame: int
    u: int
    v: int


def frame_edges(parsed: ParsedSentence, entities: Sequence[int], positions: Sequence[int | None]) -> list:
    """``(frame, u, v)`` edges of one sentence (pure): clause frames, then whole-sentence edges."""
    frames = parsed.frames or (Frame(0, len(parsed.text), ""),)
    out = set()
    for f_idx, frame in enumerate(frames):
        inside = sorted({e for e, p in zip(entities, positions, strict=True) if frame.covers(p)})
        out.update((f_idx, u, v) for a, u in enumerate(inside) for v in inside[a + 1 :])
    every = sorted(set(entities))
    out.update((SENTENCE_FRAME, u, v) for a, u in enumerate(every) for v in every[a + 1 :])
    return sorted(out)


def write_rows(
    con: sqlite3.Connection,
    index: dict[str, int],
    items: Sequence[tuple[int, int, ParsedSentence, list[Mention]]],
    new: bool,
) -> tuple[int, int]:
    """Write sentences ``(page_idx, line, parsed, mentions)`` into a graph database (``new``: their
    parses, frames and keys too; else their old links are replaced); ``index`` numbers pages.
    Returns ``(mentions, edges)`` written."""
    if new:
        con.executemany(
            "INSERT INTO parses VALUES (?,?,?)",
            [(i, line, json.dumps(p.to_json())) for i, line, p, _ in items],
        )
        con.executemany(
            "INSERT OR IGNORE INTO sentence_keys VALUES (?,?,?)",
            [(k, i, line) for i, line, p, _ in items for k in sentence_keys(p)],
        )
        con.executemany(
            "INSERT INTO frames VALUES (?,?,?,?,?,?)",
            [
                (i, line, n, f.start, f.end, f.predicate)
                for i, line, p, _ in items
                for n, f in enumerate(p.frames or (Frame(0, len(p.text), ""),))
            ],
        )
    else:
        where = [(i, line) for i, line, _, _ in items]
        con.executemany("DELETE FROM mentions WHERE page_idx=? AND line=?", where)
        con.executemany("DELETE FROM edges WHERE page_idx=? AND line=?", where)
    mention_rows, edge_rows = [], []
    for i, line, p, mentions in items:
        ents = [index[m.entity] for m in mentions]
        mention_rows += [
            (i, e, line, -1 if m.start is None else m.start, m.end, _SOURCES[m.source])
            for e, m in zip(ents, mentions, strict=True)
        ]
        edge_rows += [(i, line, f, u, v) for f, u, v in frame_edges(p, ents, [m.start for m in mentions])]
    con.executemany("INSERT OR IGNORE INTO mentions VALUES (?,?,?,?,?,?)", mention_rows)
    con.executemany("INSERT INTO edges VALUES (?,?,?,?,?)", edge_rows)
    return len(mention_rows), len(edge_rows)


class GraphStore:
    """Read and write access to one graph database."""

    def __init__(self, db_path: str | Path, readonly: bool = False, tables: GraphStore | None = None) -> None:
        """Open a graph database.

        Args:
            db_path: the database file (created with the schema unless ``readonly``).
            readonly: a partition worker's view: pages and aliases, while the builder writes nothing.
            tables: a store whose page tables (page ids, their numbers and sizes, the alias table) this
                database holds, as the builder that just wrote it: they are taken over instead of read
                again, so a build's driver never holds two copies (at 5.4M pages they are ~2 GB).

        Raises:
            ValueError: ``tables`` holds another number of pages than the database.
        """
        self.db_path = Path(db_path)
        if readonly:
            self.con = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, check_same_thread=False)
        else:
            self.con = sqlite3.connect(self.db_path, check_same_thread=False)
            self.con.executescript("PRAGMA synchronous=OFF;" + SCHEMA)
        if tables is not None:
            n, last = self.con.execute("SELECT COUNT(*), MAX(page_idx) FROM pages").fetchone()
            if n != len(tables.names) or (n and last != n - 1):
                raise ValueError(
                    f"{self.db_path}: {n} pages, but the tables taken over hold {len(tables.names)}"
                )
            self.names, self.index, self.sizes = tables.names, tables.index, tables.sizes
            self.aliases = tables.aliases
        else:
            rows = self.con.execute(
                "SELECT page_idx, page, n_sentences FROM pages ORDER BY page_idx"
            ).fetchall()
            self.names: list[str] = [r[1] for r in rows]
            self.index: dict[str, int] = {p: i for i, p in enumerate(self.names)}
            self.sizes: list[int] = [r[2] for r in rows]
            self.aliases = AliasTable.from_pages(self.names)
        self._stats: dict[int, tuple[int, int]] | None = None

    # -- reading ----------------------------------------------------------------------------------

    def page_info(self, pages: list[str]) -> dict[str, tuple[str, int]]:
        """Descriptor (the first sentence, de-tokenised) and sentence count of pages."""
        out = {}
        for i in range(0, len(pages), 900):
            chunk = pages[i : i + 900]
            marks = ",".join("?" * len(chunk))
            q = f"SELECT page, first_text, n_sentences FROM pages WHERE page IN ({marks})"
            for page, first, n in self.con.execute(q, chunk):
                out[page] = (detokenize(first), n)
        return out

    def stats(self, entity: int) -> tuple[int, int]:
        """``(mention sentences, pages)`` of an entity (0, 0 when never mentioned)."""
        if self._stats is None:
            self._stats = {
                e: (m, p)
                for e, m, p in self.con.execute("SELECT entity, n_mentions, n_pages FROM entity_stats")
            }
        return self._stats.get(entity, (0, 0))

    def n_sentences(self) -> int:
        return self.con.execute("SELECT COUNT(*) FROM parses").fetchone()[0]

    def incident_edges(self, entity: int, sentence_frames: bool) -> list[Edge]:
        """Edges touching ``entity``, read from the partitions the inverted index names."""
        cond = "e.frame = -1" if sentence_frames else "e.frame >= 0"
        q = (
            "SELECT e.page_idx, e.line, e.frame, e.u, e.v FROM entity_pages ep JOIN edges e "
            f"ON e.page_idx = ep.page_idx WHERE ep.entity = ? AND (e.u = ? OR e.v = ?) AND {cond}"
        )
        return [Edge(*r) for r in self.con.execute(q, (entity, entity, entity))]

    def mention_sentences(self, entity: int) -> list[tuple[int, int]]:
        """``(page_idx, line)`` of every sentence mentioning ``entity``."""
        q = (
            "SELECT DISTINCT m.page_idx, m.line FROM entity_pages ep JOIN mentions m "
            "ON m.page_idx = ep.page_idx AND m.entity = ep.entity WHERE ep.entity = ?"
        )
        return self.con.execute(q, (entity,)).fetchall()

    def frame(self, page_idx: int, line: int, frame: int) -> Frame | None:
        """A stored clause frame (None for the whole-sentence frame number -1)."""
        r = self.con.execute(
            'SELECT start, "end", predicate FROM frames WHERE page_idx=? AND line=? AND frame=?',
            (page_idx, line, frame),
        ).fetchone()
        return Frame(*r) if r else None

    def parsed(self, page_idx: int, line: int) -> ParsedSentence | None:
        r = self.con.execute(
            "SELECT data FROM parses WHERE page_idx=? AND line=?", (page_idx, line)
        ).fetchone()
        return ParsedSentence.from_json(json.loads(r[0])) if r else None

    def edge_set(self) -> set[tuple[str, int, int, str, str]]:
        """All edges by page names ``(page, line, frame, u, v)`` with ``u < v`` by name (for comparisons)."""
        n = self.names
        return {
            (n[p], line, f, *sorted((n[u], n[v])))
            for p, line, f, u, v in self.con.execute("SELECT page_idx, line, frame, u, v FROM edges")
        }

    def mention_set(self) -> set[tuple[str, int, str, int]]:
        """All mentions by page names ``(page, line, entity, start)``."""
        n = self.names
        q = "SELECT page_idx, line, entity, start FROM mentions"
        return {(n[p], line, n[e], s) for p, line, e, s in self.con.execute(q)}

    def close(self) -> None:
        self.con.close()

    # -- writing ----------------------------------------------------------------------------------

    def register(self, pages: Iterable[tuple[str, int, str]], track: bool = True) -> set[str]:
        """Add pages ``(page, n_sentences, first sentence)``, streamed in batches; return the alias
        keys that changed (an empty set unless ``track``: a first build re-links nothing).

        Raises:
            ValueError: a page is already in the graph.
        """
        changed: set[str] = set()
        batch: list[tuple[int, str, int, str]] = []

        def flush() -> None:
            self.con.executemany("INSERT INTO pages VALUES (?,?,?,?)", batch)
            keys = self.aliases.add_pages(p for _, p, _, _ in batch)
            if track:
                changed.update(keys)
            batch.clear()

        for page, n, first in pages:
            if page in self.index:
                raise ValueError(f"page {page!r} is already in the graph")
            self.index[page] = len(self.names)
            batch.append((len(self.names), page, n, first))
            self.names.append(page)
            self.sizes.append(n)
            if len(batch) >= 10_000:
                flush()
        flush()
        return changed

    def remove_pages(self, pages: set[str]) -> set[str]:
        """Remove pages with their sentences; return the alias keys that changed.

        Pages are renumbered to stay dense and in order (as a build without them numbers them).
        Mentions and edges of the removed entities in other pages' sentences are dropped here;
        those sentences hold a changed key, so re-linking them (``GraphBuilder.edit``) completes
        the removal.  The inverted index is stale until ``refresh_index``.

        Raises:
            ValueError: a page is not in the graph.
        """
        missing = sorted(pages - set(self.index))
        if missing:
            raise ValueError(f"page {missing[0]!r} is not in the graph")
        if not pages:
            return set()
        keep = [i for i, p in enumerate(self.names) if p not in pages]
        con = self.con
        con.execute("CREATE TEMP TABLE remap (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
        con.executemany("INSERT INTO temp.remap VALUES (?,?)", [(old, new) for new, old in enumerate(keep)])
        columns = {  # tables keyed by page only: their new rows
            "pages": "r.new, p.page, p.n_sentences, p.first_text",
            "parses": "r.new, p.line, p.data",
            "frames": 'r.new, p.line, p.frame, p.start, p."end", p.predicate',
            "sentence_keys": "p.key, r.new, p.line",
        }
        for table in ("pages", "parses", "frames", "sentence_keys", "mentions", "edges"):
            con.execute(f"ALTER TABLE {table} RENAME TO old_{table}")
        con.executescript(SCHEMA)
        for table, select in columns.items():
            con.execute(
                f"INSERT INTO {table} SELECT {select} FROM old_{table} p "
                "JOIN temp.remap r ON p.page_idx = r.old"
            )
        con.execute(
            'INSERT INTO mentions SELECT r.new, e.new, m.line, m.start, m."end", m.source '
            "FROM old_mentions m JOIN temp.remap r ON m.page_idx = r.old "
            "JOIN temp.remap e ON m.entity = e.old"
        )
        con.execute(
            "INSERT INTO edges SELECT r.new, g.line, g.frame, a.new, b.new FROM old_edges g "
            "JOIN temp.remap r ON g.page_idx = r.old JOIN temp.remap a ON g.u = a.old "
            "JOIN temp.remap b ON g.v = b.old"
        )
        for table in ("pages", "parses", "frames", "sentence_keys", "mentions", "edges"):
            con.execute(f"DROP TABLE old_{table}")
        con.execute("DROP TABLE temp.remap")
        con.execute("DELETE FROM entity_pages")
        con.execute("DELETE FROM entity_stats")
        con.commit()
        self.names = [self.names[i] for i in keep]
        self.sizes = [self.sizes[i] for i in keep]
        self.index = {p: i for i, p in enumerate(self.names)}
        self._stats = None
        return self.aliases.remove_pages(pages)

    def merge(self, part: Path, keys: Path) -> None:
        """Append a partition database (``write_rows`` into an empty graph schema, pages after every
        page already here) and commit.

        Every table but ``sentence_keys`` is keyed by page first, so a partition appends to its
        B-tree's end; ``sentence_keys`` is keyed by alias key, so each partition's rows would land
        all over a tree that grows with the corpus (the driver's merges grew faster than the
        corpus: docs/scale.md).  Those rows go to the staging database ``keys`` instead, unsorted
        and unindexed, for ``merge_keys`` to insert once in key order.
        """
        con = self.con
        con.execute("ATTACH DATABASE ? AS part", (str(part),))
        try:
            for table in ("parses", "frames", "mentions", "edges"):
                con.execute(f"INSERT INTO main.{table} SELECT * FROM part.{table}")
            con.execute("ATTACH DATABASE ? AS staged", (str(keys),))
            try:
                con.execute(  # the partition's columns, without its index
                    "CREATE TABLE IF NOT EXISTS staged.sentence_keys AS "
                    "SELECT * FROM part.sentence_keys WHERE 0"
                )
                con.execute("INSERT INTO staged.sentence_keys SELECT * FROM part.sentence_keys")
                con.commit()
            finally:
                con.execute("DETACH DATABASE staged")
        finally:
            con.execute("DETACH DATABASE part")

    def merge_keys(self, keys: Path) -> None:
        """Insert the ``sentence_keys`` rows staged in ``keys`` by ``merge`` in key order (one
        sorted pass: each page of the index is written once), commit, and delete ``keys``."""
        con = self.con
        if keys.is_file():
            con.execute("ATTACH DATABASE ? AS staged", (str(keys),))
            try:
                con.execute(
                    "INSERT INTO main.sentence_keys SELECT key, page_idx, line FROM staged.sentence_keys "
                    "ORDER BY key, page_idx, line"
                )
                con.commit()
            finally:
                con.execute("DETACH DATABASE staged")
        keys.unlink(missing_ok=True)

    def refresh_index(self) -> None:
        """Rebuild the inverted index entity -> pages and the per-entity statistics."""
        con = self.con
        con.execute("DELETE FROM entity_pages")
        con.execute(
            "INSERT INTO entity_pages SELECT entity, page_idx, COUNT(DISTINCT line) FROM mentions "
            "GROUP BY entity, page_idx"
        )
        con.execute("DELETE FROM entity_stats")
        con.execute(
            "INSERT INTO entity_stats SELECT entity, SUM(n), COUNT(*) FROM entity_pages GROUP BY entity"
        )
        con.commit()
        self._stats = None
