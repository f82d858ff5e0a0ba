"""The claim's verdict: one learned, calibrated decision over the verifier's output and explicit
features of the claim and the evidence read.

A verifier (:mod:`verifier.registry`) reads the claim and its evidence and gives label scores.
Those scores carry FEVER's claim-only biases: a fine-tuned NLI model reads "not" as refutation
(Schuster et al., EMNLP 2019), and a claim whose names all occur in the evidence but whose year,
polarity or relation was changed often passes.  The decision model reads, beside the verifier's
three scores, features a verifier does not weigh on its own (:data:`FEATURES`):

* **polarity**: whether the claim's main clause is negated and, where it is, the NLI
  probabilities of its positive form ("X was not American" -> "X was American",
  :func:`garag.polarity.remove_negation`) against the same sentences; whether the deciding
  sentences are negated;
* **names**: how many of the claim's names (spaCy entities and proper-noun runs,
  :func:`verifier.entity_check.claim_names`) no sentence read names;
* **numbers**: the claim's numbers missing from the sentences read, and whether the sentence
  covering most of the claim states another number of the same kind (a year for a year);
* **parts**: the claim's simple facts (the rule decomposer's sub-claims, given by the pipeline),
  each scored by NLI against every sentence read: the weakest part's best entailment, the
  mean, the strongest contradiction of any part, the share of parts entailed;
* **graph coverage**: the co-mention graph of the sentences read (a sentence joins the claim's
  names it mentions, its page title included): whether the claim's names and each part's names
  are connected in it, the link multi-hop claims need;
* whether the claim has several parts, and the missing names and the weakest part for such claims
  alone (HoVer's claims are of several parts; FEVER's mostly of one);
* **the claim's length** (``long_claim``: 0 up to :data:`SHORT_WORDS` words, 1 from
  :data:`LONG_WORDS`, linear between), which selects the weights: every feature has one weight for
  short claims and one for long ones, blended by it.  A single fact and a chain of 2-4 facts read
  the same evidence differently (a chain's parts are entailed by different sentences, none of
  which entails it whole; a name of the chain that no sentence names is the commonest sign of a
  substituted one), and one set of weights fitted on both serves neither.

A multinomial logistic regression maps them to SUPPORTS / REFUTES / NOT ENOUGH INFO, fitted on
training data only (FEVER train claims the verifier did not train on, their contrast twins and
compositions: :mod:`training.decision`), corrected to equal class priors.  Its label is final: on
3-way data the likeliest label; on 2-way data (HoVer) SUPPORTS when its probability is at least
that of the other two together, else the likelier of them, from the same model, with no threshold
picked on evaluation claims.  Nothing after it changes the label
(``tests/pipeline/test_verification_e2e.py::test_the_decision_models_label_is_final_on_every_path``).

The model is a small JSON file beside garag's trained verifier (``garag_decision.json``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from garag.artifacts import write_json_atomic
from garag.claim_parse import parse_claims
from garag.polarity import NEGATIVE_WORDS, remove_negation
from garag.text import detokenize, page_to_title
from garag.types import Evidence, Label, Verdict
from verifier.claim_aggregator import content_words
from verifier.entity_check import SKIPPED_TYPES, claim_names, evidence_words, missing_entities, words
from verifier.labels import LABEL_ORDER
from verifier.logistic import Softmax, fit_softmax, read_model_file, softmax_from_json, softmax_json

DECISION_FILE = "garag_decision.json"
# Bump when the features or the fitting recipe change: a stored model of another version is refitted.
# 4: the sub-claims read as sentences (pipeline/decompose.py: _tidy, _states_something); 5 and 6 were
# tried and not adopted (docs/results.md); 7: a second clause whose subject the parser joined to the
# first clause's object is its own part (pipeline/decompose.py: _run_on_subjects)
DECISION_VERSION = 7
FEATURES = (
    "verifier_supports",
    "verifier_refutes",
    "verifier_nei",
    "entail_max",
    "contra_max",
    "entail_sum",
    "contra_sum",
    "claim_negated",
    "positive_form",
    "negated_verifier_supports",
    "negated_verifier_refutes",
    "negated_entail_max",
    "negated_contra_max",
    "positive_entail_max",
    "positive_contra_max",
    "evidence_negated",
    "names",
    "names_missing",
    "numbers",
    "numbers_missing",
    "numbers_conflict",
    "parts",
    "parts_entail_min",
    "parts_entail_mean",
    "parts_contra_max",
    "parts_entailed",
    "names_connected",
    "parts_connected",
    "read",
    "multi_part",
    "multi_part_names_missing",
    "multi_part_entail_min",
    "long_claim",
)
# The claim lengths between which the long-claim weights take over from the short-claim ones: the 90th
# percentile of the FEVER train claims the decision is fitted on (11 words), and the median of its
# corpus bridges (training/bridges.py: 24 words, HoVer's kind of claim).
SHORT_WORDS = 11
LONG_WORDS = 24
_S = LABEL_ORDER.index(Label.SUPPORTS)
_N = LABEL_ORDER.index(Label.NOT_ENOUGH_INFO)
_R = LABEL_ORDER.index(Label.REFUTES)
_MAX_NAMES = 6
_MAX_PARTS = 4
# Scores (claim texts, evidence lists) -> per claim ``(len(evidence), 3)`` NLI probabilities.
SentenceScorer = Callable[[Sequence[str], Sequence[Sequence[Evidence]]], list[np.ndarray]]


@dataclass(frozen=True)
class DecisionCase:
    """What the decision reads for one claim.

    Attributes:
        claim: the claim text.
        evidence: the sentences the verdict rests on, best first.
        verdict: the verifier's verdict (its ``scores`` are read).
        parts: the claim's simple facts; empty = the claim is its only part.
    """

    claim: str
    evidence: tuple[Evidence, ...]
    verdict: Verdict
    parts: tuple[str, ...] = ()


class DecisionFeatures:
    """Computes :data:`FEATURES` for a batch of cases.

    Args:
        scorer: per-sentence NLI probabilities (e.g. ``NLIVerifier.score_sentences``).
        spacy_model: the spaCy pipeline that parses claims (polarity, names).
        top_k: the sentences read per claim (the rest of ``evidence`` is ignored).
    """

    def __init__(self, scorer: SentenceScorer, spacy_model: str, top_k: int) -> None:
        self.scorer = scorer
        self.spacy_model = spacy_model
        self.top_k = top_k

    def __call__(self, cases: Sequence[DecisionCase]) -> tuple[np.ndarray, list[dict]]:
        """The feature rows and, per case, what explains them (the positive form, missing names).

        Returns:
            ``(len(cases), len(FEATURES))`` features and per-case notes.
        """
        claims = [c.claim for c in cases]
        read = [tuple(c.evidence[: self.top_k]) for c in cases]
        parsed = parse_claims(claims, self.spacy_model) if cases else []
        negated = [any(t.lower in NEGATIVE_WORDS for t in p.toks) for p in parsed]
        positive = [
            (made[0] if (made := remove_negation(p, Label.SUPPORTS)) else None) if neg else None
            for p, neg in zip(parsed, negated, strict=True)
        ]
        parts = [[p for p in c.parts[:_MAX_PARTS] if p != c.claim] for c in cases]
        # one NLI pass over the claims, their positive forms and their parts
        jobs: list[tuple[str, tuple[Evidence, ...]]] = [(c, ev) for c, ev in zip(claims, read, strict=True)]
        jobs += [(pos, ev) for pos, ev in zip(positive, read, strict=True) if pos is not None]
        jobs += [(part, ev) for ps, ev in zip(parts, read, strict=True) for part in ps]
        scored = iter(self.scorer([t for t, _ in jobs], [ev for _, ev in jobs]) if jobs else [])
        own = [next(scored) for _ in cases]
        pos_probs = [next(scored) if pos is not None else None for pos in positive]
        part_probs = [[next(scored) for _ in ps] for ps in parts]
        names = [claim_names(p) for p in parsed]  # from the same parse as the polarity
        rows, notes = [], []
        for i, case in enumerate(cases):
            row, note = _row(
                case,
                read[i],
                own[i],
                negated[i],
                positive[i],
                pos_probs[i],
                [own[i]] + part_probs[i] if part_probs[i] else [own[i]],
                [case.claim] + parts[i] if parts[i] else [case.claim],
                [(t, k) for t, k in names[i] if k not in SKIPPED_TYPES],
                self.top_k,
            )
            rows.append(row)
            notes.append(note)
        return np.array(rows, dtype=np.float64).reshape(len(cases), len(FEATURES)), notes


def _col(probs: np.ndarray, j: int) -> np.ndarray:
    return probs[:, j] if len(probs) else np.zeros(1)


def _row(
    case: DecisionCase,
    read: tuple[Evidence, ...],
    probs: np.ndarray,
    negated: bool,
    positive: str | None,
    pos_probs: np.ndarray | None,
    part_probs: list[np.ndarray],
    part_texts: list[str],
    names: list[tuple[str, str]],
    top_k: int,
) -> tuple[list[float], dict]:
    scores = case.verdict.scores
    vs, vr = float(scores.get(Label.SUPPORTS, 0.0)), float(scores.get(Label.REFUTES, 0.0))
    vn = float(scores.get(Label.NOT_ENOUGH_INFO, 0.0))
    entail, contra = _col(probs, _S), _col(probs, _R)
    neg = float(negated)
    pos_e = float(_col(pos_probs, _S).max()) if pos_probs is not None else 0.0
    pos_c = float(_col(pos_probs, _R).max()) if pos_probs is not None else 0.0
    texts = [detokenize(e.text) for e in read]
    deciding = {int(entail.argmax()), int(contra.argmax())} if read else set()
    evidence_negated = any(
        w in NEGATIVE_WORDS for i in deciding for w in texts[i].lower().replace("n't", " n't").split()
    )
    found = evidence_words(read)
    missing = missing_entities(names, found)
    numbers_missing, conflict, n_numbers = _numbers(case.claim, read, texts)
    part_entail = [float(_col(p, _S).max()) for p in part_probs]
    part_contra = [float(_col(p, _R).max()) for p in part_probs]
    connected, parts_connected = _connected(names, part_texts, read, texts)
    row = [
        vs,
        vr,
        vn,
        float(entail.max()),
        float(contra.max()),
        float(entail.sum()),
        float(contra.sum()),
        neg,
        float(positive is not None),
        neg * vs,
        neg * vr,
        neg * float(entail.max()),
        neg * float(contra.max()),
        pos_e,
        pos_c,
        float(evidence_negated),
        min(len(names), _MAX_NAMES) / _MAX_NAMES,
        len(missing) / len(names) if names else 0.0,
        float(n_numbers > 0),
        numbers_missing,
        conflict,
        len(part_texts) / _MAX_PARTS,
        min(part_entail),
        float(np.mean(part_entail)),
        max(part_contra),
        float(np.mean([e >= 0.5 for e in part_entail])),
        connected,
        parts_connected,
        len(read) / top_k,
    ]
    # a claim of several parts (HoVer's kind) may weigh its names and weakest part otherwise
    multi = float(len(part_texts) > 1)
    row += [multi, multi * row[FEATURES.index("names_missing")], multi * min(part_entail)]
    row.append(long_claim(case.claim))
    return row, {"positive_form": positive, "missing_names": missing}


def long_claim(claim: str) -> float:
    """0 for a claim of up to :data:`SHORT_WORDS` words, 1 from :data:`LONG_WORDS`, linear between."""
    words = len(claim.split())
    return float(min(max((words - SHORT_WORDS) / (LONG_WORDS - SHORT_WORDS), 0.0), 1.0))


def by_length(features: np.ndarray) -> np.ndarray:
    """Each feature twice, times ``1 - long_claim`` and times ``long_claim``: the design matrix whose
    weights are the short claims' and the long claims' (``(n, 2 * len(FEATURES))``)."""
    x = np.atleast_2d(np.asarray(features, dtype=np.float64))
    g = x[:, [FEATURES.index("long_claim")]]
    return np.hstack([x * (1.0 - g), x * g])


def _numbers(claim: str, read: Sequence[Evidence], texts: Sequence[str]) -> tuple[float, float, int]:
    """Share of the claim's numbers in no sentence read; 1.0 when the sentence covering most of the
    claim's words states another number of the same kind (four digits: a year) instead."""
    claim_words = content_words(claim)
    numbers = {w for w in claim_words if w.isdigit()}
    if not numbers:
        return 0.0, 0.0, 0
    sets = [
        content_words(page_to_title(e.sentence.page)) | content_words(t)
        for e, t in zip(read, texts, strict=True)
    ]
    every = set().union(*sets) if sets else set()
    absent = numbers - every
    conflict = 0.0
    if absent and sets:
        best = max(range(len(sets)), key=lambda i: len(sets[i] & claim_words))
        kinds = {len(w) == 4 for w in absent}
        conflict = float(any(w.isdigit() and (len(w) == 4) in kinds and w not in numbers for w in sets[best]))
    return len(absent) / len(numbers), conflict, len(numbers)


def _connected(
    names: list[tuple[str, str]], part_texts: list[str], read: Sequence[Evidence], texts: Sequence[str]
) -> tuple[float, float]:
    """Whether the claim's names found in the sentences read are one component of their co-mention
    graph (1.0; 1/components otherwise; 0 with none found), and the share of parts whose names are
    all found and connected."""
    if not names:
        return 1.0, 1.0
    sentence_words = [
        set(words(page_to_title(e.sentence.page))) | set(words(t)) for e, t in zip(read, texts, strict=True)
    ]
    parent = {n: n for n, _ in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    found: set[str] = set()
    for ws in sentence_words:
        here = [n for n, k in names if not missing_entities([(n, k)], ws)]
        found.update(here)
        for a, b in zip(here, here[1:], strict=False):
            parent[root(a)] = root(b)
    components = {root(n) for n in found}
    whole = 0.0 if not found else 1.0 / len(components)
    per_part = []
    for text in part_texts:
        inside = [n for n, _ in names if n in text]
        per_part.append(float(all(n in found for n in inside) and len({root(n) for n in inside}) <= 1))
    return whole, float(np.mean(per_part))


@dataclass
class DecisionModel:
    """The fitted decision: a :class:`verifier.logistic.Softmax` over :data:`FEATURES` taken twice,
    for short and for long claims (:func:`by_length`).

    Attributes:
        top_k: the sentences read per claim when it was fitted (must equal ``verifier.top_k``).
        model: the regression.
        info: how it was fitted (data counts, held-out accuracy and calibration); informational.
    """

    top_k: int
    model: Softmax
    info: dict = field(default_factory=dict)

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        """Verdict probabilities ``(n, 3)`` in LABEL_ORDER."""
        return self.model.predict_proba(by_length(features))

    def decide(
        self, cases: Sequence[DecisionCase], features: np.ndarray, notes: Sequence[dict], *, two_way: bool
    ) -> list[Verdict]:
        """The final verdicts: the model's label and probabilities, the verifier's evidence, and the
        verifier's explanation followed by what moved the decision most."""
        probs = self.predict_proba(features)
        out = []
        for case, p, x, note in zip(cases, probs, features, notes, strict=True):
            label = decision_label(p, two_way=two_way)
            scores = {lab: float(v) for lab, v in zip(LABEL_ORDER, p, strict=True)}
            explanation = f"{case.verdict.explanation} {self._explain(label, p, x, note)}".strip()
            out.append(Verdict(label, explanation, case.verdict.evidence, scores))
        return out

    def _explain(self, label: Label, p: np.ndarray, x: np.ndarray, note: dict) -> str:
        both = self.model.contributions(by_length(x)[0], LABEL_ORDER.index(label))
        terms = both[: len(FEATURES)] + both[len(FEATURES) :]  # a feature's short and long weights
        # each named with its value: a feature weighs by its distance from the fitting data's mean, so
        # "claim_negated 0" (a claim that is not negated) can move a label as much as a 1 does
        top = [f"{FEATURES[j]} {x[j]:.2g}" for j in np.argsort(-terms)[:2] if terms[j] > 0]
        said = ", ".join(f"{lab.value} {v:.2f}" for lab, v in zip(LABEL_ORDER, p, strict=True))
        text = f"Decision: {label.value} ({said}); weighed most: {', '.join(top) or 'the intercepts'}."
        if note.get("positive_form"):
            text += f' Positive form read: "{note["positive_form"]}".'
        if note.get("missing_names"):
            text += (
                " Names no sentence read names: " + ", ".join(f'"{m}"' for m in note["missing_names"]) + "."
            )
        return text

    def to_json(self) -> dict:
        return {
            "version": DECISION_VERSION,
            "top_k": self.top_k,
            "features": list(FEATURES),
            "labels": [lab.value for lab in LABEL_ORDER],
            **softmax_json(self.model),
            "info": self.info,
        }

    def save(self, model_dir: str | Path) -> Path:
        path = decision_path(model_dir)
        write_json_atomic(path, self.to_json())
        return path

    @classmethod
    def from_json(cls, obj: dict, source: str) -> DecisionModel:
        """Raises ValueError naming ``source`` when the file is of another version or malformed."""
        if obj.get("version") != DECISION_VERSION:
            raise ValueError(f"{source}: version {obj.get('version')!r}, this garag reads {DECISION_VERSION}")
        if obj.get("features") != list(FEATURES) or obj.get("labels") != [lab.value for lab in LABEL_ORDER]:
            raise ValueError(f"{source}: its features or labels differ from this garag's")
        try:
            top_k = int(obj["top_k"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{source}: missing or malformed top_k ({exc})") from exc
        model = softmax_from_json(obj, source, 2 * len(FEATURES), len(LABEL_ORDER))
        return cls(top_k, model, dict(obj.get("info", {})))


def decision_label(probs: np.ndarray, *, two_way: bool) -> Label:
    """3-way: the likeliest label.  2-way: SUPPORTS when its probability is at least the other two
    together (the Bayes decision for SUPPORTED vs NOT_SUPPORTED), else the likelier of them."""
    if two_way:
        if probs[_S] >= probs[_R] + probs[_N]:
            return Label.SUPPORTS
        return Label.REFUTES if probs[_R] > probs[_N] else Label.NOT_ENOUGH_INFO
    return LABEL_ORDER[int(np.argmax(probs))]


def fit_decision(
    features: np.ndarray, labels: Sequence[Label], top_k: int, l2: float = 1e-2
) -> DecisionModel:
    """Fit the decision model on feature rows and their gold labels (every label must occur)."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURES):
        raise ValueError(f"features {x.shape} are not rows of {len(FEATURES)} decision features")
    fitted = fit_softmax(by_length(x), [LABEL_ORDER.index(lab) for lab in labels], len(LABEL_ORDER), l2)
    counts = {lab.value: c for lab, c in zip(LABEL_ORDER, fitted.counts, strict=True)}
    return DecisionModel(top_k, fitted, {"examples": counts, "l2": l2})


def decision_path(model_dir: str | Path) -> Path:
    """Where the decision model of the verifier in ``model_dir`` is stored (whether or not it exists)."""
    return Path(model_dir) / DECISION_FILE


def read_decision(model_dir: str | Path) -> DecisionModel | None:
    """The decision model stored beside a verifier, or None when there is none (or of another version)."""
    path = decision_path(model_dir)
    obj = read_model_file(path, DECISION_VERSION)
    return None if obj is None else DecisionModel.from_json(obj, str(path))


def expected_calibration_error(probs: np.ndarray, gold: Sequence[int], bins: int = 10) -> float:
    """ECE of the top label's probability: |accuracy - confidence| averaged over equal-width bins,
    weighted by their share of rows."""
    probs = np.asarray(probs)
    conf, pred = probs.max(axis=1), probs.argmax(axis=1)
    right = pred == np.asarray(gold)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            total += inside.mean() * abs(right[inside].mean() - conf[inside].mean())
    return float(total)


class Decider:
    """The decision step of a pipeline: the model, its features and the claim's parts.

    Args:
        model: the fitted decision model.
        features: the feature maker (its scorer is the pipeline's NLI verifier).
        parts: claims -> each one's simple facts (the rule decomposer's sub-claims,
            ``RuleDecomposer.subclaims_batch``); None: each claim alone.
    """

    def __init__(
        self,
        model: DecisionModel,
        features: DecisionFeatures,
        parts: Callable[[Sequence[str]], list[list[str]]] | None,
    ) -> None:
        self.model = model
        self.features = features
        self.parts = parts

    def decide(
        self,
        claims: Sequence[str],
        evidence: Sequence[Sequence[Evidence]],
        verdicts: Sequence[Verdict],
        *,
        two_way: bool,
    ) -> list[Verdict]:
        """The final verdicts of a batch; ``evidence[i]`` is what ``verdicts[i]`` rests on."""
        parts = self.parts(claims) if self.parts else [[] for _ in claims]
        cases = [
            DecisionCase(c, tuple(ev), v, tuple(ps))
            for c, ev, v, ps in zip(claims, evidence, verdicts, parts, strict=True)
        ]
        if not cases:
            return []
        features, notes = self.features(cases)
        return self.model.decide(cases, features, notes, two_way=two_way)


def decision_for(setting: str, model_path: str, top_k: int) -> DecisionModel | None:
    """The decision model for ``verifier.decision`` (``setting``) beside the verifier at
    ``model_path``, or None where the verifier's own label is the verdict ("verifier", or "auto"
    beside a checkpoint with no decision model).

    Raises:
        ValueError: "learned" with no decision model beside the checkpoint, or one fitted for another
            ``verifier.top_k`` (one line naming the file).
    """
    if setting == "verifier":
        return None
    local = Path(model_path).expanduser()
    model = read_decision(local) if local.is_dir() else None
    if model is None:
        if setting == "learned":
            raise ValueError(
                f"verifier.decision: 'learned' but there is no decision model at {decision_path(local)}; "
                "garag fits one beside the verifier it trains (`garag train-verifier`); use 'auto' or "
                "'verifier' for other checkpoints"
            )
        return None
    if model.top_k != top_k:
        raise ValueError(
            f"{decision_path(local)}: fitted for verifier.top_k {model.top_k}, the config reads {top_k}"
        )
    return model
