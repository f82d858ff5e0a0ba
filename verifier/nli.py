"""NLI verifier: a Hugging Face sequence classifier reads (premise, claim) pairs.

Two modes (``verifier.mode``):

* ``concat``: the top-``top_k`` evidence sentences, each prefixed with its page
  title, form one premise; one forward pass per claim.
* ``per_sentence``: one pair per sentence, then a verdict from their
  probabilities: the claim-level aggregator fitted beside garag's trained model
  (:mod:`verifier.claim_aggregator`) or the rule :func:`aggregate_sentence_probs`
  (max entailment vs max contradiction, NEI unless one clearly wins); see
  ``verifier.aggregation``.

Any 3-way NLI or FEVER checkpoint works (a hub id or a local directory, e.g.
the classifier trained by :func:`training.train.train_verifier`); its output
indices are mapped to verdicts by :func:`resolve_label_map`.

NEI bias: verdict probabilities get ``verifier.nei_bias`` added to the NEI
log-probability (see :mod:`verifier.calibration`).  When it is None, concat
mode uses the bias calibrated beside a garag-trained model (0 for other
checkpoints) and per_sentence mode uses 0, since the calibration was done on
concatenated premises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from garag.config import VerifierConfig
from garag.cpu import read_cpuinfo
from garag.types import Evidence, Label, Verdict, unique_evidence
from verifier.aggregate import aggregate_sentence_probs
from verifier.base import MAX_PREDICTED_EVIDENCE
from verifier.calibration import apply_nei_bias, read_calibration
from verifier.claim_aggregator import ClaimAggregator, aggregator_path, claim_features, read_aggregator
from verifier.explain import explain_aggregate, explain_concat, explain_learned, explain_no_evidence
from verifier.inputs import build_premise, encode_pairs, evidence_text
from verifier.labels import LABEL_ORDER, resolve_label_map, to_label_probs
from verifier.pair_memory import PairMemories, PairMemory, checkpoint_identity

logger = logging.getLogger(__name__)

# Tokenizers without a real limit report a huge sentinel as model_max_length.
_NO_LIMIT = 1_000_000


def _position_limit(model_config: object) -> int | None:
    """Token positions the model can embed (RoBERTa-style checkpoints and MPNet reserve 2 for the offset)."""
    positions = getattr(model_config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        return None
    if getattr(model_config, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        return positions - 2
    return positions


# Parameter-name prefixes of classification heads (BERT/DeBERTa/RoBERTa "classifier", decoder models "score").
HEAD_PREFIXES = ("classifier", "score")  # a sequence classifier's head weights


class ModelUnavailableError(ValueError):
    """The configured classifier cannot be loaded (a hub id while offline, a missing directory)."""


def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when a GPU is visible, else ``"cpu"``; other names unchanged."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_has_amx_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU has AMX's bfloat16 tile instructions, the ones that make bfloat16 faster than
    float32 (AVX512-BF16 alone does not: on 2 such cores without AMX all-mpnet-base-v2 read pairs
    at 0.67 times float32's speed and trained at 0.68 times; docs/training.md), from the flags in
    ``cpuinfo``; None where they cannot be read (not Linux)."""
    _, flags = read_cpuinfo(cpuinfo)
    return None if flags is None else "amx_bf16" in flags


class NLIVerifier:
    """Verdicts from an NLI sequence classifier.

    Attributes:
        config: the verifier settings.
        model_path: hub id or local checkpoint directory.
        pairs_scored: (premise, claim) pairs sent through the model so far.
        pairs_remembered: pairs answered from the memory of recent pairs instead (the decision
            model scores the claim against the sentences the verifier has just read; verifiers
            given the same ``memories`` that read alike answer each other's pairs).
    """

    name = "nli"

    def __init__(self, config: VerifierConfig, model_path: str, memories: PairMemories | None = None) -> None:
        """Cheap: checks the arguments, loads nothing (see :meth:`load`).

        Args:
            config: the verifier settings.
            model_path: hub id or local checkpoint directory.
            memories: the pool whose memory of scored pairs this verifier uses (:mod:`verifier.pair_memory`);
                None: a pool of its own.

        Raises:
            ValueError: an empty model path, or a local-looking path that does not exist.
        """
        if not model_path or not str(model_path).strip():
            raise ValueError("verifier: empty model path (a hub id or a local checkpoint directory)")
        model_path = str(model_path)
        if model_path.startswith(("/", ".", "~")) and not Path(model_path).expanduser().is_dir():
            raise ModelUnavailableError(f"verifier.model: checkpoint directory {model_path!r} does not exist")
        self.config = config
        self.model_path = model_path
        self.pairs_scored = 0
        self.pairs_remembered = 0
        self._memories = memories if memories is not None else PairMemories()
        self._memory: PairMemory | None = None  # the reader's memory, taken from the pool by load()
        self._tokenizer: Any = None
        self._model: Any = None
        self._device = "cpu"
        self._index_to_label: dict[int, Label] = {}
        self._max_length = config.max_length
        self._nei_bias = 0.0
        self._aggregator: ClaimAggregator | None = None

    @property
    def aggregation(self) -> str:
        """``"learned"`` or ``"rule"``: how per_sentence verdicts are made (after :meth:`load`)."""
        self._require_loaded()
        return "learned" if self._aggregator is not None else "rule"

    @property
    def nei_bias(self) -> float:
        """The NEI log-probability bias applied to verdicts (after :meth:`load`)."""
        self._require_loaded()
        return self._nei_bias

    @property
    def device(self) -> str:
        """The device the classifier runs on, e.g. ``"cpu"`` or ``"cuda"`` (after :meth:`load`)."""
        self._require_loaded()
        return self._device

    @property
    def index_to_label(self) -> dict[int, Label]:
        """The model's output index -> verdict (after :meth:`load`)."""
        self._require_loaded()
        return dict(self._index_to_label)

    def load(self) -> NLIVerifier:
        """Load the tokenizer and classifier (idempotent), in eval mode on the configured device.

        Raises:
            ModelUnavailableError: the checkpoint cannot be found or read.
            ValueError: its labels cannot be mapped to verdicts, or it has no trained head.
        """
        if self._model is not None:
            return self
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        started = time.time()
        local = Path(self.model_path).expanduser()
        source = str(local) if local.is_dir() else self.model_path
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model, info = AutoModelForSequenceClassification.from_pretrained(source, output_loading_info=True)
        except OSError as exc:
            raise ModelUnavailableError(
                f"verifier.model: cannot load {self.model_path!r} ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}). Without internet, download the checkpoint "
                "elsewhere and set verifier.model to its directory, or train one with `garag train-verifier`."
            ) from exc
        untrained = [k for k in info.get("missing_keys", ()) if k.split(".")[0] in HEAD_PREFIXES]
        if untrained:
            raise ValueError(
                f"verifier.model: {self.model_path!r} has no trained classification head (missing "
                f"{sorted(untrained)}); it is a bare encoder, not an NLI classifier"
            )
        self._index_to_label = resolve_label_map(model.config.id2label, self.config.label_map)
        if self.config.nei_bias is not None:
            self._nei_bias = float(self.config.nei_bias)
        elif self.config.mode == "concat" and local.is_dir():
            self._nei_bias = float(read_calibration(local).get("nei_bias", 0.0))
        self._aggregator = self._load_aggregator(local if local.is_dir() else None)
        self._device = resolve_device(self.config.device)
        if self.config.precision == "bfloat16":
            import torch

            if self._device == "cpu" and cpu_has_amx_bf16() is False:
                logger.warning(
                    "verifier.precision: bfloat16 on a CPU without AMX is slower than float32 there"
                )
            model = model.to(torch.bfloat16)
        limit = getattr(tokenizer, "model_max_length", None) or _NO_LIMIT
        max_length = min(self.config.max_length, limit) if limit < _NO_LIMIT else self.config.max_length
        positions = _position_limit(model.config)
        if positions is not None and max_length > positions:  # refused before the model is kept
            raise ValueError(
                f"verifier.max_length: {self.config.max_length} tokens exceed the {positions} positions of "
                f"{self.model_path}; set it to at most {positions}"
            )
        self._max_length = max_length
        self._model = model.to(self._device).eval()
        self._tokenizer = tokenizer
        self._memory = self._memories.for_reader(self.reader())
        logger.info(
            "NLI verifier %s loaded on %s (%s) in %.1fs (labels %s, NEI bias %.2f, %s)",
            self.model_path,
            self._device,
            self.config.precision,
            time.time() - started,
            {i: lab.value for i, lab in self._index_to_label.items()},
            self._nei_bias,
            self.config.mode
            if self.config.mode == "concat"
            else f"per_sentence, {self.aggregation} aggregation",
        )
        return self

    def _load_aggregator(self, local: Path | None) -> ClaimAggregator | None:
        cfg = self.config
        if cfg.mode != "per_sentence" or cfg.aggregation == "rule":
            return None
        where = aggregator_path(local) if local is not None else f"{self.model_path} (not a local directory)"
        agg = read_aggregator(local) if local is not None else None
        problem = ""
        if agg is None:
            problem = f"no claim-level aggregator at {where}"
        elif agg.top_k != cfg.top_k:
            problem = (
                f"the aggregator at {where} was fitted for top_k={agg.top_k}, verifier.top_k is {cfg.top_k}"
            )
        if not problem:
            return agg
        if cfg.aggregation == "learned":
            raise ValueError(
                f"verifier.aggregation: 'learned' but {problem}; garag fits one beside the verifier it "
                "trains (`garag train-verifier`); use 'rule' or 'auto' for other checkpoints"
            )
        if local is not None and aggregator_path(local).exists():
            logger.warning("verifier: %s; using the max-entailment rule", problem)
        return None

    def _require_loaded(self) -> None:
        if self._model is None:
            raise RuntimeError("NLIVerifier.load() must be called before use")

    def reader(self) -> tuple:
        """What a pair's probabilities depend on besides the pair (after :meth:`load`): the checkpoint's
        files, the precision, the token limit, the device and the label order."""
        self._require_loaded()
        return (
            checkpoint_identity(self.model_path),
            self.config.precision,
            self._max_length,
            self._device,
            tuple(sorted((i, lab.value) for i, lab in self._index_to_label.items())),
        )

    def forget_pairs(self) -> None:
        """Forget the remembered pairs (of every verifier sharing this one's memory): a benchmark
        times the model, not the memory."""
        if self._memory is not None:
            self._memory.clear()

    def predict_pairs(self, premises: Sequence[str], claims: Sequence[str]) -> np.ndarray:
        """Verdict probabilities for (premise, claim) pairs.

        Pairs are sorted by length into batches of ``verifier.batch_size`` to keep
        padding small; the result is in the input order.  These are the model's
        own probabilities: the NEI bias is not applied here.

        Returns:
            ``(n, 3)`` float64 probabilities in ``LABEL_ORDER`` (SUPPORTS, NEI, REFUTES).
        """
        self._require_loaded()
        if len(premises) != len(claims):
            raise ValueError(f"{len(premises)} premises but {len(claims)} claims")
        keys = list(zip(premises, claims, strict=True))
        scored = 0

        def score(todo: list[tuple[str, str]]) -> np.ndarray:
            nonlocal scored
            scored = len(todo)
            return self._score_pairs([p for p, _ in todo], [c for _, c in todo])

        assert self._memory is not None  # load() took it from the pool with the model
        rows = self._memory.values(keys, score)  # each distinct pair not remembered is scored once
        self.pairs_scored += scored
        self.pairs_remembered += len(keys) - scored
        out = np.zeros((len(keys), len(LABEL_ORDER)), dtype=np.float64)
        if rows:
            out[:] = rows
        return out

    def _score_pairs(self, premises: list[str], claims: list[str]) -> np.ndarray:
        """The model's probabilities in ``LABEL_ORDER``, the pairs sorted by length into batches."""
        import torch

        out = np.zeros((len(premises), len(LABEL_ORDER)), dtype=np.float64)
        order = sorted(range(len(premises)), key=lambda i: len(premises[i]) + len(claims[i]), reverse=True)
        size = self.config.batch_size
        with torch.inference_mode():
            for start in range(0, len(order), size):
                idx = order[start : start + size]
                enc = encode_pairs(
                    self._tokenizer, [premises[i] for i in idx], [claims[i] for i in idx], self._max_length
                )
                logits = self._model(**enc.to(self._device)).logits
                probs = torch.softmax(logits.float(), dim=-1).cpu().numpy()
                out[idx] = to_label_probs(probs, self._index_to_label)
        return out

    def score_sentences(
        self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]]
    ) -> list[np.ndarray]:
        """Every sentence of ``evidence[i]`` scored alone against ``claims[i]``, in one batched pass.

        Returns:
            Per claim, ``(len(evidence[i]), 3)`` model probabilities in ``LABEL_ORDER``
            (no NEI bias applied).
        """
        if len(claims) != len(evidence):
            raise ValueError(f"{len(claims)} claims but {len(evidence)} evidence lists")
        pairs = [(i, e) for i, ev in enumerate(evidence) for e in ev]
        flat = self.predict_pairs([evidence_text(e) for _, e in pairs], [claims[i] for i, _ in pairs])
        bounds = np.cumsum([0] + [len(ev) for ev in evidence])
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def verify(self, claim: str, evidence: Sequence[Evidence], *, sentence_probs: bool = False) -> Verdict:
        """The verdict for one claim given ranked evidence (best first).

        Args:
            claim: the claim text.
            evidence: ranked evidence; only the first ``top_k`` are read.
            sentence_probs: concat mode only: also score each read sentence alone and
                name the strongest one in the explanation (costs ``top_k`` extra pairs).
        """
        return self.verify_batch([claim], [evidence], sentence_probs=sentence_probs)[0]

    def verify_batch(
        self,
        claims: Sequence[str],
        evidence: Sequence[Sequence[Evidence]],
        *,
        sentence_probs: bool = False,
    ) -> list[Verdict]:
        """Verdicts for many claims; ``evidence[i]`` is the ranked evidence of ``claims[i]``.

        The verdict's evidence is the given evidence ids in order (repeats dropped),
        at most five; in per_sentence mode the deciding sentence comes first.

        Raises:
            ValueError: mismatched lengths or an empty claim.
        """
        self._require_loaded()
        if len(claims) != len(evidence):
            raise ValueError(f"{len(claims)} claims but {len(evidence)} evidence lists")
        for i, claim in enumerate(claims):
            if not claim or not claim.strip():
                raise ValueError(f"claim {i} is empty")
        ranked = [unique_evidence(ev) for ev in evidence]
        if self.config.mode == "per_sentence":
            return self._verify_per_sentence(claims, ranked)
        return self._verify_concat(claims, ranked, sentence_probs)

    def _verify_concat(
        self, claims: Sequence[str], ranked: list[list[Evidence]], sentence_probs: bool
    ) -> list[Verdict]:
        top_k = self.config.top_k
        todo = [i for i, ev in enumerate(ranked) if ev]
        probs = self.predict_pairs([build_premise(ranked[i], top_k) for i in todo], [claims[i] for i in todo])
        probs = apply_nei_bias(probs, self._nei_bias)
        single: dict[int, np.ndarray] = {}
        if sentence_probs and todo:
            alone = self.score_sentences([claims[i] for i in todo], [ranked[i][:top_k] for i in todo])
            single = {i: apply_nei_bias(p, self._nei_bias) for i, p in zip(todo, alone, strict=True)}
        verdicts: list[Verdict] = [_no_evidence_verdict() for _ in claims]
        for row, i in enumerate(todo):
            scores = {lab: float(p) for lab, p in zip(LABEL_ORDER, probs[row], strict=True)}
            label = LABEL_ORDER[int(np.argmax(probs[row]))]
            verdicts[i] = Verdict(
                label=label,
                explanation=explain_concat(label, scores, ranked[i][:top_k], single.get(i)),
                evidence=tuple(e.sentence for e in ranked[i][:MAX_PREDICTED_EVIDENCE]),
                scores=scores,
            )
        return verdicts

    def _verify_per_sentence(self, claims: Sequence[str], ranked: list[list[Evidence]]) -> list[Verdict]:
        top_k = self.config.top_k
        raw = self.score_sentences(claims, [ev[:top_k] for ev in ranked])
        verdicts: list[Verdict] = []
        for claim, ev, unbiased in zip(claims, ranked, raw, strict=True):
            read = ev[:top_k]
            if not read:
                verdicts.append(_no_evidence_verdict())
                continue
            probs = apply_nei_bias(unbiased, self._nei_bias)  # the aggregator reads the unbiased ones
            agg = aggregate_sentence_probs(probs, self.config.min_confidence, self.config.nei_margin)
            label, scores = agg.label, dict(agg.scores)
            if self._aggregator is not None:
                proba = self._aggregator.predict_proba(claim_features(claim, read, unbiased, top_k))[0]
                scores = {lab: float(p) for lab, p in zip(LABEL_ORDER, proba, strict=True)}
                label = LABEL_ORDER[int(np.argmax(proba))]
                explanation = explain_learned(label, scores, agg, read)
            else:
                explanation = explain_aggregate(agg, read)
            ids = [e.sentence for e in ev]
            if label is not Label.NOT_ENOUGH_INFO:
                first = ids[agg.sentence_for(label)]
                ids = [first] + [s for s in ids if s != first]
            verdicts.append(
                Verdict(
                    label=label,
                    explanation=explanation,
                    evidence=tuple(ids[:MAX_PREDICTED_EVIDENCE]),
                    scores=scores,
                )
            )
        return verdicts


def _no_evidence_verdict() -> Verdict:
    return Verdict(
        label=Label.NOT_ENOUGH_INFO,
        explanation=explain_no_evidence(),
        evidence=(),
        scores={Label.SUPPORTS: 0.0, Label.NOT_ENOUGH_INFO: 1.0, Label.REFUTES: 0.0},
    )
