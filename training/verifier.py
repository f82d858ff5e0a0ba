"""Train garag's own verifier from FEVER-format files (``garag train-verifier``).

The trained classifier is an artifact like the indexes: it lives in the folder
that :func:`verifier.trained.verifier_artifact_dir` names, where pipelines load
it from (:func:`verifier.trained.trained_verifier_path`).  Training checkpoints
there and resumes after an interruption; ``meta.json`` is written last, so its
presence means "done".  Only the commands that need a verifier train it, as an
explicit step (:func:`ensure_verifiers`); building a pipeline never does.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from garag.artifacts import file_checksums, read_meta, write_json_atomic
from garag.config import Config
from garag.cpu import describe_cpu
from garag.datasets import fever
from garag.errors import ErrorPolicy
from garag.types import Label, SentenceId
from pipeline.retrieval import RetrievalPipeline
from training.backbones import resolve_backbone
from training.calibration import calibrate_nei_bias
from training.compositional import compose_examples, partial_examples
from training.contrast import CONTRAST_COMPOSED_SHARE, contrast_train_examples
from training.data import (
    TrainClaim,
    aggregator_instances,
    build_examples,
    drop_eval_claims,
    read_train_pairs,
    split_by_page,
)
from training.decision import fit_decision_model
from training.distill import parse_teacher, soft_targets
from training.train import PREMISE_FORMAT, train_verifier
from verifier.aggregate import aggregate_sentence_probs
from verifier.base import TrainExample
from verifier.claim_aggregator import (
    AGGREGATOR_FILE,
    balanced_accuracy,
    claim_features,
    fit_aggregator,
    read_aggregator,
)
from verifier.decision import DECISION_FILE, read_decision
from verifier.inputs import build_premise
from verifier.labels import LABEL_ORDER
from verifier.nli import NLIVerifier
from verifier.pair_memory import PairMemories
from verifier.trained import (
    EMBEDDED_TEACHER,
    GARAG_BASE,
    base_verifier_config,
    checked_model_dir,
    fever_train_config,
    mix_verifier_config,
    needs_aggregator,
    needs_decision,
    teacher_path,
    train_pairs_path,
    verifier_artifact_dir,
)

logger = logging.getLogger(__name__)

RETRIEVAL_DEPTH = 20
# the training retrieval pipeline, the validation claims and their retrieved sentences
Reading = tuple[RetrievalPipeline, list[TrainClaim], list[list[SentenceId]]]
RETRIEVAL_BATCH = 256


def _resolve_base(config: Config, progress: bool) -> str:
    if config.train.base_model == GARAG_BASE:
        return ensure_verifier(base_verifier_config(config), progress=progress)
    return resolve_backbone(config.train.base_model, config.paths.cache_dir)


@dataclass(frozen=True)
class _Teacher:
    """A teacher file as read once: its path, its rows and the sha256 of the bytes they came from."""

    path: Path
    rows: dict
    sha256: str


def _read_teacher(config: Config) -> _Teacher | None:
    """The teacher that ``train.distill`` names for this verifier, read (None: no teacher)."""
    path = teacher_path(config)
    if path is None:
        return None
    data = path.read_bytes()
    return _Teacher(path, parse_teacher(data, path), hashlib.sha256(data).hexdigest())


def _soft_targets(
    config: Config, train_ex: Sequence[TrainExample], teacher: _Teacher | None
) -> tuple[list | None, dict]:
    """The soft targets of ``train_ex`` from ``teacher`` (:func:`_read_teacher`) and what to record
    of them.

    A teacher that scored none of the examples is an error when the user named it; garag's
    embedded one is then left out with a warning (other train pairs, corpus or settings make other
    examples).
    """
    if teacher is None:
        return None, {}
    path, rows, sha = teacher.path, teacher.rows, teacher.sha256
    targets, missing = soft_targets(train_ex, rows)
    if missing == len(train_ex):
        if config.train.distill == EMBEDDED_TEACHER:
            logger.warning(
                "garag's embedded teacher (%s) scored none of these %d training examples (other train "
                "pairs, corpus or settings): the verifier trains on its labels alone",
                path,
                len(train_ex),
            )
            return None, {"file": str(path), "examples_with_target": 0, "examples_without": missing}
        raise ValueError(
            f"{path}: the teacher scored none of the {len(train_ex)} training examples "
            "(made for other examples, another corpus or other train settings?)"
        )
    if missing:
        logger.warning(
            "%s: no soft target for %d of %d training examples (they train on their labels alone)",
            path,
            missing,
            len(train_ex),
        )
    info = {
        "file": str(path),
        "sha256": sha,
        "teacher_rows": len(rows),
        "examples_with_target": len(train_ex) - missing,
        "examples_without": missing,
        "weight": config.train.distill_weight,
        "temperature": config.train.distill_temperature,
    }
    return targets, info


def ensure_verifier(config: Config, progress: bool = True, force: bool = False) -> str:
    """The checkpoint to load: ``verifier.model`` when set (hub id or path), else garag's own,
    trained here when it is not yet (or with ``force``), then reused.
    """
    if config.verifier.model:
        return config.verifier.model
    out_dir = verifier_artifact_dir(config)
    if force or read_meta(out_dir) is None:
        logger.info("training the verifier this config needs into %s (once; reused after)", out_dir)
        train_from_fever(config, out_dir, progress=progress)
    model_dir = checked_model_dir(config)
    memories = PairMemories()  # the decision model reads again the pairs the aggregator was fitted on
    # A verifier trained before the aggregator or the decision model existed (or with an older one):
    # fit what is missing now, once, on one retrieval of the validation claims.
    aggregator = needs_aggregator(config) and read_aggregator(model_dir) is None
    decision = needs_decision(config) and read_decision(model_dir) is None
    if aggregator or decision:
        reading = validation_reading(config, progress)
        if aggregator:
            fit_claim_aggregator(config, model_dir, reading, memories=memories)
        if decision:
            fit_verifier_decision(config, model_dir, progress, reading, memories=memories)
    return str(model_dir)


def ensure_verifiers(config: Config, progress: bool = True, force: bool = False) -> list[tuple[str, str]]:
    """Every verifier a pipeline with ``config`` loads, trained where it is not yet: the config's own
    and, with ``verifier.mix_weight`` > 0, the mixed-in default one.

    Returns:
        ``(setting, checkpoint)`` pairs: ``("model", ...)`` and, for a mix, ``("mix_model", ...)``.
    """
    todo = [("model", config)]
    if config.verifier.mix_weight > 0:
        todo.append(("mix_model", mix_verifier_config(config)))
    return [(name, ensure_verifier(cfg, progress=progress, force=force)) for name, cfg in todo]


def _retrieve_all(
    pipe: RetrievalPipeline, claims: Sequence[TrainClaim], progress: bool
) -> list[list[SentenceId]]:
    out: list[list[SentenceId]] = []
    bar = tqdm(total=len(claims), desc="verifier data: retrieval", unit=" claims", disable=not progress)
    for i in range(0, len(claims), RETRIEVAL_BATCH):
        batch = claims[i : i + RETRIEVAL_BATCH]
        for res in pipe.retrieve_batch([c.text for c in batch], RETRIEVAL_DEPTH):
            out.append([h.sentence for h in res.fused])
        bar.update(len(batch))
    bar.close()
    return out


def _split_claims(
    config: Config, progress: bool
) -> tuple[RetrievalPipeline, list[TrainClaim], list[TrainClaim], int]:
    """The built training retrieval pipeline and the train / validation claims (eval claims dropped)."""
    pipe = RetrievalPipeline(fever_train_config(config), progress=progress)
    pipe.build()
    assert pipe.store is not None
    return pipe, *split_train_claims(config)


def split_train_claims(config: Config) -> tuple[list[TrainClaim], list[TrainClaim], int]:
    """A verifier's train and validation claims, and how many train claims were dropped for being
    evaluation claims.

    The claims are split by their main evidence page (``train.val_fraction`` of them validate);
    ``train.max_claims`` samples that many first.  A verifier that continues from garag's default
    one (``train.base_model: garag``) keeps that verifier's split: it trains on claims the default
    verifier trained on and validates on the default verifier's validation claims (``max_claims``
    samples each side, ``val_fraction`` of them validation claims).  Its validation accuracy, claim
    aggregator and decision model then rest on claims neither model was trained on.
    """
    tc = config.train
    if tc.base_model == GARAG_BASE:
        base_train, base_val, dropped = split_train_claims(base_verifier_config(config))
        if not tc.max_claims:
            return base_train, base_val, dropped
        rng = random.Random(tc.seed)
        n_val = min(max(1, round(tc.val_fraction * tc.max_claims)), len(base_val))
        n_train = min(max(1, tc.max_claims - n_val), len(base_train))
        return rng.sample(base_train, n_train), rng.sample(base_val, n_val), dropped
    claims = read_train_pairs(train_pairs_path(config), ErrorPolicy(skip=config.data.skip_bad_lines))
    eval_texts = [c.text for c in fever().claims()]
    claims, dropped = drop_eval_claims(claims, eval_texts)
    if tc.max_claims:
        rng = random.Random(tc.seed)
        claims = rng.sample(claims, min(tc.max_claims, len(claims)))
    train_c, val_c = split_by_page(claims, tc.val_fraction, tc.seed)
    if not train_c or not val_c:
        raise ValueError(f"too few train claims ({len(claims)}) for a train/validation split")
    return train_c, val_c, dropped


def prepare_examples(
    config: Config, progress: bool = True
) -> tuple[list[TrainExample], list[TrainExample], dict]:
    """Read, filter, split and retrieve for the train claims; build train and validation examples."""
    tc = config.train
    pipe, train_c, val_c, dropped = _split_claims(config, progress)
    assert pipe.store is not None
    retrieved = _retrieve_all(pipe, train_c + val_c, progress)
    common = dict(
        store=pipe.store,
        top_k=config.verifier.top_k,
        distractors=tc.distractors,
        nei_per_claim=tc.nei_per_claim,
        hard_negative_share=tc.hard_negative_share,
        nei_sentences=tc.nei_sentences,
    )
    train_ex, train_counts = build_examples(train_c, retrieved[: len(train_c)], seed=tc.seed, **common)
    val_ex, val_counts = build_examples(val_c, retrieved[len(train_c) :], seed=tc.seed + 1, **common)
    stats = {
        "train_claims": len(train_c),
        "val_claims": len(val_c),
        "dropped_eval_claims": dropped,
        "train_examples": dict(train_counts),
        "val_examples": dict(val_counts),
    }
    if tc.partial > 0:  # train claims only: validation (early stopping, calibration) keeps single facts
        partial, counts = partial_examples(
            train_c,
            pipe.store,
            n=round(tc.partial * len(train_c)),
            seed=tc.seed + 6,
            bridge_share=tc.bridge_share,
        )
        train_ex.extend(partial)
        stats["train_partial"] = dict(counts)
    # synthetic examples of each split's own claims (validation examples only validate)
    for name, part, lists, offset, examples in (
        ("train", train_c, retrieved[: len(train_c)], 2, train_ex),
        ("val", val_c, retrieved[len(train_c) :], 3, val_ex),
    ):
        if tc.compositional > 0:
            composed, counts = compose_examples(
                part,
                lists,
                pipe.store,
                n=round(tc.compositional * len(part)),
                top_k=config.verifier.top_k,
                seed=tc.seed + offset,
                bridge_share=tc.bridge_share,
            )
            examples.extend(c.example for c in composed)
            stats[f"{name}_compositional"] = dict(counts)
        if tc.contrast > 0:
            changed, counts = contrast_train_examples(
                part,
                lists,
                pipe.store,
                top_k=config.verifier.top_k,
                distractors=tc.distractors,
                share=tc.contrast,
                nei_per_claim=tc.nei_per_claim,
                nei_sentences=tc.nei_sentences,
                seed=tc.seed + offset + 2,
                # compositions read several parts' evidence at once: only for a recipe that already
                # trains on composed claims (a per-sentence verifier reads one sentence at a time)
                composed_share=CONTRAST_COMPOSED_SHARE if tc.compositional > 0 else 0.0,
            )
            examples.extend(changed)
            stats[f"{name}_contrast"] = dict(counts)
    return train_ex, val_ex, stats


def _digest(examples: Sequence[TrainExample]) -> str:
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(f"{ex.label.value}\t{ex.claim}\t{build_premise(ex.evidence)}\n".encode())
    return digest.hexdigest()


def calibrate_trained(
    config: Config, model_dir: Path, val: Sequence[TrainExample], memories: PairMemories | None = None
) -> dict:
    """The NEI calibration of a trained model (``verifier.calibration.calibrate_nei_bias``), scored
    with the config's verifier settings at NEI bias 0 and float32: the calibration is part of the
    trained artifact, so ``verifier.precision`` never reaches it.  ``memories``: the pool of scored
    pairs to read and add to (:mod:`verifier.pair_memory`)."""
    vcfg = config.verifier.model_copy(
        update={"model": str(model_dir), "nei_bias": 0.0, "precision": "float32"}
    )
    scorer = NLIVerifier(vcfg, str(model_dir), memories).load()
    return calibrate_nei_bias(model_dir, val, scorer.predict_pairs, vcfg.top_k)


def validation_reading(config: Config, progress: bool = True) -> Reading:
    """The training retrieval pipeline, the verifier's validation claims and their retrieved
    sentences (the baseline retrievers, as for the hard negatives): what the claim aggregator and
    the decision model are fitted on."""
    pipe, _, val_c, _ = _split_claims(config, progress)
    return pipe, val_c, _retrieve_all(pipe, val_c, progress)


def fit_claim_aggregator(
    config: Config,
    model_dir: str | Path,
    reading: Reading,
    memories: PairMemories | None = None,
) -> dict:
    """Fit a trained verifier's claim-level aggregator on its validation claims; store it beside the model.

    ``reading`` holds the validation claims as retrieved (:func:`validation_reading`); each claim
    yields two instances (:func:`aggregator_instances`).  ``memories``: the pool of
    scored pairs to read and add to (the decision model reads these pairs again).

    Returns:
        The aggregator's ``info``: instance counts, accuracies of the rule and of the
        aggregator on its own fitting instances (balanced over classes), seconds.
    """
    started = time.time()
    top_k = config.verifier.top_k
    pipe, val_c, retrieved = reading
    assert pipe.store is not None
    instances = aggregator_instances(val_c, retrieved, pipe.store, top_k)
    vcfg = copy.deepcopy(config.verifier)
    vcfg.mode, vcfg.aggregation, vcfg.nei_bias = "per_sentence", "rule", 0.0
    vcfg.precision = "float32"  # the aggregator is part of the trained artifact: never fitted at bf16
    verifier = NLIVerifier(vcfg, str(model_dir), memories).load()
    probs = verifier.score_sentences([claim for claim, _, _ in instances], [ev for _, ev, _ in instances])
    features = np.array(
        [claim_features(claim, ev, p, top_k) for (claim, ev, _), p in zip(instances, probs, strict=True)]
    )
    gold = [label for _, _, label in instances]
    aggregator = fit_aggregator(features, gold, top_k)
    learned = [LABEL_ORDER[i] for i in aggregator.predict_proba(features).argmax(axis=1)]
    rule = [
        aggregate_sentence_probs(p, vcfg.min_confidence, vcfg.nei_margin).label
        if len(p)
        else Label.NOT_ENOUGH_INFO
        for p in probs
    ]
    aggregator.info.update(
        {
            "val_claims": len(val_c),
            "instances": len(instances),
            "balanced_accuracy_rule": round(balanced_accuracy(gold, rule), 4),
            "balanced_accuracy_fitted": round(balanced_accuracy(gold, learned), 4),
            "seconds": round(time.time() - started, 1),
        }
    )
    path = aggregator.save(model_dir)
    logger.info("claim aggregator: %s -> %s", aggregator.info, path)
    return aggregator.info


def fit_verifier_decision(
    config: Config,
    model_dir: str | Path,
    progress: bool,
    reading: Reading,
    memories: PairMemories | None = None,
) -> dict:
    """Fit the decision model (:mod:`training.decision`) on the verifier's validation claims, read as
    the pipeline reads claims (``reading``, from :func:`validation_reading`); store it beside the
    model.  ``memories``: the pool of scored pairs to read and add to."""
    pipe, val_c, retrieved = reading
    assert pipe.store is not None
    return fit_decision_model(config, model_dir, val_c, retrieved, pipe.store, progress, memories)


def layer_overrides(base: str, layers: int, name: str = "") -> dict | None:
    """``train.layers`` as the config override of the base model at ``base`` (None: keep every
    layer); ``name``: how the user named it (``train.base_model``), for the error.

    Raises:
        ValueError: more layers than the backbone has.
    """
    if not layers:
        return None
    from transformers import AutoConfig

    have = AutoConfig.from_pretrained(base).num_hidden_layers
    if layers > have:
        raise ValueError(
            f"train.layers: {layers}, but train.base_model {name or base} has {have} layers; "
            f"set at most {have}, or 0 for all"
        )
    return {"num_hidden_layers": layers}


def train_from_fever(config: Config, out_dir: Path, progress: bool = True) -> dict:
    """Build the training data, fine-tune, calibrate the NEI bias on validation, write ``meta.json``."""
    started = time.time()
    # a bad teacher file fails before the minutes of retrieval that the examples take
    teacher = _read_teacher(config)
    if teacher is not None and verifier_artifact_dir(config, teacher.sha256) != out_dir:
        raise ValueError(
            f"{teacher.path} changed since the verifier's folder {out_dir.name} was named: run again"
        )
    base = _resolve_base(config, progress)
    # a train.layers the backbone cannot give is refused before the examples' minutes
    overrides = layer_overrides(base, config.train.layers, config.train.base_model)
    train_ex, val_ex, stats = prepare_examples(config, progress)
    logger.info("verifier data: %s", stats)
    targets, distill = _soft_targets(config, train_ex, teacher)
    # no soft targets (no teacher for this recipe, or none of its rows matched): the labels alone
    train_config = config.train if targets is not None else config.train.model_copy(update={"distill": ""})
    result = train_verifier(
        train_ex,
        val_ex,
        train_config,
        base,
        out_dir,
        progress=progress,
        soft_targets=targets,
        model_overrides=overrides,
    )
    # the aggregator's pairs (each validation claim against its retrieved sentences) are read again
    # by the decision model: one pool of scored pairs serves the three
    memories = PairMemories()
    calibration = calibrate_trained(config, result.model_dir, val_ex, memories)
    reading = validation_reading(config, progress)
    aggregator = fit_claim_aggregator(config, result.model_dir, reading, memories)
    decision = None
    if needs_decision(config):
        decision = fit_verifier_decision(config, result.model_dir, progress, reading, memories)
    meta = {
        "kind": "verifier",
        "base_model": config.train.base_model,
        "base_model_path": base,
        "train_config": config.train.model_dump(),
        "top_k": config.verifier.top_k,
        "premise_format": PREMISE_FORMAT,
        "data": {**stats, "train_sha256": _digest(train_ex), "val_sha256": _digest(val_ex)},
        **({"distill": distill} if distill else {}),
        "label_counts": {
            "train": dict(Counter(e.label.value for e in train_ex)),
            "val": dict(Counter(e.label.value for e in val_ex)),
        },
        "best_val": result.best_val,
        "calibration": calibration,
        "claim_aggregator": aggregator,
        **({"decision": decision} if decision else {}),
        "train_steps": result.steps,
        "train_seconds": result.seconds,
        "total_seconds": time.time() - started,
        "cpu": describe_cpu().to_dict(),  # what trained it: AVX-512 and AVX2 kernels give other bytes
        "labels": [lab.value for lab in Label],
        # checked on every reuse; the aggregator and the decision are left out: they may be refitted,
        # and check themselves
        "model_files": file_checksums(
            result.model_dir, exclude=("meta.json", AGGREGATOR_FILE, DECISION_FILE)
        ),
    }
    write_json_atomic(out_dir / "meta.json", meta)
    return meta
