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
import logging
import multiprocessing
import sqlite3
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from garag.text import detokenize, page_to_title
from garag.types import Sentence
from retrievers.graal.aliases import AliasTable
from retrievers.graal.frames import Frame
from retrievers.graal.linker import EntityLinker, Mention, ParsedSentence, SpacyParser, sentence_keys

logger = logging.getLogger(__name__)

SENTENCE_FRAME = -1
_SOURCES = {"text": 0, "link": 1, "page": 2}
_SCHEMA = """
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


# -- parsing in worker processes ------------------------------------------------------------------

_WORKER: SpacyParser | None = None


def _init_worker(model: str, extractor: str, mode: str = "full") -> None:
    global _WORKER
    _WORKER = SpacyParser(model, extractor, mode)


def _parse_chunk(chunk: list[tuple[str, tuple[str, ...]]]) -> list[ParsedSentence]:
    assert _WORKER is not None
    return _WORKER.parse([t for t, _ in chunk], [lk for _, lk in chunk])


class _PoolExecutor:
    """A multiprocessing pool behind the executor interface of ``GraphBuilder(executor=...)``."""

    def __init__(self, pool: Any, in_flight: int) -> None:
        self.pool, self.in_flight = pool, in_flight

    def submit(self, payload: list[tuple[str, tuple[str, ...]]]) -> Any:
        return self.pool.apply_async(_parse_chunk, (payload,))


class GraphStore:
    """Read and write access to one graph database."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        self.con = sqlite3.connect(self.db_path, check_same_thread=False)
        self.con.executescript("PRAGMA synchronous=OFF;" + _SCHEMA)
        rows = self.con.execute("SELECT page_idx, page, n_sentences FROM pages ORDER BY page_idx").fetchall()
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

    def register(self, pages: Iterable[tuple[str, int, str]]) -> set[str]:
        """Add pages ``(page, n_sentences, first sentence)``; return the alias keys that changed.

        Raises:
            ValueError: a page is already in the graph.
        """
        new = []
        for page, n, first in pages:
            if page in self.index:
                raise ValueError(f"page {page!r} is already in the graph")
            self.index[page] = len(self.names)
            new.append((len(self.names), page, n, first))
            self.names.append(page)
            self.sizes.append(n)
        self.con.executemany("INSERT INTO pages VALUES (?,?,?,?)", new)
        return self.aliases.add_pages(p for _, p, _, _ in new)

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
        con.executescript(_SCHEMA)
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

    def write_sentences(
        self, items: Sequence[tuple[int, int, ParsedSentence, list[Mention]]], new: bool
    ) -> tuple[int, int]:
        """Store (or, when not ``new``, replace the links of) sentences ``(page_idx, line, parsed,
        mentions)`` in one statement per table; returns ``(mentions, edges)`` written."""
        con = self.con
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
            ents = [self.index[m.entity] for m in mentions]
            mention_rows += [
                (i, e, line, -1 if m.start is None else m.start, m.end, _SOURCES[m.source])
                for e, m in zip(ents, mentions, strict=True)
            ]
            edge_rows += [(i, line, f, u, v) for f, u, v in frame_edges(p, ents, [m.start for m in mentions])]
        con.executemany("INSERT OR IGNORE INTO mentions VALUES (?,?,?,?,?,?)", mention_rows)
        con.executemany("INSERT INTO edges VALUES (?,?,?,?,?)", edge_rows)
        return len(mention_rows), len(edge_rows)

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


@dataclass
class BuildStats:
    """Counts and timings of a graph build or update."""

    pages: int = 0
    removed: int = 0
    sentences: int = 0
    relinked: int = 0
    mentions: int = 0
    edges: int = 0
    parse_seconds: float = 0.0
    link_seconds: float = 0.0
    write_seconds: float = 0.0

    def to_dict(self) -> dict:
        total = self.parse_seconds + self.link_seconds + self.write_seconds
        return {
            **self.__dict__,
            "sentences_per_second": round(self.sentences / total, 1) if total > 0 else None,
        }


class GraphBuilder:
    """Streams pages into a ``GraphStore``: parse (optionally in worker processes), link, write.

    Args:
        graph: the graph to fill.
        parser: spaCy parser (its model and frame extractor are used by the workers too).
        linker_options: keyword arguments for ``EntityLinker`` besides the alias table and page info.
        workers: parsing processes (1 = in this process).
        chunk_size: sentences per parsing task.
        progress: log progress every few thousand sentences.
        executor: parses chunks elsewhere (e.g. ``RayParseExecutor``): ``submit(payload)`` returns a
            result whose ``get()`` gives the parsed chunk; ``in_flight`` bounds the chunks
            submitted ahead.  Linking and writes stay here, in chunk order, so the graph is the same.
    """

    def __init__(
        self,
        graph: GraphStore,
        parser: SpacyParser,
        linker_options: dict,
        workers: int = 1,
        chunk_size: int = 256,
        progress: bool = False,
        executor: object = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.graph = graph
        self.parser = parser
        self.linker = EntityLinker(graph.aliases, graph.page_info, **linker_options)
        self.workers = workers
        self.chunk_size = chunk_size
        self.progress = progress
        self.executor = executor
        self.stats = BuildStats()

    def add_pages(self, pages: Iterable[tuple[str, list[Sentence]]]) -> BuildStats:
        """Add pages to the graph (the first call builds it); existing sentences are re-linked as needed."""
        pages = list(pages)
        return self.add_streaming(
            [(p, len(s), s[0].text if s else "") for p, s in pages], lambda: iter(pages)
        )

    def add_streaming(self, meta: list[tuple[str, int, str]], stream) -> BuildStats:  # noqa: ANN001
        """Register ``meta`` (page, n_sentences, first sentence), re-link, then ingest ``stream()``."""
        return self.edit(set(), meta, stream)

    def edit(self, drop: set[str], meta: list[tuple[str, int, str]], stream) -> BuildStats:  # noqa: ANN001
        """Remove pages ``drop``, register ``meta`` (page, n_sentences, first sentence), re-link the
        sentences whose alias lookups changed (once), then ingest ``stream()``: the same graph as
        a build over the kept pages followed by the new ones."""
        had_sentences = self.graph.n_sentences() > 0
        started = time.perf_counter()
        changed = self.graph.remove_pages(drop)
        self.stats.write_seconds += time.perf_counter() - started
        self.stats.removed += len(drop)
        changed |= self.graph.register(meta)
        self.stats.pages += len(meta)
        if had_sentences and changed:
            self._relink(changed)
        self._ingest(stream())
        started = time.perf_counter()
        self.graph.refresh_index()
        self.stats.write_seconds += time.perf_counter() - started
        return self.stats

    def _relink(self, keys: set[str]) -> None:
        keys_l = sorted(keys)
        affected: set[tuple[int, int]] = set()
        for i in range(0, len(keys_l), 900):
            chunk = keys_l[i : i + 900]
            q = f"SELECT page_idx, line FROM sentence_keys WHERE key IN ({','.join('?' * len(chunk))})"
            affected.update(self.graph.con.execute(q, chunk).fetchall())
        items = [(p, line, self.graph.parsed(p, line)) for p, line in sorted(affected)]
        self._link_and_write([(p, line, ps) for p, line, ps in items if ps is not None], new=False)
        self.stats.relinked += len(items)

    def _chunks(self, pages: Iterator[tuple[str, list[Sentence]]]) -> Iterator[list[tuple[int, Sentence]]]:
        buf: list[tuple[int, Sentence]] = []
        for page, sentences in pages:
            idx = self.graph.index[page]
            buf.extend((idx, s) for s in sentences)
            if len(buf) >= self.chunk_size:
                yield buf
                buf = []
        if buf:
            yield buf

    def _ingest(self, pages: Iterator[tuple[str, list[Sentence]]]) -> None:
        chunks = self._chunks(pages)
        if self.executor is not None:
            self._parse_elsewhere(chunks, self.executor)
            return
        if self.workers == 1:
            for chunk in chunks:
                started = time.perf_counter()
                parsed = self.parser.parse([s.text for _, s in chunk], [s.links for _, s in chunk])
                self.stats.parse_seconds += time.perf_counter() - started
                self._write_chunk(chunk, parsed)
            return
        ctx = multiprocessing.get_context("spawn")
        init = (self.parser.model, self.parser.extractor.name, self.parser.mode)
        with ctx.Pool(self.workers, initializer=_init_worker, initargs=init) as pool:
            self._parse_elsewhere(chunks, _PoolExecutor(pool, 2 * self.workers))

    def _parse_elsewhere(self, chunks: Iterator[list[tuple[int, Sentence]]], executor: Any) -> None:
        """Submit chunks to ``executor`` at most ``executor.in_flight`` ahead; link and write them in
        order as their parses come back."""
        ahead: deque[tuple[list, object]] = deque()
        for chunk in chunks:
            ahead.append((chunk, executor.submit([(s.text, s.links) for _, s in chunk])))
            if len(ahead) >= executor.in_flight:
                self._drain(ahead.popleft())
        while ahead:
            self._drain(ahead.popleft())

    def _drain(self, item: tuple[list, object]) -> None:
        chunk, result = item
        started = time.perf_counter()
        parsed = result.get()  # type: ignore[attr-defined]
        self.stats.parse_seconds += time.perf_counter() - started
        self._write_chunk(chunk, parsed)

    def _write_chunk(self, chunk: list[tuple[int, Sentence]], parsed: list[ParsedSentence]) -> None:
        self._link_and_write([(i, s.id.line, p) for (i, s), p in zip(chunk, parsed, strict=True)], new=True)
        self.stats.sentences += len(chunk)
        if self.progress and self.stats.sentences % 5000 < len(chunk):
            logger.info("graal graph: %d sentences", self.stats.sentences)

    def _link_and_write(self, items: list[tuple[int, int, ParsedSentence]], new: bool) -> None:
        names = self.graph.names
        started = time.perf_counter()
        mentions = self.linker.link(
            [p for _, _, p in items],
            [f"{page_to_title(names[i])}: {p.text}" for i, _, p in items],
            [names[i] for i, _, _ in items],
        )
        self.stats.link_seconds += time.perf_counter() - started
        started = time.perf_counter()
        rows = [(i, line, p, ms) for (i, line, p), ms in zip(items, mentions, strict=True)]
        n_mentions, n_edges = self.graph.write_sentences(rows, new)
        self.stats.mentions += n_mentions
        self.stats.edges += n_edges
        self.graph.con.commit()
        self.stats.write_seconds += time.perf_counter() - started
