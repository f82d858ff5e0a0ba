"""A learned claim-level aggregator over per-sentence NLI probabilities.

The rule in :mod:`verifier.aggregate` (max entailment vs max contradiction)
treats every read sentence alike: a sentence from an unrelated page that
"contradicts" the claim counts as much as the claim's own page.  The
aggregator instead reads a few claim-level features (:func:`feature_names`):
the entailment and contradiction probability at each retrieval rank, their
maxima and sums, and how much of the claim the read sentences and their page
titles cover.  A multinomial logistic regression maps them to a verdict.

It is fitted on the verifier's held-out *train* claims (never on paper_dev),
two instances per claim (:func:`aggregator_instances`):

* the top-k sentences the retrievers return for the claim, labelled with the
  claim's gold label (SUPPORTS or REFUTES), whether or not retrieval found the
  evidence;
* the same ranking with the gold evidence sentences removed, labelled NOT
  ENOUGH INFO: the corpus no longer holds what decides the claim, which is
  what makes a FEVER claim NEI.

The validation set then holds twice as many NEI instances as SUPPORTS or
REFUTES; the fitted scores are corrected to equal class priors, as in FEVER's
label-balanced dev and test sets.

The aggregator is a small JSON file beside the model (``garag_aggregator.json``)
and pure numpy at prediction time; fitting uses scikit-learn's
``LogisticRegression``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from garag.artifacts import write_json_atomic
from garag.text import detokenize, page_to_title
from garag.types import Evidence, Label
from verifier.labels import LABEL_ORDER
from verifier.logistic import Softmax, fit_softmax, read_model_file, softmax_from_json, softmax_json

AGGREGATOR_FILE = "garag_aggregator.json"
# Bump when the features or the fitting recipe change: a stored aggregator of another version is refitted.
AGGREGATOR_VERSION = 1

_S = LABEL_ORDER.index(Label.SUPPORTS)
_N = LABEL_ORDER.index(Label.NOT_ENOUGH_INFO)
_R = LABEL_ORDER.index(Label.REFUTES)
_STOPWORDS = frozenset(
    "a an the of in on at to for by with from and or is was are were be been being has have had it its "
    "as that this which who whom not no only also than then there their his her he she they them one".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def feature_names(top_k: int) -> list[str]:
    """The names of :func:`claim_features`' columns for ``top_k`` read sentences."""
    ranks = [f"entail_rank{r}" for r in range(1, top_k + 1)] + [
        f"contra_rank{r}" for r in range(1, top_k + 1)
    ]
    return ranks + [
        "entail_max",
        "contra_max",
        "entail_second",
        "contra_second",
        "entail_sum",
        "contra_sum",
        "neutral_min",
        "read_share",
        "claim_coverage",
        "claim_coverage_best_entail",
        "claim_coverage_best_contra",
        "claim_coverage_best_sentence",
        "claim_numbers_missing",
        "claim_has_numbers",
        "title_in_claim_best_entail",
        "title_in_claim_best_contra",
        "title_in_claim_max",
        "best_entail_is_first",
        "best_contra_is_first",
    ]


def content_words(text: str) -> set[str]:
    """Lower-cased words and numbers of ``text`` without stop words."""
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _share(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / max(1, len(whole))


def claim_features(claim: str, evidence: Sequence[Evidence], probs: np.ndarray, top_k: int) -> np.ndarray:
    """Claim-level features of the first ``top_k`` read sentences (order of :func:`feature_names`).

    Args:
        claim: the claim text.
        evidence: the read sentences, best-ranked first (FEVER-tokenised text).
        probs: ``(len(evidence), 3)`` per-sentence probabilities in ``LABEL_ORDER``.
        top_k: the number of rank slots; sentences beyond it are ignored.

    Raises:
        ValueError: ``probs`` does not match ``evidence``.
    """
    probs = np.asarray(probs, dtype=np.float64).reshape(-1, len(LABEL_ORDER))
    if len(probs) != len(evidence):
        raise ValueError(f"{len(evidence)} evidence sentences but {len(probs)} probability rows")
    probs, evidence = probs[:top_k], list(evidence[:top_k])
    n = len(evidence)
    ranked = np.zeros((top_k, len(LABEL_ORDER)))
    ranked[:, _N] = 1.0
    ranked[:n] = probs
    f = list(ranked[:, _S]) + list(ranked[:, _R])
    claim_words = content_words(claim)
    numbers = {w for w in claim_words if w.isdigit()}
    if n == 0:  # nothing read: no probabilities, no coverage, every claim number missing
        has_numbers = float(bool(numbers))
        return np.array(
            f + [0] * 6 + [1.0] + [0] * 5 + [has_numbers, has_numbers] + [0] * 5, dtype=np.float64
        )
    entail, contra = probs[:, _S], probs[:, _R]
    second = (lambda col: float(np.sort(col)[-2])) if n > 1 else (lambda col: 0.0)
    f += [
        entail.max(),
        contra.max(),
        second(entail),
        second(contra),
        entail.sum(),
        contra.sum(),
        probs[:, _N].min(),
    ]
    f.append(n / top_k)
    titles = [content_words(page_to_title(e.sentence.page)) for e in evidence]
    sentences = [t | content_words(detokenize(e.text)) for t, e in zip(titles, evidence, strict=True)]
    every = set().union(*sentences)
    best_s, best_r = int(entail.argmax()), int(contra.argmax())
    f += [
        _share(every, claim_words),
        _share(sentences[best_s], claim_words),
        _share(sentences[best_r], claim_words),
        max(_share(s, claim_words) for s in sentences),
        len(numbers - every) / len(numbers) if numbers else 0.0,
        float(bool(numbers)),
    ]
    f += [
        _share(claim_words, titles[best_s]),
        _share(claim_words, titles[best_r]),
        max(_share(claim_words, t) for t in titles),
        float(best_s == 0),
        float(best_r == 0),
    ]
    return np.array(f, dtype=np.float64)


@dataclass
class ClaimAggregator:
    """A fitted multinomial logistic regression over :func:`claim_features`.

    Attributes:
        top_k: rank slots of the features (must equal ``verifier.top_k`` to be used).
        mean, scale: feature standardisation.
        weights: ``(n_features + 1, 3)`` weights, the last row the intercepts, columns in LABEL_ORDER.
        prior_correction: added to the scores: minus the log of the fitting data's class shares.
        info: how it was fitted (data counts, validation accuracy); informational only.
    """

    top_k: int
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    prior_correction: np.ndarray
    info: dict = field(default_factory=dict)

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        """Verdict probabilities ``(n, 3)`` in LABEL_ORDER."""
        return Softmax(self.mean, self.scale, self.weights, self.prior_correction).predict_proba(features)

    def to_json(self) -> dict:
        return {
            "version": AGGREGATOR_VERSION,
            "top_k": self.top_k,
            "features": feature_names(self.top_k),
            "labels": [lab.value for lab in LABEL_ORDER],
            **softmax_json(Softmax(self.mean, self.scale, self.weights, self.prior_correction)),
            "info": self.info,
        }

    def save(self, model_dir: str | Path) -> Path:
        path = aggregator_path(model_dir)
        write_json_atomic(path, self.to_json())
        return path

    @classmethod
    def from_json(cls, obj: dict, source: str = "aggregator") -> ClaimAggregator:
        """Raises ValueError naming ``source`` when the file is of another version or malformed."""
        if obj.get("version") != AGGREGATOR_VERSION:
            raise ValueError(
                f"{source}: version {obj.get('version')!r}, this garag reads {AGGREGATOR_VERSION}"
            )
        if "top_k" not in obj:
            raise ValueError(f"{source}: missing ['top_k']")
        top_k = int(obj["top_k"])
        if obj.get("features") != feature_names(top_k) or obj.get("labels") != [
            lab.value for lab in LABEL_ORDER
        ]:
            raise ValueError(f"{source}: its features or labels differ from this garag's")
        m = softmax_from_json(obj, source, len(feature_names(top_k)), len(LABEL_ORDER))
        return cls(top_k, m.mean, m.scale, m.weights, m.prior_correction, dict(obj.get("info", {})))


def aggregator_path(model_dir: str | Path) -> Path:
    """Where the aggregator of the model in ``model_dir`` is stored (whether or not it exists)."""
    return Path(model_dir) / AGGREGATOR_FILE


def read_aggregator(model_dir: str | Path) -> ClaimAggregator | None:
    """The aggregator stored beside a model, or None when there is none (or of another version)."""
    path = aggregator_path(model_dir)
    obj = read_model_file(path, AGGREGATOR_VERSION)
    return None if obj is None else ClaimAggregator.from_json(obj, str(path))


def fit_aggregator(
    features: np.ndarray, labels: Sequence[Label], top_k: int, l2: float = 1e-2
) -> ClaimAggregator:
    """Fit the multinomial logistic regression with scikit-learn (L-BFGS; deterministic).

    The objective is the mean cross-entropy plus ``l2 / 2`` times the squared
    weights of the standardised features (the intercepts are not penalised),
    i.e. scikit-learn's ``C = 1 / (l2 * n)``.

    Args:
        features: ``(n, n_features)`` rows of :func:`claim_features`.
        labels: the gold verdict of each row; every class must occur.
        top_k: the features' rank slots.
        l2: weight decay on the (standardised) feature weights, not the intercepts; > 0.
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(labels) or x.shape[1] != len(feature_names(top_k)):
        raise ValueError(f"features {x.shape} do not match {len(labels)} labels and top_k={top_k}")
    fitted = fit_softmax(x, [LABEL_ORDER.index(lab) for lab in labels], len(LABEL_ORDER), l2)
    return ClaimAggregator(
        top_k=top_k,
        mean=fitted.mean,
        scale=fitted.scale,
        weights=fitted.weights,
        prior_correction=fitted.prior_correction,
        info={
            "examples": {lab.value: c for lab, c in zip(LABEL_ORDER, fitted.counts, strict=True)},
            "l2": l2,
            "solver": "sklearn-lbfgs",
        },
    )


def balanced_accuracy(gold: Sequence[Label], predicted: Sequence[Label]) -> float:
    """Mean over the gold classes present of the share predicted right (recall averaged)."""
    if len(gold) != len(predicted) or not gold:
        raise ValueError(f"need equal, non-empty label lists, got {len(gold)} and {len(predicted)}")
    recalls = []
    for lab in LABEL_ORDER:
        idx = [i for i, g in enumerate(gold) if g is lab]
        if idx:
            recalls.append(sum(predicted[i] is lab for i in idx) / len(idx))
    return float(np.mean(recalls))
