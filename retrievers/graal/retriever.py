"""GRAAL graph retrieval: claim entities, paths between them, ranked sentences with their paths.

Algorithm 2 of GRAAL (Mongiovi & Gangemi 2024): link the claim's entities
(V1); find the between vertices (V2) on paths of bounded length (default 2)
between two distinct claim entities; take the sentences of the frames of the
edges on those paths plus all sentences of the claim entities' pages.  The
papers' baselines are modes: Entity (pages of V1), Mention (sentences
mentioning V1), Entity+Mention.  GRAAL returns a set; garag ranks it so it
can be fused: ``dense_weight * cos(claim, sentence) + connect_weight * (claim
entities connected - 1) + bridge_weight * [on a path through V2] +
idf_weight * IDF of the edge's rarest entity``; the sentences' vectors are
the dense index's, computed at index time (retrievers/graal/vectors.py), or
else encoded through the embedding cache.  Every hit keeps the paths that
brought it (``retrieve_with_paths``, ``subgraph``).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from garag.artifacts import build_artifact, read_meta
from garag.config import DenseConfig, GraalConfig
from garag.lru import LRU
from garag.types import Hit, Sentence, SentenceId
from retrievers.base import IndexContext
from retrievers.dense import sentence_text
from retrievers.embeddings import EmbeddingCache, SentenceEncoder
from retrievers.graal.builder import GraphBuilder
from retrievers.graal.graph_store import SENTENCE_FRAME, GraphStore
from retrievers.graal.linker import EntityLinker, Mention, SpacyParser, word_vectors
from retrievers.graal.paths import Subgraph, connect, load_neighbourhood
from retrievers.graal.vectors import IndexVectors, find_index_vectors

logger = logging.getLogger(__name__)

_FORMAT = 1
# the tagger-only parse's own version (spans and frames); a change rebuilds those graphs only
TAGGER_FORMAT = 2
GRAPH_DB = "graph.db"
RECENT_RESULTS = 256  # claims whose results (with provenance) a retriever keeps
# graphs whose sentence_keys name hyperlinked page ids too (aliases.page_key): only those can be
# edited in place and equal a rebuild; older graphs stay valid for search
RELINK_KEYS = 2


@dataclass(frozen=True)
class PathEdge:
    """An edge that brought a sentence: entities ``u``-``v`` co-mentioned in a frame of ``sentence``."""

    u: str
    v: str
    sentence: SentenceId
    frame: int


@dataclass(frozen=True)
class Provenance:
    """Why a sentence was retrieved.

    Attributes:
        reason: "path" (an edge on a path between claim entities), "page" (a claim entity's
            page), "mention" (mentions a claim entity) or "neighbour" (page of a neighbour).
        entities: the claim entities it connects (and the between vertices on the path).
        edges: the edges of this sentence on such paths.
    """

    reason: str
    entities: tuple[str, ...]
    edges: tuple[PathEdge, ...] = ()


@dataclass(frozen=True)
class GraalHit:
    """A ranked hit with its provenance."""

    hit: Hit
    provenance: tuple[Provenance, ...]


@dataclass
class GraalResult:
    """Everything one claim's graph retrieval produced."""

    query: str
    mentions: tuple[Mention, ...]
    subgraph: Subgraph | None
    hits: list[GraalHit]
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class _Cand:
    seeds: set[int] = field(default_factory=set)
    bridge: bool = False
    idf: float = 0.0
    prov: list[Provenance] = field(default_factory=list)


class GraalRetriever:
    """Graph retrieval over the corpus graph (see module docstring).

    Args:
        config: GRAAL settings.
        dense_config: encoder used for disambiguation and ranking (shares the dense embedding cache).
        ctx: store, cache root, fingerprint.
        name: retriever name on the hits.
    """

    def __init__(
        self, config: GraalConfig, dense_config: DenseConfig, ctx: IndexContext, name: str = "graal"
    ):
        self.config = config
        self.dense_config = dense_config
        self.ctx = ctx
        self.name = name
        self.encoder = SentenceEncoder(dense_config.model, dense_config.device, dense_config.batch_size)
        self.cache = EmbeddingCache(self.encoder, ctx.cache_dir)
        self.parser = SpacyParser(config.spacy_model, config.frame_extractor, config.parse)
        self.graph: GraphStore | None = None
        self.linker: EntityLinker | None = None
        self.path: Path | None = None
        # The last claims' results, with their provenance: the service shows the paths of a claim
        # that retrieval has just searched, without searching it again.
        self._recent: LRU[str, GraalResult] = LRU(RECENT_RESULTS)
        self._recent_config = config
        # the candidates' vectors computed at index time (index_vectors), looked for once per opened graph
        self._vectors: IndexVectors | None = None
        self._vectors_looked = False

    def settings(self) -> dict:
        c = self.config
        return {
            "format": _FORMAT,
            "spacy_model": c.spacy_model,
            "frame_extractor": c.frame_extractor,
            "own_page_mentions": c.own_page_mentions,
            "use_links": c.use_links,
            "prior_weight": c.prior_weight,
            "exact_bonus": c.exact_bonus,
            "encoder": self.encoder.identity,
            "title_prefix": self.dense_config.title_prefix,
            # later keys: in the hash only when not at their first default (built graphs keep theirs)
            **({"parse": f"{c.parse}/{TAGGER_FORMAT}"} if c.parse != "full" else {}),
            **({"disambiguation": c.disambiguation} if c.disambiguation != "minilm" else {}),
        }

    def linker_options(self) -> dict:
        c = self.config
        return {
            "embed": word_vectors if c.disambiguation == "words" else self.cache.encode_cached,
            "prior_weight": c.prior_weight,
            "exact_bonus": c.exact_bonus,
            "own_page": c.own_page_mentions,
            "use_links": c.use_links,
        }

    def build(self, force: bool = False) -> Path:
        """Build (or reuse) the corpus graph artifact and open it.

        For an edited corpus (``ctx.parent``) whose parent graph is built, the graph is derived from
        it: the parent's graph is copied, dropped pages removed, new pages parsed and added, and
        only the sentences whose alias lookups changed re-linked.
        """
        store = self.ctx.store
        parent = None if force else self._parent_artifact()
        built: list[GraphStore] = []  # the builder's store, whose page tables the opened graph takes over

        def build(tmp: Path) -> dict:
            graph_db = tmp / GRAPH_DB
            first, drop = 0, set()
            if parent is not None:
                assert self.ctx.delta is not None
                shutil.copyfile(parent / GRAPH_DB, graph_db)
                first, drop = self.ctx.delta.kept_pages, set(self.ctx.delta.dropped)
            graph = GraphStore(graph_db)
            builder = GraphBuilder(
                graph,
                self.parser,
                self.linker_options(),
                self.config.workers,
                progress=self.ctx.progress,
                engine=self.ctx.engine,
            )
            # streamed from the store in page order (its page index is not loaded: memory at scale)
            stats = builder.edit(drop, store.iter_page_meta(first), lambda: store.iter_pages(first))
            graph.close()
            built.append(graph)
            logger.info("graal graph: %s", stats.to_dict())
            derived = {"derived_from": parent.name} if parent is not None else {}
            return {"graph": stats.to_dict(), "relink_keys": RELINK_KEYS, **derived}

        self.path = build_artifact(
            self.ctx.cache_dir, "graal", self.settings(), self.ctx.fingerprint, build, force
        )
        self.open(self.path / GRAPH_DB, built[0] if built else None)
        return self.path

    def _parent_artifact(self) -> Path | None:
        """The parent corpus's graph (``ctx.parent``) when it is built with the keys that re-linking
        needs; None otherwise (a full build)."""
        path = self.ctx.parent_artifact("graal", self.settings())
        return path if path is not None and read_meta(path).get("relink_keys") == RELINK_KEYS else None

    def open(self, db_path: Path, tables: GraphStore | None = None) -> None:
        """Open an already built graph database (``build`` does this, taking over the page
        ``tables`` of the store that built it)."""
        self.graph = GraphStore(db_path, tables=tables)
        self._recent.clear()
        self._vectors, self._vectors_looked = None, False
        self.linker = EntityLinker(self.graph.aliases, self.graph.page_info, **self.linker_options())
        self._n_sentences = max(self.graph.n_sentences(), 2)

    def _require(self) -> tuple[GraphStore, EntityLinker]:
        if self.graph is None or self.linker is None:
            raise RuntimeError(f"retriever {self.name!r}: call build() before retrieving")
        return self.graph, self.linker

    # -- linking ----------------------------------------------------------------------------------

    def link_claims(self, claims: list[str]) -> list[list[Mention]]:
        """The entities each claim mentions (V1), with their surface spans."""
        _, linker = self._require()
        parsed = self.parser.parse(claims)
        return linker.link(parsed, claims, [None] * len(claims))

    # -- retrieval --------------------------------------------------------------------------------

    def _idf(self, entity: int) -> float:
        n = self._n_sentences
        return math.log(n / (1 + self.graph.stats(entity)[0])) / math.log(n)  # type: ignore[union-attr]

    def _is_hub(self, entity: int) -> bool:
        return self.graph.stats(entity)[0] > self.config.hub_max_mentions  # type: ignore[union-attr]

    def _candidates(self, seeds: list[int]) -> tuple[dict[SentenceId, _Cand], Subgraph | None]:
        graph, c = self.graph, self.config
        assert graph is not None
        names = graph.names
        cands: dict[SentenceId, _Cand] = {}
        sub = None
        if c.mode == "graal":
            sentence_frames = c.frames == "sentence"
            cap = c.hub_policy == "cap"
            hubs = {s for s in seeds if cap and self._is_hub(s)}
            edges = load_neighbourhood(
                seeds,
                lambda v: graph.incident_edges(v, sentence_frames),
                c.max_path_length,
                lambda v: not (cap and self._is_hub(v)),
            )
            blocked = {x for e in edges for x in (e.u, e.v) if cap and self._is_hub(x)}
            sub = connect(seeds, edges, c.max_path_length, blocked)
            sub = Subgraph(sub.seeds, sub.between, sub.edges, frozenset(sub.hubs | hubs))
            if sub.hubs:  # per claim, so debug: a run over thousands of claims would print it each time
                logger.debug(
                    "graal: hub entities not expanded: %s", ", ".join(sorted(names[h] for h in sub.hubs))
                )
            for e, pair in sub.edges:
                sid = SentenceId(names[e.page_idx], e.line)
                cand = cands.setdefault(sid, _Cand())
                cand.seeds |= pair
                cand.bridge |= e.u in sub.between or e.v in sub.between
                cand.idf = max(cand.idf, min(self._idf(e.u), self._idf(e.v)))
                pe = PathEdge(names[e.u], names[e.v], sid, e.frame)
                ents = tuple(sorted(names[x] for x in pair | ({e.u, e.v} & sub.between)))
                cand.prov.append(Provenance("path", ents, (pe,)))
            if c.neighbour_pages:
                self._add_neighbours(cands, seeds, edges, blocked)
        if c.mode in ("graal", "entity", "entity+mention"):
            for page, sentences in self.ctx.store.pages([names[s] for s in seeds]).items():
                seed = graph.index[page]
                for s in sentences:
                    cand = cands.setdefault(s.id, _Cand())
                    cand.seeds.add(seed)
                    cand.idf = max(cand.idf, self._idf(seed))
                    cand.prov.append(Provenance("page", (page,)))
        if c.mode in ("mention", "entity+mention"):
            for seed in seeds:
                for p, line in graph.mention_sentences(seed):
                    sid = SentenceId(names[p], line)
                    cand = cands.setdefault(sid, _Cand())
                    cand.seeds.add(seed)
                    cand.idf = max(cand.idf, self._idf(seed))
                    cand.prov.append(Provenance("mention", (names[seed],)))
        return cands, sub

    def _add_neighbours(
        self, cands: dict[SentenceId, _Cand], seeds: list[int], edges: list, blocked: set
    ) -> None:
        """Sentences of the pages of the claim entities' best neighbours (``neighbour_pages``)."""
        graph = self.graph
        assert graph is not None
        names, seed_set = graph.names, set(seeds)
        adjacent: dict[int, set[int]] = {}
        for e in edges:
            for a, b in ((e.u, e.v), (e.v, e.u)):
                if a in seed_set and b not in seed_set and b not in blocked:
                    adjacent.setdefault(b, set()).add(a)
        best = sorted(adjacent, key=lambda x: (-len(adjacent[x]), -self._idf(x), x))[
            : self.config.neighbour_pages
        ]
        by_page = self.ctx.store.pages([names[x] for x in best])
        for x in best:
            for s in by_page.get(names[x], []):
                cand = cands.setdefault(s.id, _Cand())
                cand.seeds |= adjacent[x]
                cand.idf = max(cand.idf, self._idf(x))
                cand.prov.append(Provenance("neighbour", tuple(sorted(names[a] for a in adjacent[x] | {x}))))

    def index_vectors(self) -> IndexVectors | None:
        """The candidates' vectors from index time (``vectors.find_index_vectors``), or None: they are
        encoded.  Looked for at the first call after ``build``/``open``, when a pipeline has built
        its dense index whatever the retrievers' order."""
        if not self._vectors_looked:
            self._vectors = find_index_vectors(self.dense_config, self.ctx, self.cache, len(self.ctx.store))
            self._vectors_looked = True
        return self._vectors

    def use_vectors(self, vectors: IndexVectors | None) -> None:
        """Re-rank with these vectors by store row (None: encode the candidates) instead of those
        :meth:`index_vectors` finds (benchmarks); other vectors than the encoder's change the ranking."""
        if vectors is not None and len(vectors) != len(self.ctx.store):
            raise ValueError(
                f"{vectors.source}: {len(vectors)} vectors for a store of {len(self.ctx.store)} sentences"
            )
        self._vectors, self._vectors_looked = vectors, True
        self._recent.clear()

    def _texts(self, sids: list[SentenceId]) -> dict[SentenceId, Sentence]:
        by_page = self.ctx.store.pages(sorted({s.page for s in sids}))
        want = set(sids)
        return {s.id: s for sents in by_page.values() for s in sents if s.id in want}

    def _rank(self, query: str, cands: dict[SentenceId, _Cand]) -> list[GraalHit]:
        c = self.config
        sids = sorted(cands)
        if c.max_candidates and len(sids) > c.max_candidates:
            sids = sorted(sids, key=lambda s: (-len(cands[s].seeds), -cands[s].bridge, s))[: c.max_candidates]
        rows = self.ctx.store.rows_of_ids(sids)
        sids = [s for s in sids if s in rows]
        if not sids:
            return []
        sims = self._cosines(query, sids, rows) if c.dense_weight > 0 else np.zeros(len(sids), np.float32)
        scored = []
        for sid, sim in zip(sids, sims, strict=True):
            cand = cands[sid]
            score = (
                c.dense_weight * float(sim)
                + c.connect_weight * (len(cand.seeds) - 1)
                + c.bridge_weight * cand.bridge
                + c.idf_weight * cand.idf
            )
            scored.append((score, sid))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [GraalHit(Hit(sid, score, self.name, query), tuple(cands[sid].prov)) for score, sid in scored]

    def _cosines(self, query: str, sids: list[SentenceId], rows: dict[SentenceId, int]) -> np.ndarray:
        """Cosine of the claim and each candidate: the candidates' vectors are read from
        :meth:`index_vectors` where they exist (only the claim is encoded), else encoded through
        the embedding cache.  Both give the same vectors, laid out alike for one product."""
        vectors = self.index_vectors()
        if vectors is None:
            tp, found = self.dense_config.title_prefix, self._texts(sids)
            candidates = [sentence_text(s.page, found[s].text, tp) for s in sids]
            vecs = self.cache.encode_cached([query] + candidates)
        else:
            claim = self.cache.encode_cached([query])[0]
            vecs = np.empty((1 + len(sids), claim.shape[0]), dtype=np.float32)
            vecs[0] = claim
            vecs[1:] = vectors.rows([rows[s] for s in sids])
        return vecs[1:] @ vecs[0]

    def search(self, query: str, mentions: list[Mention] | None = None) -> GraalResult:
        """Full graph retrieval for one claim, with timings (linking separately) and provenance."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")
        graph, _ = self._require()
        if mentions is None:
            known = self._results().get(query)
            if known is not None:
                return known
        started = time.perf_counter()
        own = mentions is None
        if own:
            mentions = self.link_claims([query])[0]
        linked = time.perf_counter()
        seeds = sorted({graph.index[m.entity] for m in mentions})
        cands, sub = self._candidates(seeds)
        walked = time.perf_counter()
        hits = self._rank(query, cands)
        done = time.perf_counter()
        seconds = {"link": linked - started, "graph": walked - linked, "rank": done - walked}
        result = GraalResult(query, tuple(mentions), sub, hits, seconds)
        return self._remember(result) if own else result

    def clear_query_cache(self) -> None:
        """Forget the last claims' results (benchmarks time searches, not look-ups)."""
        self._recent.clear()

    def _results(self) -> LRU[str, GraalResult]:
        """The last claims' results, emptied first when the settings changed since they were kept."""
        if self._recent_config is not self.config:
            self._recent.clear()
            self._recent_config = self.config
        return self._recent

    def _remember(self, result: GraalResult) -> GraalResult:
        """Keep a claim's result (its mentions are the linker's) for a later ``search`` of it."""
        self._results().put(result.query, result)
        return result

    def retrieve_with_paths(self, query: str, k: int) -> list[GraalHit]:
        """Top-``k`` hits, each with the paths (entities and edges) that brought it."""
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        return self.search(query).hits[:k]

    def retrieve(self, query: str, k: int) -> list[Hit]:
        """Top-``k`` ranked sentences of the claim's graph neighbourhood; [] when no entity is linked."""
        return [h.hit for h in self.retrieve_with_paths(query, k)]

    def retrieve_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """``retrieve`` for many claims (the claims not among the last ones searched are parsed in
        one spaCy batch and searched; every result is kept for a later ``search``)."""
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        for i, q in enumerate(queries):
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"{self.name}: query {i} is empty")

        def search_all(todo: list[str]) -> list[GraalResult]:
            linked = self.link_claims(todo)
            return [self.search(q, m) for q, m in zip(todo, linked, strict=True)]

        results = self._results().values(list(queries), search_all)
        return [[h.hit for h in r.hits[:k]] for r in results]

    # -- explanation ------------------------------------------------------------------------------

    def subgraph(self, claim: str, max_edges: int = 500) -> dict:
        """One claim's subgraph as JSON-able data: vertices, edges (with frames) and mentions."""
        graph, _ = self._require()
        result = self.search(claim)
        names = graph.names
        sub = result.subgraph
        seeds = sorted({graph.index[m.entity] for m in result.mentions})
        vertices = [
            {
                "id": names[v],
                "role": "claim",
                "mentions": graph.stats(v)[0],
                "hub": v in (sub.hubs if sub else ()),
            }
            for v in seeds
        ]
        edges = []
        if sub is not None:
            vertices += [
                {"id": names[v], "role": "between", "mentions": graph.stats(v)[0]}
                for v in sorted(sub.between)
            ]
            texts = self._texts([SentenceId(names[e.page_idx], e.line) for e, _ in sub.edges[:max_edges]])
            for e, pair in sub.edges[:max_edges]:
                sid = SentenceId(names[e.page_idx], e.line)
                frame = graph.frame(e.page_idx, e.line, e.frame) if e.frame != SENTENCE_FRAME else None
                parsed = graph.parsed(e.page_idx, e.line)
                edges.append(
                    {
                        "u": names[e.u],
                        "v": names[e.v],
                        "page": sid.page,
                        "line": sid.line,
                        "frame": e.frame,
                        "predicate": frame.predicate if frame else "",
                        "span": [frame.start, frame.end] if frame else None,
                        "frame_text": parsed.text[frame.start : frame.end] if frame and parsed else None,
                        "sentence": texts[sid].text if sid in texts else "",
                        "connects": sorted(names[s] for s in pair),
                    }
                )
        return {
            "claim": claim,
            "mentions": [
                {"entity": m.entity, "surface": m.surface, "start": m.start, "end": m.end, "source": m.source}
                for m in result.mentions
            ],
            "vertices": vertices,
            "edges": edges,
            "n_edges": len(sub.edges) if sub else 0,
            "hubs": sorted(names[h] for h in sub.hubs) if sub else [],
            "frames": self.config.frames,
            "max_path_length": self.config.max_path_length,
            "seconds": result.seconds,
        }
