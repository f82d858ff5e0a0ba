"""Building the corpus graph: parse, link and write sentences, in parallel over page partitions.

A build streams pages into a ``GraphStore``.  In one process it parses, links and writes chunk
by chunk.  With workers (``graal.workers`` processes, or Ray actors with ``garag index --engine
ray``) the work splits by the disambiguation encoder:

* hashed words (``graal.disambiguation: words``, the shipped configs) or none: linking needs only
  the alias table and the pages' first sentences.  The driver registers every page, copies the
  page table into a file the workers read, and sends **partitions** (consecutive pages, about
  ``partition_sentences`` sentences each); a worker parses, links and writes its partition into a
  SQLite file of its own, and the driver appends the files to the graph in page order (one SQL
  copy per table) as they come back.  Linking is per sentence (nothing carries from one sentence
  to the next), so the graph is the single-process one.
* MiniLM (an encoder and its embedding cache, which stay in the driver): workers parse chunks and
  the driver links and writes them in order.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import shutil
import sqlite3
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from garag.text import page_to_title
from garag.types import Sentence
from retrievers.graal.graph_store import SCHEMA, GraphStore, write_rows
from retrievers.graal.linker import EntityLinker, ParsedSentence, SpacyParser, word_vectors

logger = logging.getLogger(__name__)

PARTITION_SENTENCES = 20_000
_STAGED_KEYS_DB = "sentence-keys.db"  # the partitions' alias keys, inserted in key order at the end
_SUMMED = ("sentences", "mentions", "edges", "parse_seconds", "link_seconds", "write_seconds")


@dataclass
class BuildStats:
    """Counts and timings of a graph build or update (a parallel build sums its workers' seconds)."""

    pages: int = 0
    removed: int = 0
    sentences: int = 0
    relinked: int = 0
    mentions: int = 0
    edges: int = 0
    parse_seconds: float = 0.0
    link_seconds: float = 0.0
    write_seconds: float = 0.0
    merge_seconds: float = 0.0

    def to_dict(self) -> dict:
        total = self.parse_seconds + self.link_seconds + self.write_seconds + self.merge_seconds
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "sentences_per_second": round(self.sentences / total, 1) if total > 0 else None,
        }

    def add(self, part: dict) -> None:
        """Add a partition's counts and seconds."""
        for key in _SUMMED:
            setattr(self, key, getattr(self, key) + part[key])


def link_and_write(
    linker: EntityLinker,
    graph: GraphStore,
    con: sqlite3.Connection,
    items: Sequence[tuple[int, int, ParsedSentence]],
    new: bool,
    stats: BuildStats,
) -> None:
    """Link parsed sentences ``(page_idx, line, parsed)`` of ``graph``'s pages and write them to
    ``con`` (the graph's own database, or a partition's), then commit."""
    names = graph.names
    started = time.perf_counter()
    mentions = linker.link(
        [p for _, _, p in items],
        [f"{page_to_title(names[i])}: {p.text}" for i, _, p in items],
        [names[i] for i, _, _ in items],
    )
    stats.link_seconds += time.perf_counter() - started
    started = time.perf_counter()
    rows = [(i, line, p, ms) for (i, line, p), ms in zip(items, mentions, strict=True)]
    n_mentions, n_edges = write_rows(con, graph.index, rows, new)
    con.commit()
    stats.mentions += n_mentions
    stats.edges += n_edges
    stats.write_seconds += time.perf_counter() - started


# -- workers ----------------------------------------------------------------------------------------


class ChunkParser:
    """A worker that parses chunks ``[(text, links), ...]`` (``SpacyParser`` arguments)."""

    def __init__(self, model: str, extractor: str, mode: str) -> None:
        self.parser = SpacyParser(model, extractor, mode)

    def parse(self, payload: list[tuple[str, Sequence[str]]]) -> list[ParsedSentence]:
        return self.parser.parse([t for t, _ in payload], [lk for _, lk in payload])


class PartitionWorker(ChunkParser):
    """Builds page partitions: parse, link, write into a SQLite file per partition.

    Args:
        pages_db: a graph database holding (at least) the page table of the whole corpus.
        parser: ``SpacyParser`` arguments ``(model, extractor, mode)``.
        linker_options: ``EntityLinker`` keyword arguments (the encoder must be picklable).
    """

    def __init__(self, pages_db: str, parser: tuple[str, str, str], linker_options: dict) -> None:
        super().__init__(*parser)
        self.graph = GraphStore(pages_db, readonly=True)
        self.linker = EntityLinker(self.graph.aliases, self.graph.page_info, **linker_options)

    def build(self, out: str, sentences: list[tuple[int, int, str, Sequence[str]]], chunk_size: int) -> dict:
        """Write the partition ``sentences`` ``(page_idx, line, text, links)`` to the file ``out``
        (atomically); return its counts and seconds."""
        target = Path(out)
        # a name of its own: a task run twice (a lost worker's, sent again) never shares a file
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        con = sqlite3.connect(tmp)
        stats = BuildStats()
        try:
            con.executescript("PRAGMA synchronous=OFF; PRAGMA journal_mode=OFF;" + SCHEMA)
            for k in range(0, len(sentences), chunk_size):
                chunk = sentences[k : k + chunk_size]
                started = time.perf_counter()
                parsed = self.parse([(text, links) for _, _, text, links in chunk])
                stats.parse_seconds += time.perf_counter() - started
                items = [(i, line, p) for (i, line, _, _), p in zip(chunk, parsed, strict=True)]
                link_and_write(self.linker, self.graph, con, items, True, stats)
                stats.sentences += len(chunk)
        except BaseException:
            con.close()
            tmp.unlink(missing_ok=True)
            raise
        con.close()
        os.replace(tmp, target)
        return stats.to_dict()


_WORKER: Any = None


def _init_worker(kind: str, *args: Any) -> None:
    global _WORKER
    _WORKER = ChunkParser(*args) if kind == "parse" else PartitionWorker(*args)


def _parse_chunk(payload: list[tuple[str, Sequence[str]]]) -> list[ParsedSentence]:
    return _WORKER.parse(payload)


def _build_partition(out: str, sentences: list, chunk_size: int) -> dict:
    return _WORKER.build(out, sentences, chunk_size)


class _ProcessPool:
    """Spawned worker processes behind the pool interface ``GraphBuilder`` uses: ``parse(payload)``
    and ``build(out, sentences, chunk_size)`` return results whose ``get()`` waits; ``in_flight``
    bounds the tasks submitted ahead."""

    def __init__(self, workers: int, kind: str, args: tuple) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pool = ctx.Pool(workers, initializer=_init_worker, initargs=(kind, *args))
        self.in_flight = 2 * workers

    def parse(self, payload: list) -> Any:
        return self.pool.apply_async(_parse_chunk, (payload,))

    def build(self, out: str, sentences: list, chunk_size: int) -> Any:
        return self.pool.apply_async(_build_partition, (out, sentences, chunk_size))

    def __enter__(self) -> _ProcessPool:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.pool.close()
        else:
            self.pool.terminate()
        self.pool.join()


class LocalEngine:
    """``workers`` processes on this machine (``graal.workers``)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def parsers(self, model: str, extractor: str, mode: str) -> _ProcessPool:
        return _ProcessPool(self.workers, "parse", (model, extractor, mode))

    def partitions(self, pages_db: str, parser: tuple, linker_options: dict) -> _ProcessPool:
        return _ProcessPool(self.workers, "partition", (pages_db, parser, linker_options))


# -- the builder --------------------------------------------------------------------------------------


class GraphBuilder:
    """Streams pages into a ``GraphStore`` (see the module docstring).

    Args:
        graph: the graph to fill.
        parser: spaCy parser (its model and frame extractor are used by the workers too).
        linker_options: keyword arguments for ``EntityLinker`` besides the alias table and page info.
        workers: processes (1 = everything in this process); ignored when ``engine`` is given.
        chunk_size: sentences parsed and linked together.
        progress: log progress every few thousand sentences.
        engine: where workers run (e.g. ``RayEngine``): ``parsers(model, extractor, mode)`` and
            ``partitions(pages_db, parser, linker_options)`` give pools like ``LocalEngine``'s.
        partition_sentences: sentences per partition task.
    """

    def __init__(
        self,
        graph: GraphStore,
        parser: SpacyParser,
        linker_options: dict,
        workers: int = 1,
        chunk_size: int = 256,
        progress: bool = False,
        engine: Any = None,
        partition_sentences: int = PARTITION_SENTENCES,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.graph = graph
        self.parser = parser
        self.linker_options = linker_options
        self.linker = EntityLinker(graph.aliases, graph.page_info, **linker_options)
        self.chunk_size = chunk_size
        self.progress = progress
        self.engine = engine if engine is not None else LocalEngine(workers) if workers > 1 else None
        self.partition_sentences = partition_sentences
        embed = linker_options.get("embed")
        self.partitioned = embed is None or embed is word_vectors  # see the module docstring
        self.stats = BuildStats()

    def add_pages(self, pages: Iterable[tuple[str, list[Sentence]]]) -> BuildStats:
        """Add pages to the graph (the first call builds it); existing sentences are re-linked as needed."""
        pages = list(pages)
        return self.add_streaming(
            [(p, len(s), s[0].text if s else "") for p, s in pages], lambda: iter(pages)
        )

    def add_streaming(self, meta: Iterable[tuple[str, int, str]], stream) -> BuildStats:  # noqa: ANN001
        """Register ``meta`` (page, n_sentences, first sentence), re-link, then ingest ``stream()``."""
        return self.edit(set(), meta, stream)

    def edit(self, drop: set[str], meta: Iterable[tuple[str, int, str]], stream) -> BuildStats:  # noqa: ANN001
        """Remove pages ``drop``, register ``meta`` (page, n_sentences, first sentence), re-link the
        sentences whose alias lookups changed (once), then ingest ``stream()``: the same graph as
        a build over the kept pages followed by the new ones."""
        had_sentences = self.graph.n_sentences() > 0
        started = time.perf_counter()
        changed = self.graph.remove_pages(drop)
        self.stats.write_seconds += time.perf_counter() - started
        self.stats.removed += len(drop)
        before = len(self.graph.names)
        changed |= self.graph.register(meta, track=had_sentences)
        self.graph.con.commit()
        self.stats.pages += len(self.graph.names) - before
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

    def _sentences(self, pages: Iterator[tuple[str, list[Sentence]]], size: int) -> Iterator[list]:
        """``(page_idx, sentence)`` lists of at least ``size`` sentences (whole pages)."""
        buf: list[tuple[int, Sentence]] = []
        for page, sentences in pages:
            idx = self.graph.index[page]
            buf.extend((idx, s) for s in sentences)
            if len(buf) >= size:
                yield buf
                buf = []
        if buf:
            yield buf

    def _ingest(self, pages: Iterator[tuple[str, list[Sentence]]]) -> None:
        if self.engine is None:
            for chunk in self._sentences(pages, self.chunk_size):
                started = time.perf_counter()
                parsed = self.parser.parse([s.text for _, s in chunk], [s.links for _, s in chunk])
                self.stats.parse_seconds += time.perf_counter() - started
                self._write_chunk(chunk, parsed)
        elif self.partitioned:
            self._build_partitions(pages)
        else:
            p = self.parser
            with self.engine.parsers(p.model, p.extractor.name, p.mode) as pool:
                self._parse_elsewhere(self._sentences(pages, self.chunk_size), pool)

    def _build_partitions(self, pages: Iterator[tuple[str, list[Sentence]]]) -> None:
        """Workers build partitions into files beside the graph; they are merged in page order."""
        parts = self._sentences(pages, self.partition_sentences)
        first = next(parts, None)
        if first is None:  # nothing to add (an edit that only removes pages): no workers started
            return
        folder = self.graph.db_path.with_name(self.graph.db_path.name + ".parts")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        pages_db = folder / "pages.db"
        pages_con = sqlite3.connect(pages_db)
        pages_con.executescript(SCHEMA)
        pages_con.execute("ATTACH DATABASE ? AS g", (str(self.graph.db_path),))
        pages_con.execute("INSERT INTO main.pages SELECT * FROM g.pages")
        pages_con.commit()
        pages_con.close()
        p = self.parser
        ahead: deque[tuple[Path, Any]] = deque()
        with self.engine.partitions(
            str(pages_db), (p.model, p.extractor.name, p.mode), self.linker_options
        ) as pool:
            for n, part in enumerate(itertools.chain([first], parts)):
                out = folder / f"part-{n:06d}.db"
                rows = [(i, s.id.line, s.text, s.links) for i, s in part]
                ahead.append((out, pool.build(str(out), rows, self.chunk_size)))
                if len(ahead) >= pool.in_flight:
                    self._merge(*ahead.popleft())
            while ahead:
                self._merge(*ahead.popleft())
        started = time.perf_counter()
        self.graph.merge_keys(folder / _STAGED_KEYS_DB)
        self.stats.merge_seconds += time.perf_counter() - started
        shutil.rmtree(folder)

    def _merge(self, out: Path, result: Any) -> None:
        part = result.get()
        started = time.perf_counter()
        self.graph.merge(out, out.with_name(_STAGED_KEYS_DB))
        out.unlink()
        self.stats.merge_seconds += time.perf_counter() - started
        self.stats.add(part)
        if self.progress:
            logger.info("graal graph: %d sentences", self.stats.sentences)

    def _parse_elsewhere(self, chunks: Iterator[list[tuple[int, Sentence]]], pool: Any) -> None:
        """Submit chunks to ``pool`` at most ``pool.in_flight`` ahead; link and write them in order
        as their parses come back."""
        ahead: deque[tuple[list, object]] = deque()
        for chunk in chunks:
            ahead.append((chunk, pool.parse([(s.text, s.links) for _, s in chunk])))
            if len(ahead) >= pool.in_flight:
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
        link_and_write(self.linker, self.graph, self.graph.con, items, new, self.stats)
