"""Fine-tuning the NLI verifier: a resumable PyTorch loop over :class:`TrainExample`.

The classifier gets a new 3-way head whose ``id2label`` is FEVER's names, so
the saved model loads through :class:`verifier.nli.NLIVerifier` like any hub
checkpoint.  Premises are built by :func:`verifier.inputs.build_premise` and
encoded by :func:`verifier.inputs.encode_pairs`, exactly as at inference.

Layout of ``out_dir``:

* ``checkpoint/``: the latest training state (``current/`` weights,
  ``training_state.pt`` with optimizer, scheduler and RNG state,
  ``trainer_state.json``) and ``best/`` (best model so far, with tokenizer).
  Replaced atomically; a new call with the same ``out_dir`` resumes from it.
* ``model/``: the final (best) model and tokenizer, written atomically at the end.
* ``train_log.jsonl``: one line per validation run.
* ``result.json``: the :class:`TrainResult`; once present, a new call returns it.

One training run per ``out_dir`` at a time.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from garag.artifacts import write_json_atomic
from garag.config import TrainConfig
from training.backbones import resolve_backbone
from training.checkpoint import (
    CHECKPOINT_DIR,
    STATE_JSON,
    check_settings,
    classification_metrics,
    link_or_copy,
    recover_checkpoint,
    replace_dir,
    run_settings,
)
from verifier.base import TrainExample
from verifier.inputs import PREMISE_FORMAT, build_premise, encode_pairs
from verifier.labels import LABEL_ORDER
from verifier.nli import HEAD_PREFIXES

logger = logging.getLogger(__name__)

__all__ = [
    "PREMISE_FORMAT",
    "TrainExample",
    "TrainResult",
    "classification_metrics",
    "train_verifier",
]

ID2LABEL = {i: label.value for i, label in enumerate(LABEL_ORDER)}
LABEL2ID = {name: i for i, name in ID2LABEL.items()}
MAX_GRAD_NORM = 1.0
MIN_LOSS_DELTA = 1e-4  # at equal accuracy, a validation loss must drop this much to count as better
_STATE_PT = "training_state.pt"
_RESULT = "result.json"
_LOG = "train_log.jsonl"


@dataclass(frozen=True)
class TrainResult:
    """What a finished training run produced.

    Attributes:
        model_dir: the best model (``save_pretrained`` format, with tokenizer).
        best_val: validation metrics of the best model (see :func:`classification_metrics`).
        history: one entry per validation run, in order.
        seconds: training wall time summed over all sessions (resumes included).
        steps: optimizer steps taken in total.
        resumed_from_step: the step this call started from (0 for a fresh run).
    """

    model_dir: Path
    best_val: dict
    history: tuple[dict, ...]
    seconds: float
    steps: int
    resumed_from_step: int = 0


def _linear_warmup_decay(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def _with_new_head(auto_model: Any, base_model: str, overrides: dict | None) -> Any:  # noqa: ANN401
    """The base model with a 3-way head (new, or its own where it is a classifier already), said in
    one line: transformers' own load report (a warning table of the head's "MISSING" weights and the
    encoder's unused pooler) is for surprises, and a new head is none.  Any other weight left out is
    still a warning, named."""
    quiet = logging.getLogger("transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        model, info = auto_model.from_pretrained(
            base_model,
            num_labels=len(LABEL_ORDER),
            id2label=ID2LABEL,
            label2id=LABEL2ID,
            output_loading_info=True,
            **(overrides or {}),
        )
    finally:
        quiet.setLevel(level)
    missing = sorted(info.get("missing_keys", ()))
    head = [k for k in missing if k.split(".")[0] in HEAD_PREFIXES]
    if other := [k for k in missing if k not in head] + sorted(info.get("mismatched_keys", ())):
        logger.warning("%s: weights not in the checkpoint, initialised at random: %s", base_model, other)
    unused = len(info.get("unexpected_keys", ()))
    if head:
        logger.info(
            "%s: a new %d-way classification head (%d weights initialised); %d checkpoint weights unused",
            base_model,
            len(LABEL_ORDER),
            len(head),
            unused,
        )
    else:  # a classifier already (the joint recipe continues from garag's verifier)
        logger.info("%s: its classification head kept; %d checkpoint weights unused", base_model, unused)
    return model


def _adamw(torch: Any, groups: list[dict], lr: float) -> Any:
    """AdamW, fused where this torch build supports it (on CPU it is several times faster)."""
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(groups, lr=lr)


POOL_BATCHES = 50  # train.batching: by_length sorts this many batches' examples at a time


def group_by_length(
    order: Sequence[int], lengths: Sequence[int], batch_size: int, rng: random.Random
) -> list[int]:
    """``order`` regrouped into batches of examples of similar length, so that less of each batch
    is padding: pools of :data:`POOL_BATCHES` batches in ``order``'s (shuffled) sequence, each pool
    sorted by ``lengths`` and cut into batches, the full batches then shuffled.  A short batch (the
    examples do not fill the last) stays last, so batch ``b`` is still
    ``order[b * batch_size : (b + 1) * batch_size]`` and an epoch has as many steps as before.
    """
    pool = POOL_BATCHES * batch_size
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda i: lengths[i])
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    short = [b for b in batches if len(b) < batch_size]
    full = [b for b in batches if len(b) == batch_size]
    rng.shuffle(full)
    return [i for b in full + short for i in b]


class _Trainer:
    """State of one training session (the shell around the loop)."""

    def __init__(
        self,
        config: TrainConfig,
        train: Sequence[TrainExample],
        val: Sequence[TrainExample],
        base_model: str,
        out_dir: Path,
        overrides: dict | None,
        progress: bool,
        soft_targets: Sequence[tuple[float, float, float] | None] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.config = config
        self.train = train
        self.val = val
        self.out_dir = out_dir
        self.progress = progress
        self.soft_targets = soft_targets
        self._lengths: list[int] | None = None
        self.settings = run_settings(config, base_model, overrides, train, val, _digest_or_none(soft_targets))
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(base_model)
        ckpt = recover_checkpoint(out_dir)
        if ckpt is not None:
            state = json.loads((ckpt / STATE_JSON).read_text(encoding="utf-8"))
            check_settings(state["settings"], self.settings, ckpt)
            model = AutoModelForSequenceClassification.from_pretrained(ckpt / "current")
            logger.info("resuming verifier training from step %d (%s)", state["step"], ckpt)
        else:
            state = {
                "settings": self.settings,
                "step": 0,
                "finished": False,
                "best": None,
                "best_step": None,
                "bad_evals": 0,
                "window_loss": 0.0,  # training loss summed since the last validation
                "window_steps": 0,
                "history": [],
                "seconds": 0.0,
            }
            torch.manual_seed(config.seed)
            model = _with_new_head(AutoModelForSequenceClassification, base_model, overrides)
        self.state = state
        self._accounted = 0.0
        self.model = model.to(self.device)
        self.steps_per_epoch = math.ceil(len(train) / config.batch_size)
        self.total_steps = config.epochs * self.steps_per_epoch
        no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
        groups = [
            {
                "params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
                "weight_decay": config.weight_decay,
            },
            {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
        ]
        self.optimizer = _adamw(torch, groups, config.learning_rate)
        warmup = math.ceil(config.warmup_ratio * self.total_steps)
        schedule = partial(_linear_warmup_decay, warmup=warmup, total=self.total_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule)
        if ckpt is not None:
            saved = torch.load(ckpt / _STATE_PT, map_location=self.device, weights_only=True)
            self.optimizer.load_state_dict(saved["optimizer"])
            self.scheduler.load_state_dict(saved["scheduler"])
            torch.set_rng_state(saved["torch_rng"])
            if saved.get("cuda_rng") is not None and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(saved["cuda_rng"])
            self._rewrite_log()

    # -- batches -------------------------------------------------------------------------------

    def _encode(self, batch: Sequence[TrainExample]) -> Any:
        return encode_pairs(
            self.tokenizer,
            [build_premise(ex.evidence) for ex in batch],
            [ex.claim for ex in batch],
            self.config.max_length,
        ).to(self.device)

    def _labels(self, batch: Sequence[TrainExample]) -> Any:
        ids = [LABEL_ORDER.index(ex.label) for ex in batch]
        return self.torch.tensor(ids, dtype=self.torch.long, device=self.device)

    def _loss(self, chosen: Sequence[int], batch: Sequence[TrainExample]) -> Any:
        """The batch loss: cross-entropy, or `training.distill.distillation_loss` with soft targets;
        the forward pass under bfloat16 autocast with ``train.precision: bfloat16``."""
        torch = self.torch
        half = self.config.precision == "bfloat16"
        with torch.autocast(device_type=self.device, dtype=torch.bfloat16, enabled=half):
            return self._forward_loss(chosen, batch)

    def _forward_loss(self, chosen: Sequence[int], batch: Sequence[TrainExample]) -> Any:
        labels = self._labels(batch)
        if self.soft_targets is None:
            return self.model(**self._encode(batch), labels=labels).loss
        from training.distill import distillation_loss

        torch = self.torch
        logits = self.model(**self._encode(batch)).logits.float()
        rows = [self.soft_targets[i] for i in chosen]
        has = torch.tensor([t is not None for t in rows], dtype=torch.bool, device=self.device)
        teacher = torch.tensor(
            [t if t is not None else (1.0, 0.0, 0.0) for t in rows], dtype=torch.float32, device=self.device
        )
        return distillation_loss(
            logits, labels, teacher, has, self.config.distill_weight, self.config.distill_temperature
        )

    def epoch_order(self, epoch: int) -> list[int]:
        """The shuffled example order of an epoch (a function of seed and epoch only, so resumable);
        with ``train.batching: by_length``, regrouped by :func:`group_by_length`."""
        seed = self.config.seed * 1_000_003 + epoch
        gen = self.torch.Generator().manual_seed(seed)
        order = self.torch.randperm(len(self.train), generator=gen).tolist()
        if self.config.batching == "by_length":
            order = group_by_length(order, self.lengths(), self.config.batch_size, random.Random(seed))
        return order

    def lengths(self) -> list[int]:
        """Each training example's tokens as encoded (at most ``max_length``), counted once."""
        if self._lengths is None:
            premises = [build_premise(ex.evidence) for ex in self.train]
            claims = [ex.claim for ex in self.train]
            ids = self.tokenizer(premises, claims, truncation=True, max_length=self.config.max_length)
            self._lengths = [len(x) for x in ids["input_ids"]]
        return self._lengths

    # -- validation ----------------------------------------------------------------------------

    def evaluate(self) -> dict:
        """Validation metrics (loss, accuracy, per-class recall) of the current weights."""
        torch = self.torch
        self.model.eval()
        order = sorted(range(len(self.val)), key=lambda i: len(build_premise(self.val[i].evidence)))
        size = 2 * self.config.batch_size
        gold, pred = [], []
        total_loss = 0.0
        with torch.inference_mode():
            for start in range(0, len(order), size):
                batch = [self.val[i] for i in order[start : start + size]]
                labels = self._labels(batch)
                logits = self.model(**self._encode(batch)).logits.float()
                total_loss += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
                gold.extend(labels.tolist())
                pred.extend(logits.argmax(-1).tolist())
        self.model.train()
        return classification_metrics(gold, pred, loss=total_loss / len(self.val))

    # -- persistence ---------------------------------------------------------------------------

    def checkpoint(self, new_best: bool) -> None:
        """Replace ``checkpoint/`` atomically; ``best/`` is re-saved if ``new_best``, else hard-linked."""
        torch = self.torch
        final = self.out_dir / CHECKPOINT_DIR
        tmp = Path(tempfile.mkdtemp(prefix=f".{CHECKPOINT_DIR}.tmp-", dir=self.out_dir))
        try:
            self.model.save_pretrained(tmp / "current")
            torch.save(
                {
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                },
                tmp / _STATE_PT,
            )
            if new_best:
                self.model.save_pretrained(tmp / "best")
                self.tokenizer.save_pretrained(tmp / "best")
            elif (final / "best").is_dir():
                shutil.copytree(final / "best", tmp / "best", copy_function=link_or_copy)
            write_json_atomic(tmp / STATE_JSON, self.state)
            replace_dir(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _rewrite_log(self) -> None:
        """Make train_log.jsonl match the checkpoint's history (drops lines written after it)."""
        path = self.out_dir / _LOG
        fd, tmp = tempfile.mkstemp(prefix=f".{_LOG}.", dir=self.out_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for entry in self.state["history"]:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def _append_log(self, entry: dict) -> None:
        with open(self.out_dir / _LOG, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, sort_keys=True) + "\n")

    # -- the loop ------------------------------------------------------------------------------

    def run(self, checkpoint_every: int, checkpoint_minutes: float, on_step: Callable | None) -> None:
        from tqdm import tqdm

        torch, config, state = self.torch, self.config, self.state
        self.model.train()
        session_start = time.time()
        self._accounted = session_start
        last_ckpt = time.time()
        seen = 0
        ema: float | None = None
        bar = tqdm(
            total=self.total_steps,
            initial=state["step"],
            desc="train verifier",
            unit="step",
            disable=not self.progress,
        )
        try:
            while state["step"] < self.total_steps and not state["finished"]:
                epoch, position = divmod(state["step"], self.steps_per_epoch)
                order = self.epoch_order(epoch)
                for b in range(position, self.steps_per_epoch):
                    chosen = order[b * config.batch_size : (b + 1) * config.batch_size]
                    batch = [self.train[i] for i in chosen]
                    loss = self._loss(chosen, batch)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
                    self.optimizer.step()
                    self.scheduler.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    state["step"] += 1
                    value = float(loss.detach())
                    seen += len(batch)
                    state["window_loss"] += value
                    state["window_steps"] += 1
                    ema = value if ema is None else 0.95 * ema + 0.05 * value
                    rate = seen / max(1e-9, time.time() - session_start)
                    bar.update(1)
                    bar.set_postfix(loss=f"{ema:.3f}", ex_s=f"{rate:.1f}")
                    step = state["step"]
                    last = step == self.total_steps
                    if (
                        (config.eval_every and step % config.eval_every == 0)
                        or (not config.eval_every and b == self.steps_per_epoch - 1)
                        or last
                    ):
                        self._validate(state["window_loss"] / state["window_steps"], rate, session_start)
                        last_ckpt = time.time()
                    elif (checkpoint_every and step % checkpoint_every == 0) or (
                        time.time() - last_ckpt > 60 * checkpoint_minutes
                    ):
                        self._save_seconds(session_start)
                        self.checkpoint(new_best=False)
                        last_ckpt = time.time()
                    if on_step is not None:
                        on_step(step, value)
                    if state["finished"]:
                        break
        finally:
            bar.close()

    def _save_seconds(self, session_start: float) -> None:
        now = time.time()
        self.state["seconds"] += now - max(self._accounted, session_start)
        self._accounted = now

    def _validate(self, train_loss: float, rate: float, session_start: float) -> None:
        state, config = self.state, self.config
        metrics = self.evaluate()
        best = state["best"]
        improved = (
            best is None
            or metrics["accuracy"] > best["accuracy"]
            or (metrics["accuracy"] == best["accuracy"] and metrics["loss"] < best["loss"] - MIN_LOSS_DELTA)
        )
        if improved:
            state["best"], state["best_step"], state["bad_evals"] = metrics, state["step"], 0
        else:
            state["bad_evals"] += 1
        entry = {
            "step": state["step"],
            "epoch": round(state["step"] / self.steps_per_epoch, 4),
            "train_loss": train_loss,
            "lr": self.scheduler.get_last_lr()[0],
            "examples_per_s": round(rate, 2),
            "val": metrics,
            "improved": improved,
        }
        state["history"].append(entry)
        state["window_loss"], state["window_steps"] = 0.0, 0
        logger.info(
            "step %d: train loss %.4f, val loss %.4f, val accuracy %.4f%s",
            state["step"],
            train_loss,
            metrics["loss"],
            metrics["accuracy"],
            " (best)" if improved else "",
        )
        if config.patience > 0 and state["bad_evals"] >= config.patience:
            logger.info("early stopping: %d validations without improvement", state["bad_evals"])
            state["finished"] = True
        if state["step"] >= self.total_steps:
            state["finished"] = True
        self._append_log(entry)
        self._save_seconds(session_start)
        self.checkpoint(new_best=improved)

    def finalize(self, resumed_from: int) -> TrainResult:
        state = self.state
        best_dir = self.out_dir / CHECKPOINT_DIR / "best"
        model_dir = self.out_dir / "model"
        tmp = Path(tempfile.mkdtemp(prefix=".model.tmp-", dir=self.out_dir))
        try:
            shutil.copytree(best_dir, tmp, dirs_exist_ok=True, copy_function=link_or_copy)
            write_json_atomic(
                tmp / "garag_verifier.json",
                {
                    "premise_format": PREMISE_FORMAT,
                    "max_length": self.config.max_length,
                    "base_model": self.settings["base_model"],
                    "best_step": state["best_step"],
                    "best_val": state["best"],
                    "label_order": [lab.value for lab in LABEL_ORDER],
                },
            )
            replace_dir(tmp, model_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        result = TrainResult(
            model_dir=model_dir,
            best_val=state["best"],
            history=tuple(state["history"]),
            seconds=round(state["seconds"], 3),
            steps=state["step"],
            resumed_from_step=resumed_from,
        )
        write_json_atomic(self.out_dir / _RESULT, {"settings": self.settings, **_result_json(result)})
        shutil.rmtree(self.out_dir / CHECKPOINT_DIR, ignore_errors=True)
        return result


def _digest_or_none(soft_targets: Sequence[tuple[float, float, float] | None] | None) -> str | None:
    from training.distill import targets_digest

    return None if soft_targets is None else targets_digest(soft_targets)


def _result_json(result: TrainResult) -> dict:
    return {
        "model_dir": str(result.model_dir),
        "best_val": result.best_val,
        "history": list(result.history),
        "seconds": result.seconds,
        "steps": result.steps,
        "resumed_from_step": result.resumed_from_step,
    }


def train_verifier(
    train: Sequence[TrainExample],
    val: Sequence[TrainExample],
    config: TrainConfig,
    base_model_path: str,
    out_dir: Path,
    progress: bool = True,
    *,
    model_overrides: dict | None = None,
    checkpoint_every: int = 0,
    checkpoint_minutes: float = 10.0,
    on_step: Callable[[int, float], None] | None = None,
    soft_targets: Sequence[tuple[float, float, float] | None] | None = None,
) -> TrainResult:
    """Fine-tune a 3-way verdict classifier; resumes from ``out_dir/checkpoint`` when present.

    Validation runs every ``config.eval_every`` steps (0 = at the end of each
    epoch) and at the last step; the best model is the one with the highest
    validation accuracy (ties: validation loss lower by at least ``MIN_LOSS_DELTA``).
    Training stops early after ``config.patience`` validations without
    improvement (0 = never).  Every
    validation writes a checkpoint, as do ``checkpoint_every`` steps and
    ``checkpoint_minutes`` of wall time in between.

    Args:
        train: training examples.
        val: validation examples (non-empty).
        config: optimisation settings (``epochs``, ``learning_rate``, ``batch_size``,
            ``max_length``, ``warmup_ratio``, ``weight_decay``, ``eval_every``,
            ``patience``, ``seed``; the data-building fields are not used here).
        base_model_path: encoder checkpoint (path or hub id; ``"minilm"`` is resolved).
        out_dir: where checkpoints, the final model and the log go.
        progress: show a progress bar with the loss and examples/s.
        model_overrides: extra config values for a fresh model, e.g. ``{"num_hidden_layers": 1}``.
        checkpoint_every: also checkpoint every this many steps (0 = only by time and at validation).
        checkpoint_minutes: also checkpoint when this much time passed since the last one.
        on_step: called as ``on_step(step, loss)`` after each step (after any checkpoint of that step).
        soft_targets: with ``config.distill`` set, one teacher probability triple (``LABEL_ORDER``)
            or None per training example (:func:`training.distill.soft_targets`); the loss then
            mixes in the teacher's (``config.distill_weight``, ``config.distill_temperature``).

    Returns:
        The :class:`TrainResult`; a finished ``out_dir`` returns its stored result without training.

    Raises:
        ValueError: empty train or val, soft targets without ``config.distill`` (or the reverse) or
            not one per example, or an ``out_dir`` made with different settings or data.
    """
    if not train:
        raise ValueError("train_verifier: no training examples")
    if not val:
        raise ValueError("train_verifier: no validation examples (needed to choose the model and stop early)")
    if checkpoint_every < 0 or checkpoint_minutes <= 0:
        raise ValueError("checkpoint_every must be >= 0 and checkpoint_minutes > 0")
    if bool(config.distill) != (soft_targets is not None):
        raise ValueError("train.distill and soft_targets go together: a teacher file needs its soft targets")
    if soft_targets is not None and len(soft_targets) != len(train):
        raise ValueError(f"soft_targets: {len(soft_targets)} for {len(train)} training examples")
    base_model = resolve_backbone(base_model_path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = out_dir / _RESULT
    if done.is_file() and (out_dir / "model").is_dir():
        stored = json.loads(done.read_text(encoding="utf-8"))
        digest = _digest_or_none(soft_targets)
        expected = run_settings(config, base_model, model_overrides, train, val, digest)
        check_settings(stored.pop("settings"), expected, done)
        logger.info("verifier already trained in %s", out_dir)
        return TrainResult(
            model_dir=out_dir / "model",
            best_val=stored["best_val"],
            history=tuple(stored["history"]),
            seconds=stored["seconds"],
            steps=stored["steps"],
            resumed_from_step=stored["steps"],
        )
    import torch

    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if torch.cuda.is_available():  # the trainer's device
        # TF32 matrix products: 2.3x (96 tokens) to 3.0x (320 tokens) faster steps for
        # all-mpnet-base-v2 on an H200 (docs/results-history.md).
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    try:
        trainer = _Trainer(config, train, val, base_model, out_dir, model_overrides, progress, soft_targets)
        resumed_from = trainer.state["step"]
        trainer.run(checkpoint_every, checkpoint_minutes, on_step)
        return trainer.finalize(resumed_from)
    finally:  # TF32 is for training; the process's later inference keeps its own precision
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
