"""Label-map resolution: one small id2label (and label_map) per case."""

from __future__ import annotations

import numpy as np
import pytest

from garag.types import Label
from verifier.labels import LABEL_ORDER, recognize_label, resolve_label_map, to_label_probs

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES


def test_mnli_names() -> None:
    # MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli's order.
    assert resolve_label_map({0: "entailment", 1: "neutral", 2: "contradiction"}) == {0: S, 1: N, 2: R}


def test_mnli_names_other_order_and_case() -> None:
    # roberta-large-mnli style: CONTRADICTION, NEUTRAL, ENTAILMENT.
    assert resolve_label_map({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}) == {0: R, 1: N, 2: S}


def test_fever_names() -> None:
    assert resolve_label_map({0: "SUPPORTS", 1: "NOT ENOUGH INFO", 2: "REFUTES"}) == {0: S, 1: N, 2: R}


def test_fever_variants() -> None:
    assert resolve_label_map({0: "SUPPORTED", 1: "NEI", 2: "REFUTED"}) == {0: S, 1: N, 2: R}
    assert resolve_label_map({0: "not_enough_info", 1: "Refutes", 2: "supports"}) == {0: N, 1: R, 2: S}


def test_json_string_keys() -> None:
    assert resolve_label_map({"0": "entailment", "1": "neutral", "2": "contradiction"}) == {0: S, 1: N, 2: R}


def test_anonymous_labels_without_map() -> None:
    with pytest.raises(ValueError, match=r"set verifier\.label_map"):
        resolve_label_map({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})


def test_anonymous_labels_with_map() -> None:
    label_map = {"LABEL_0": "REFUTES", "label_1": "NOT ENOUGH INFO", "LABEL_2": "SUPPORTS"}
    assert resolve_label_map({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, label_map) == {0: R, 1: N, 2: S}


def test_explicit_map_overrides_recognition() -> None:
    # A checkpoint whose names are swapped relative to what it predicts.
    id2label = {0: "entailment", 1: "neutral", 2: "contradiction"}
    label_map = {"entailment": "REFUTES", "contradiction": "SUPPORTS"}
    assert resolve_label_map(id2label, label_map) == {0: R, 1: N, 2: S}


def test_map_key_the_model_does_not_have() -> None:
    with pytest.raises(ValueError, match=r"\['entailmnt'\].*model's labels"):
        resolve_label_map({0: "entailment", 1: "neutral", 2: "contradiction"}, {"entailmnt": "SUPPORTS"})


def test_map_value_that_is_not_a_verdict() -> None:
    with pytest.raises(ValueError, match="TRUE"):
        resolve_label_map({0: "a", 1: "b", 2: "c"}, {"a": "TRUE"})


def test_missing_verdict_is_named() -> None:
    with pytest.raises(ValueError, match=r"no \['NOT ENOUGH INFO'\]"):
        resolve_label_map({0: "entailment", 1: "contradiction"})


def test_two_way_model_is_explained() -> None:
    with pytest.raises(ValueError, match="2-way"):
        resolve_label_map({0: "entailment", 1: "not_entailment"}, {"not_entailment": "REFUTES"})


def test_unrecognised_name() -> None:
    with pytest.raises(ValueError, match=r"unrecognised model label\(s\) \['maybe'\]"):
        resolve_label_map({0: "entailment", 1: "maybe", 2: "contradiction"})


def test_not_entailment_is_not_guessed() -> None:
    assert recognize_label("not_entailment") is None
    assert recognize_label("Not-Enough-Info") is N


def test_empty_id2label() -> None:
    with pytest.raises(ValueError, match="no id2label"):
        resolve_label_map({})


def test_to_label_probs_reorders_and_merges() -> None:
    index_to_label = resolve_label_map({0: "contradiction", 1: "neutral", 2: "entailment"})
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    out = to_label_probs(probs, index_to_label)
    assert LABEL_ORDER == (S, N, R)
    np.testing.assert_allclose(out, [[0.1, 0.2, 0.7], [0.8, 0.1, 0.1]])
    # Two outputs mapped to one verdict add up.
    merged = to_label_probs(np.array([[0.5, 0.2, 0.2, 0.1]]), {0: S, 1: N, 2: N, 3: R})
    np.testing.assert_allclose(merged, [[0.5, 0.4, 0.1]])


def test_to_label_probs_shape_error() -> None:
    with pytest.raises(ValueError, match="shape"):
        to_label_probs(np.zeros((2, 2)), {0: S, 1: N, 2: R})
