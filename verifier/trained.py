"""Where garag's trained verifier lives, and whether it is there: what the pipeline loads.

Training it is :mod:`training.verifier` (``garag train-verifier``); building a pipeline never trains.
The trained classifier is an artifact like the indexes: ``<cache>/verifier-<hash>/``, where the hash
covers the training settings, the retrieval settings that produced the hard negatives, the premise
format, the train file and the corpus; ``meta.json`` is written last, so its presence means "done".
"""

from __future__ import annotations

import copy
from pathlib import Path

from garag.artifacts import file_sha256, read_meta, settings_hash, verify_checksums
from garag.config import Config, FusionConfig, TrainConfig, VerifierConfig
from garag.datasets import fever
from garag.fingerprint import cached_fingerprint
from verifier.claim_aggregator import read_aggregator
from verifier.decision import read_decision
from verifier.inputs import PREMISE_FORMAT

# Recorded in the artifact hash of verifiers trained with compositional examples: change it
# whenever training/compositional.py would produce other examples from the same inputs.
GENERATOR_VERSION = "garag-compositional-v1"
# Likewise for contrast claims (train.contrast): it names the claims training/contrast.py makes (its
# GENERATOR); raise it whenever the same inputs would give other claims.
CONTRAST_GENERATOR = "garag-contrast-v1"


TRAIN_HINT = "garag train-verifier (with this config and its --set overrides)"


class VerifierNotTrainedError(ValueError):
    """The config's verifier has not been trained (or its files no longer match their checksums)."""


# Hard negatives always come from the baseline retrievers with default fusion, so that every
# pipeline configuration (baseline, graph-augmented, LLM) shares one trained verifier.
TRAIN_RETRIEVERS = ["bm25", "dense", "pages"]


# How the training corpus's dense index is searched: part of the training recipe, not a run's
# setting, so that a run may search its own corpus otherwise (`dense.ivf_nprobe` 64 for large
# corpora) without retraining the verifier.  The values every verifier folder was named with.
TRAIN_SEARCH = {"ivf_nprobe": 32, "hnsw_ef_search": 128}


def fever_train_config(config: Config) -> Config:
    """The retrieval config over the training corpus (always FEVER-format, whatever the run's
    dataset; its dense index searched with :data:`TRAIN_SEARCH`)."""
    cfg = copy.deepcopy(config)
    cfg.data.dataset = "fever"
    cfg.data.claims = ""
    cfg.data.corpus = config.train.corpus
    cfg.retrieval.retrievers = list(TRAIN_RETRIEVERS)
    cfg.fusion = FusionConfig()
    cfg.dense = cfg.dense.replace(**TRAIN_SEARCH)
    return cfg


def train_pairs_path(config: Config) -> Path:
    return (
        Path(config.train.train_pairs)
        if config.train.train_pairs
        else fever().claims_path.parent / "train_pairs.jsonl"
    )


def eval_claims_path(config: Config) -> Path:
    return fever().claims_path


GARAG_BASE = "garag"


def base_verifier_config(config: Config) -> Config:
    """The config of garag's default verifier, which ``train.base_model: garag`` continues from."""
    cfg = copy.deepcopy(config)
    cfg.train = default_verifier_train(config, config.train.base_train)
    cfg.verifier = VerifierConfig()
    return cfg


def default_verifier_train(config: Config, settings: dict[str, object]) -> TrainConfig:
    """The train section of a default (per-sentence) verifier with ``settings`` (``train.base_train``,
    ``verifier.mix_train``): the train pairs, corpus and seed stay ``config``'s; every other field
    (``precision`` too) is the default's unless ``settings`` names it, so the base verifier of a
    bfloat16 joint training stays the shared float32 one unless ``train.base_train`` says
    ``precision: bfloat16``."""
    return TrainConfig(
        train_pairs=config.train.train_pairs, corpus=config.train.corpus, seed=config.train.seed, **settings
    )


def mix_verifier_config(config: Config) -> Config:
    """The config of the second verifier of ``verifier.mix_weight``: garag's default verifier trained
    with ``verifier.mix_train`` (or the checkpoint ``verifier.mix_model``), read with this config's
    verifier settings, its own calibration and label names."""
    cfg = copy.deepcopy(config)
    cfg.train = default_verifier_train(config, config.verifier.mix_train)
    cfg.verifier = config.verifier.replace(
        model=config.verifier.mix_model,
        label_map={},
        nei_bias=None,
        mix_weight=0.0,
        mix_train={},
        mix_model="",
    )
    return cfg


def verifier_artifact_dir(config: Config, teacher_sha256: str | None = None) -> Path:
    """Where the verifier trained with ``config`` lives (whether or not it exists yet).

    ``teacher_sha256``: the sha256 of the teacher's bytes already read (:func:`_read_teacher`),
    so that the folder is named from those very bytes; by default the file is hashed.
    """
    fever_cfg = fever_train_config(config)
    corpus = fever(corpus=fever_cfg.data.corpus or None).corpus_path
    cache = Path(config.paths.cache_dir)
    settings = {
        "train": config.train.hash_dump(),
        "top_k": config.verifier.top_k,
        "premise_format": PREMISE_FORMAT,
        "retrieval": {
            "retrievers": fever_cfg.retrieval.retrievers,
            "fusion": fever_cfg.fusion.model_dump(),
            "bm25": config.bm25.hash_dump(),
            "dense": fever_cfg.dense.hash_dump(),
            "pages": config.pages.hash_dump(),
        },
        "train_pairs_sha256": file_sha256(train_pairs_path(config)),
        "eval_claims_sha256": file_sha256(eval_claims_path(config)),
    }
    if config.train.compositional > 0:
        settings["compositional_generator"] = GENERATOR_VERSION
    if config.train.contrast > 0:
        settings["contrast_generator"] = CONTRAST_GENERATOR
        if config.train.compositional == 0:
            # a per-sentence recipe's contrast claims are twins only since 1a02f2a (compositions
            # before it), so a folder trained before then is not taken for one made now; recipes
            # with compositions make the same claims as before and keep their folders
            settings["contrast_compositions"] = False
    teacher = teacher_path(config)
    if teacher is not None:
        settings["distill_sha256"] = teacher_sha256 or file_sha256(teacher)
        # at their defaults left out, as hash_dump leaves out keys added later
        if config.train.distill_weight != DISTILL_DEFAULTS["distill_weight"]:
            settings["distill_weight"] = config.train.distill_weight
        if config.train.distill_temperature != DISTILL_DEFAULTS["distill_temperature"]:
            settings["distill_temperature"] = config.train.distill_temperature
    if config.train.base_model == GARAG_BASE:
        settings["base_verifier"] = verifier_artifact_dir(base_verifier_config(config)).name
        # its train and validation claims are drawn from the base verifier's (training.verifier.
        # split_train_claims); before, from all train claims, so its validation claims were mostly
        # ones the base verifier had trained on
        settings["claims_split"] = "the base verifier's"
    return cache / f"verifier-{settings_hash('verifier', settings, cached_fingerprint(corpus, cache))}"


EMBEDDED_TEACHER = "embedded"
DISTILL_DEFAULTS = {
    name: TrainConfig.model_fields[name].get_default() for name in ("distill_weight", "distill_temperature")
}
TEACHER_FILE = "teacher-mpnet.jsonl.gz"


def teacher_path(config: Config) -> Path | None:
    """The teacher file that ``train.distill`` names for this verifier, or None.

    ``"embedded"`` is garag's own teacher (all-mpnet-base-v2's cross-fitted probabilities, shipped
    beside the FEVER train pairs), made for the examples of the MiniLM per-sentence recipe: it
    applies to a ``minilm`` verifier without compositional examples and is None for any other
    (an mpnet, joint or DeBERTa verifier trains as it did before).
    """
    tc = config.train
    if not tc.distill:
        return None
    if tc.distill != EMBEDDED_TEACHER:
        path = Path(tc.distill)
    elif tc.base_model == "minilm" and tc.compositional == 0:
        path = fever().claims_path.parent / TEACHER_FILE
    else:
        return None
    if not path.is_file():
        raise ValueError(f"train.distill: no such teacher file: {path}")
    return path


def needs_aggregator(config: Config) -> bool:
    """Whether ``config``'s verifier reads claims through a fitted claim aggregator."""
    vc = config.verifier
    return vc.mode == "per_sentence" and vc.aggregation != "rule"


def needs_decision(config: Config) -> bool:
    """Whether ``config``'s verdicts come from the decision model stored beside garag's own verifier
    (:mod:`verifier.decision`): always, unless ``verifier.decision`` is ``verifier`` or the
    checkpoint is another's (``verifier.model``; then ``auto`` reads one only where its folder has one)."""
    return config.verifier.decision != "verifier" and not config.verifier.model


def checked_model_dir(config: Config) -> Path:
    """The model folder of garag's own verifier for ``config``, checked against the checksums its
    training recorded.

    Raises:
        VerifierNotTrainedError: not trained yet (one line naming the folder and the command).
        garag.artifacts.ArtifactError: its files changed since (with the hint to retrain).
    """
    out_dir = verifier_artifact_dir(config)
    meta = read_meta(out_dir)
    if meta is None:
        raise VerifierNotTrainedError(f"no trained verifier for this config in {out_dir}: run {TRAIN_HINT}")
    if "model_files" in meta:
        hint = f"retrain it with `garag train-verifier --force` or delete {out_dir}"
        verify_checksums(out_dir / "model", meta["model_files"], hint)
    return out_dir / "model"


def trained_verifier_path(config: Config) -> str:
    """The checkpoint a pipeline with ``config`` loads: ``verifier.model`` when set (hub id or path),
    else garag's own trained verifier (:func:`checked_model_dir`) with its claim aggregator.

    Raises:
        VerifierNotTrainedError: not trained yet, or (per-sentence with a learned aggregation) its
            claim aggregator is missing or older; one line naming the folder and the command that
            trains it.
    """
    if config.verifier.model:
        return config.verifier.model
    model_dir = checked_model_dir(config)
    if needs_aggregator(config) and read_aggregator(model_dir) is None:
        raise VerifierNotTrainedError(
            f"{model_dir}: no claim aggregator of this version yet: run {TRAIN_HINT}"
        )
    if needs_decision(config) and read_decision(model_dir) is None:
        raise VerifierNotTrainedError(f"{model_dir}: no decision model of this version yet: run {TRAIN_HINT}")
    return str(model_dir)
