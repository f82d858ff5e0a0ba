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
        retrievers: names among "bm25", "dense", "pages".
        k: hits returned per claim.
    """

    retrievers: list[str] = field(default_factory=lambda: ["bm25", "dense", "pages"])
    k: int = 100

    def __post_init__(self) -> None:
        known = ("bm25", "dense", "pages")
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
        nei_bias: additive bias on the NEI log-probability; None = the value calibrated on
            validation claims when garag trained the model (0 for other checkpoints).
        max_length: tokens per (premise, claim) pair.
        batch_size: pairs per forward pass.
        device: "auto", "cpu" or "cuda".
    """

    model: str = ""
    label_map: dict[str, str] = field(default_factory=dict)
    mode: str = "concat"
    top_k: int = 5
    nei_margin: float = 0.0
    min_confidence: float = 0.5
    nei_bias: float | None = None
    max_length: int = 128
    batch_size: int = 32
    device: str = "auto"

    def __post_init__(self) -> None:
        _check(self.mode in ("concat", "per_sentence"), "verifier.mode", "must be 'concat' or 'per_sentence'")
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
        epochs: maximum epochs (early stopping may end sooner).
        learning_rate, weight_decay, warmup_ratio: AdamW with linear warm-up and decay.
        batch_size: examples per step.
        max_length: tokens per example.
        val_fraction: share of train *claims* held out for early stopping and calibration.
        patience: evaluations without validation improvement before stopping.
        eval_every: steps between validation runs (0 = once per epoch).
        nei_per_claim: NEI examples built per verifiable claim (hard negatives + other claims' evidence).
        hard_negative_share: share of NEI examples whose premise is retrieved non-evidence.
        distractors: retrieved non-evidence sentences added to gold premises (as at test time).
        max_claims: use at most this many train claims (0 = all 8,852), for quick runs.
        seed: random seed for splits, sampling and initialisation.
    """

    base_model: str = "minilm"
    train_pairs: str = ""
    corpus: str = ""
    epochs: int = 2
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    batch_size: int = 16
    max_length: int = 128
    val_fraction: float = 0.1
    patience: int = 4
    eval_every: int = 250
    nei_per_claim: float = 0.5
    hard_negative_share: float = 0.7
    distractors: int = 3
    max_claims: int = 0
    seed: int = 13

    def __post_init__(self) -> None:
        _check(self.epochs > 0, "train.epochs", "must be > 0")
        _check(self.learning_rate > 0, "train.learning_rate", "must be > 0")
        _check(0 < self.val_fraction < 0.5, "train.val_fraction", "must be in (0, 0.5)")
        _check(self.nei_per_claim >= 0, "train.nei_per_claim", "must be >= 0")
        _check(0 <= self.hard_negative_share <= 1, "train.hard_negative_share", "must be in [0, 1]")
        _check(self.batch_size > 0, "train.batch_size", "must be > 0")


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
class Config:
    """The whole configuration of a run."""

    data: DataConfig = field(default_factory=DataConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    dense: DenseConfig = field(default_factory=DenseConfig)
    pages: PagesConfig = field(default_factory=PagesConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

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
