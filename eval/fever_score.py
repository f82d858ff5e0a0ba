"""The official FEVER score, re-implemented, plus per-class label metrics.

This module reproduces the semantics of the official scorer
(sheffieldnlp/fever-scorer, ``src/fever/scorer.py``, the version with
``max_evidence``) function by function, on the same raw dicts:

* prediction: ``{"predicted_label": str, "predicted_evidence": [[page, line], ...]}``,
  optionally with the gold ``"label"`` and ``"evidence"`` copied in;
* gold (``actual``): ``{"label": str, "evidence": [[[ann_id, ev_id, page, line], ...], ...]}``.

Scores are identical to the official scorer's on every well-formed input.
Deliberate differences, all on inputs the official code mishandles:

* bad input raises ``ValueError`` naming the prediction's index, where the
  official code uses ``assert`` (stripped under ``python -O``) or lets a
  ``KeyError`` escape;
* the evidence format (a list of ``[page: str, line: int]`` lists; ``bool`` is
  not a line number) is checked for every prediction, not only for those whose
  label is correct, so a malformed prediction cannot silently score 0;
* inputs are never mutated (the official code writes the gold fields into the
  prediction dicts in blind mode, and truncates ``predicted_evidence`` in place);
* F1 is 0.0 when precision + recall == 0 (the official code raises
  ``ZeroDivisionError``), and an empty prediction list raises ``ValueError``.

Official quirk kept for its effect: ``evidence_macro_recall`` tests
``all([len(eg) == 0 for eg in instance])``, which iterates the *keys* of the
instance dict (non-empty strings), so that test is always false.  Only
``len(evidence) == 0`` gives the early ``(1, 1)``.  It changes no score: a
claim whose groups are all empty still gets recall 1, because an empty group is
trivially "wholly retrieved" in the loop that follows.

The typed API (``FeverPrediction``, ``FeverScores``, ``score_claims``) converts
``Claim`` objects to the raw dicts and runs the same functions, so both paths
give the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from garag.types import Claim, SentenceId

NEI = "NOT ENOUGH INFO"


# --- raw-dict API (official semantics)


def _where(index: int | None) -> str:
    return "prediction" if index is None else f"prediction {index}"


def _get(instance: Mapping[str, Any], key: str, index: int | None) -> Any:
    if not isinstance(instance, Mapping):
        raise ValueError(f"{_where(index)}: expected a dict, got {type(instance).__name__}")
    if key not in instance:
        raise ValueError(f"{_where(index)}: missing field {key!r}")
    return instance[key]


def _label(instance: Mapping[str, Any], key: str, index: int | None) -> str:
    value = _get(instance, key, index)
    if isinstance(value, Enum):
        value = value.value
    if not isinstance(value, str):
        raise ValueError(f"{_where(index)}: field {key!r} must be a string, got {value!r}")
    return value.upper()


def _truncate(predicted: list, max_evidence: int | None) -> list:
    if max_evidence is None:
        return list(predicted)
    if isinstance(max_evidence, bool) or not isinstance(max_evidence, int) or max_evidence < 0:
        raise ValueError(f"max_evidence must be None or an int >= 0, got {max_evidence!r}")
    return list(predicted[:max_evidence])


def _gold_pairs(group: Any, index: int | None) -> list[list]:
    """The ``[page, line]`` pairs of one gold evidence group (annotation ids dropped)."""
    if not isinstance(group, (list, tuple)):
        raise ValueError(f"{_where(index)}: gold evidence group {group!r} is not a list")
    pairs = []
    for e in group:
        if not isinstance(e, (list, tuple)) or len(e) < 4:
            raise ValueError(f"{_where(index)}: gold evidence item {e!r} is not [ann_id, ev_id, page, line]")
        pairs.append([e[2], e[3]])
    return pairs


def _gold_groups(instance: Mapping[str, Any], index: int | None) -> list:
    groups = _get(instance, "evidence", index)
    if not isinstance(groups, (list, tuple)):
        raise ValueError(f"{_where(index)}: gold 'evidence' must be a list of groups, got {groups!r}")
    return list(groups)


def check_predicted_evidence_format(instance: Mapping[str, Any], index: int | None = None) -> None:
    """Check that ``predicted_evidence`` (if present) is a list of ``[page: str, line: int]`` lists.

    Args:
        instance: one prediction dict.
        index: position of the prediction, used in the error message.

    Raises:
        ValueError: naming the prediction and the offending item.
    """
    if not isinstance(instance, Mapping):
        raise ValueError(f"{_where(index)}: expected a dict, got {type(instance).__name__}")
    if "predicted_evidence" not in instance:
        return
    predicted = instance["predicted_evidence"]
    if not isinstance(predicted, (list, tuple)):
        raise ValueError(f"{_where(index)}: 'predicted_evidence' must be a list of [page, line] lists")
    for j, item in enumerate(predicted):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        ):
            raise ValueError(
                f"{_where(index)}: predicted_evidence item {j} is {item!r}, "
                "expected a [page: str, line: int] list"
            )


def is_correct_label(instance: Mapping[str, Any]) -> bool:
    """Case-insensitive comparison of ``label`` and ``predicted_label``."""
    return _label(instance, "label", None) == _label(instance, "predicted_label", None)


def is_strictly_correct(instance: Mapping[str, Any], max_evidence: int | None = None) -> bool:
    """The official strict criterion for one prediction.

    NEI needs only the correct label.  SUPPORTS/REFUTES need the correct label
    and one whole gold evidence group inside the first ``max_evidence``
    predicted sentences (all of them when None).

    Raises:
        ValueError: a malformed prediction, or a correct non-NEI label without
            ``predicted_evidence``.
    """
    check_predicted_evidence_format(instance)
    gold = _label(instance, "label", None)
    correct = is_correct_label(instance)
    if gold != NEI and correct:
        if "predicted_evidence" not in instance:
            raise ValueError("prediction: predicted evidence must be provided for strict scoring")
        predicted = _truncate(instance["predicted_evidence"], max_evidence)
        for group in _gold_groups(instance, None):
            if all(pair in predicted for pair in _gold_pairs(group, None)):
                return True
    elif gold == NEI and correct:
        return True
    return False


def evidence_macro_precision(
    instance: Mapping[str, Any], max_evidence: int | None = None
) -> tuple[float, float]:
    """Precision of one prediction's evidence as ``(value, weight)``.

    NEI gold gives ``(0, 0)`` (not counted).  Otherwise the share of the first
    ``max_evidence`` predicted sentences that are gold (any group; pointers
    whose line is None are ignored), or 1.0 when nothing was predicted.
    """
    if _label(instance, "label", None) == NEI:
        return 0.0, 0.0
    all_evi = [
        pair
        for group in _gold_groups(instance, None)
        for pair in _gold_pairs(group, None)
        if pair[1] is not None
    ]
    predicted = _truncate(_get(instance, "predicted_evidence", None), max_evidence)
    hits = sum(1.0 for prediction in predicted if prediction in all_evi)
    return (hits / len(predicted) if predicted else 1.0), 1.0


def evidence_macro_recall(
    instance: Mapping[str, Any], max_evidence: int | None = None
) -> tuple[float, float]:
    """Recall of one prediction's evidence as ``(value, weight)``.

    NEI gold gives ``(0, 0)`` (not counted).  Otherwise 1 when no gold evidence
    exists or when one whole gold group lies in the first ``max_evidence``
    predicted sentences, else 0: incomplete groups are worth nothing.  See the
    module docstring for the official key-iteration quirk this reproduces.
    """
    if _label(instance, "label", None) == NEI:
        return 0.0, 0.0
    groups = _gold_groups(instance, None)
    # The official `all([len(eg) == 0 for eg in instance])` iterates dict keys and is never true.
    if len(groups) == 0:
        return 1.0, 1.0
    predicted = _truncate(_get(instance, "predicted_evidence", None), max_evidence)
    for group in groups:
        if all(pair in predicted for pair in _gold_pairs(group, None)):
            return 1.0, 1.0
    return 0.0, 1.0


def _with_gold(
    instance: Mapping[str, Any], idx: int, actual: Sequence[Mapping[str, Any]] | None, n: int
) -> dict:
    """A copy of the prediction with the gold fields, taken from ``actual[idx]`` in blind mode."""
    merged = dict(instance)
    if "evidence" not in instance or "label" not in instance:
        if actual is None:
            raise ValueError(
                f"{_where(idx)}: no gold label/evidence; in blind mode, actual data must be provided"
            )
        if len(actual) != n:
            raise ValueError(f"actual data and predicted data length must match ({len(actual)} != {n})")
        gold = actual[idx]
        _get(gold, "evidence", idx)
        merged["evidence"] = gold["evidence"]
        merged["label"] = _get(gold, "label", idx)
    return merged


def _f1(precision: float, recall: float) -> float:
    return 2.0 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def fever_score(
    predictions: Sequence[Mapping[str, Any]],
    actual: Sequence[Mapping[str, Any]] | None = None,
    max_evidence: int | None = 5,
) -> tuple[float, float, float, float, float]:
    """The official FEVER score over raw prediction dicts.

    Args:
        predictions: one dict per claim with ``predicted_label`` and
            ``predicted_evidence``; if a dict lacks ``label`` or ``evidence``
            both are taken from ``actual`` at the same position (blind mode).
        actual: gold dicts, paired with ``predictions`` by position.
        max_evidence: only the first this-many predicted sentences count
            (None: all).  FEVER's leaderboard uses 5.

    Returns:
        ``(strict, accuracy, precision, recall, f1)``: strict is the FEVER
        score; precision and recall are macro-averaged over non-NEI claims.

    Raises:
        ValueError: empty or malformed input, naming the prediction's index.
    """
    if len(predictions) == 0:
        raise ValueError("no predictions to score")
    _truncate([], max_evidence)  # validates max_evidence up front
    correct = strict = 0.0
    precision_sum = precision_hits = recall_sum = recall_hits = 0.0
    for idx, instance in enumerate(predictions):
        _get(instance, "predicted_evidence", idx)
        _label(instance, "predicted_label", idx)
        check_predicted_evidence_format(instance, idx)
        merged = _with_gold(instance, idx, actual, len(predictions))
        _label(merged, "label", idx)
        _gold_groups(merged, idx)
        try:
            if is_correct_label(merged):
                correct += 1.0
                if is_strictly_correct(merged, max_evidence):
                    strict += 1.0
            p = evidence_macro_precision(merged, max_evidence)
            r = evidence_macro_recall(merged, max_evidence)
        except ValueError as e:
            raise ValueError(f"{_where(idx)}: {str(e).removeprefix('prediction: ')}") from e
        precision_sum, precision_hits = precision_sum + p[0], precision_hits + p[1]
        recall_sum, recall_hits = recall_sum + r[0], recall_hits + r[1]
    total = len(predictions)
    precision = precision_sum / precision_hits if precision_hits > 0 else 1.0
    recall = recall_sum / recall_hits if recall_hits > 0 else 0.0
    return strict / total, correct / total, precision, recall, _f1(precision, recall)


# --- typed API


@dataclass(frozen=True)
class FeverPrediction:
    """A system's output for one claim, in FEVER's terms.

    Attributes:
        label: the predicted label string (a ``Label`` is accepted and stored as its value).
        evidence: predicted sentences, best first; only the first ``max_evidence`` count.
    """

    label: str
    evidence: tuple[SentenceId, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.label, Enum):
            object.__setattr__(self, "label", self.label.value)
        if not isinstance(self.label, str):
            raise ValueError(f"FeverPrediction.label must be a string, got {self.label!r}")
        evidence = tuple(self.evidence)
        bad = [e for e in evidence if not isinstance(e, SentenceId)]
        if bad:
            raise ValueError(f"FeverPrediction.evidence must hold SentenceId objects, got {bad[0]!r}")
        object.__setattr__(self, "evidence", evidence)

    def to_json(self) -> dict:
        """The official prediction dict (``predicted_label``, ``predicted_evidence``)."""
        return {"predicted_label": self.label, "predicted_evidence": [e.to_json() for e in self.evidence]}


@dataclass(frozen=True)
class FeverScores:
    """The official FEVER metrics for a set of claims.

    Attributes:
        strict: FEVER score (correct label and, for non-NEI, a whole gold group in the top ``max_evidence``).
        accuracy: label accuracy.
        precision: macro evidence precision over non-NEI claims.
        recall: macro evidence recall over non-NEI claims (whole groups only).
        f1: harmonic mean of precision and recall (0.0 when both are 0).
        n: number of claims scored.
    """

    strict: float
    accuracy: float
    precision: float
    recall: float
    f1: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "strict": self.strict,
            "accuracy": self.accuracy,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "n": self.n,
        }


def claim_to_actual(claim: Claim) -> dict:
    """The official gold dict for a labelled claim (annotation ids are None).

    Raises:
        ValueError: the claim has no label.
    """
    if claim.label is None:
        raise ValueError(f"claim {claim.id!r} has no gold label and cannot be scored")
    label = claim.label.value if isinstance(claim.label, Enum) else claim.label
    return {
        "label": label,
        "evidence": [[[None, None, s.page, s.line] for s in group] for group in claim.evidence],
    }


def score_claims(
    claims: Sequence[Claim], predictions: Sequence[FeverPrediction], max_evidence: int | None = 5
) -> FeverScores:
    """Score predictions against gold ``Claim`` objects with the official FEVER semantics.

    Args:
        claims: gold claims (labels required), paired with ``predictions`` by position.
        predictions: one ``FeverPrediction`` per claim.
        max_evidence: only the first this-many predicted sentences count (None: all).

    Raises:
        ValueError: lengths differ, a claim lacks a label, or a prediction is not a ``FeverPrediction``.
    """
    if len(claims) != len(predictions):
        raise ValueError(f"{len(claims)} claims but {len(predictions)} predictions")
    raw = []
    for i, (claim, prediction) in enumerate(zip(claims, predictions, strict=True)):
        if not isinstance(prediction, FeverPrediction):
            raise ValueError(f"prediction {i}: expected a FeverPrediction, got {type(prediction).__name__}")
        try:
            raw.append({**prediction.to_json(), **claim_to_actual(claim)})
        except ValueError as e:
            raise ValueError(f"claim {i}: {e}") from e
    strict, acc, precision, recall, f1 = fever_score(raw, max_evidence=max_evidence)
    return FeverScores(strict, acc, precision, recall, f1, len(raw))


def hover_correct(claim: Claim, prediction: FeverPrediction, max_evidence: int | None = 5) -> bool:
    """HoVer's score for one claim: the right label and, for every page of the gold evidence, at least
    one of that page's gold sentences among the (first ``max_evidence``) predicted sentences.

    Unlike FEVER's strict score, a page's other gold sentences may be missing.  A claim without gold
    evidence needs the right label only.
    """
    label = claim.label.value if isinstance(claim.label, Enum) else claim.label
    if prediction.label != label:
        return False
    return hover_evidence_found(
        claim, prediction.evidence if max_evidence is None else prediction.evidence[:max_evidence]
    )


def hover_evidence_found(claim: Claim, predicted: Iterable[SentenceId]) -> bool:
    """HoVer's evidence condition: for some gold set, at least one gold sentence of each of its pages
    is among ``predicted`` (True for a claim without gold evidence)."""
    found = set(predicted)
    if not claim.evidence:
        return True
    for group in claim.evidence:  # any one complete gold set suffices, as in FEVER
        pages: dict[str, set] = {}
        for sid in group:
            pages.setdefault(sid.page, set()).add(sid)
        if all(sids & found for sids in pages.values()):
            return True
    return False


def hover_score(
    claims: Sequence[Claim], predictions: Sequence[FeverPrediction], max_evidence: int | None = 5
) -> float:
    """The share of claims that are :func:`hover_correct`."""
    if len(claims) != len(predictions):
        raise ValueError(f"{len(claims)} claims but {len(predictions)} predictions")
    if not claims:
        return 0.0
    return sum(hover_correct(c, p, max_evidence) for c, p in zip(claims, predictions, strict=True)) / len(
        claims
    )


# --- label metrics


@dataclass(frozen=True)
class ClassScores:
    """Precision, recall and F1 of one label.

    Attributes:
        label: the label as given by the caller.
        precision: correct / predicted as this label (0.0 when never predicted).
        recall: correct / gold with this label (0.0 when no gold).
        f1: harmonic mean (0.0 when both are 0).
        support: number of gold claims with this label.
    """

    label: str
    precision: float
    recall: float
    f1: float
    support: int


def _label_index(labels: Sequence[str]) -> dict[str, int]:
    if len(labels) == 0:
        raise ValueError("labels must not be empty")
    index: dict[str, int] = {}
    for i, label in enumerate(labels):
        key = (label.value if isinstance(label, Enum) else label).upper()
        if key in index:
            raise ValueError(f"label {label!r} is given twice (labels compare case-insensitively)")
        index[key] = i
    return index


def _position(value: str, index: dict[str, int], what: str, i: int) -> int:
    key = (value.value if isinstance(value, Enum) else value).upper() if isinstance(value, str) else None
    if key not in index:
        raise ValueError(f"{what} label {i} is {value!r}, not one of the given labels")
    return index[key]


def label_positions(values: Sequence[str], labels: Sequence[str], what: str) -> list[int]:
    """Each value's position in ``labels``, compared as :func:`confusion_matrix` compares them
    (case-insensitively; Enum members by value).

    Raises:
        ValueError: a label given twice, or a value not in ``labels`` (naming ``what`` and its position).
    """
    index = _label_index(labels)
    return [_position(v, index, what, i) for i, v in enumerate(values)]


def confusion_matrix(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> list[list[int]]:
    """Counts ``m[i][j]`` of claims with gold ``labels[i]`` predicted as ``labels[j]``.

    Labels compare case-insensitively, as in the FEVER scorer.

    Raises:
        ValueError: lengths differ, or a label is not in ``labels`` (naming its position).
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predicted labels")
    index = _label_index(labels)
    matrix = [[0] * len(labels) for _ in labels]
    for i, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        matrix[_position(g, index, "gold", i)][_position(p, index, "predicted", i)] += 1
    return matrix


def per_class_scores(
    gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]
) -> tuple[ClassScores, ...]:
    """Precision, recall and F1 of each label in ``labels`` (zero-division gives 0.0)."""
    matrix = confusion_matrix(gold, predicted, labels)
    scores = []
    for i, label in enumerate(labels):
        tp = matrix[i][i]
        n_gold = sum(matrix[i])
        n_pred = sum(row[i] for row in matrix)
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_gold if n_gold else 0.0
        scores.append(ClassScores(label, precision, recall, _f1(precision, recall), n_gold))
    return tuple(scores)


def macro_f1(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> float:
    """Unweighted mean of the per-class F1 over all of ``labels``."""
    scores = per_class_scores(gold, predicted, labels)
    return sum(s.f1 for s in scores) / len(scores)
