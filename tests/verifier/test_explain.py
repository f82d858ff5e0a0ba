"""Explanation templates: verdict, probability, cited (page, line) ids, quoted text."""

from __future__ import annotations

import numpy as np
import pytest

from garag.types import Evidence, Label, SentenceId
from verifier.aggregate import aggregate_sentence_probs
from verifier.explain import (
    cite,
    explain_aggregate,
    explain_concat,
    explain_no_evidence,
    explain_sentence,
    quote,
)

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES
EV = [
    Evidence(
        SentenceId("Nikolaj_Coster-Waldau", 7),
        "He then played Detective John Amsterdam in the short-lived Fox television series "
        "New Amsterdam -LRB- 2008 -RRB- .",
    ),
    Evidence(
        SentenceId("Fox_Broadcasting_Company", 0),
        "The Fox Broadcasting Company -LRB- often shortened to Fox -RRB- is an American network .",
    ),
    Evidence(SentenceId("Game_of_Thrones", 2), "The series is filmed in Belfast ."),
]


def test_cite_and_quote() -> None:
    assert cite(SentenceId("Page_Id", 3)) == "(Page_Id, 3)"
    assert quote("Fox -LRB- TV -RRB- is n't `` big '' .") == '"Fox (TV) isn\'t "big"."'


def test_quote_shortens_at_a_word_boundary() -> None:
    text = " ".join(["word"] * 100)
    q = quote(text, limit=50)
    assert q.endswith('..."') and len(q) <= 50 + 5
    assert "wor..." not in q


def test_no_evidence() -> None:
    assert explain_no_evidence() == "NOT ENOUGH INFO: no evidence sentences were retrieved for the claim."


def test_sentence_template() -> None:
    assert explain_sentence(S, 0.934, EV[2]) == (
        'SUPPORTS (p=0.93): "The series is filmed in Belfast." (Game_of_Thrones, 2) entails the claim.'
    )
    with pytest.raises(ValueError):
        explain_sentence(N, 0.5, EV[0])


def test_per_sentence_refutes_names_the_deciding_sentence() -> None:
    agg = aggregate_sentence_probs(np.array([[0.1, 0.8, 0.1], [0.05, 0.07, 0.88]]), 0.5, 0.0)
    text = explain_aggregate(agg, EV[:2])
    assert text == (
        'REFUTES (p=0.88): "The Fox Broadcasting Company (often shortened to Fox) is an American network." '
        "(Fox_Broadcasting_Company, 0) contradicts the claim."
    )


def test_per_sentence_nei_low_confidence() -> None:
    probs = np.array([[0.30, 0.60, 0.10], [0.41, 0.50, 0.09], [0.1, 0.8, 0.1]])
    text = explain_aggregate(aggregate_sentence_probs(probs, 0.5, 0.0), EV)
    assert text == (
        "NOT ENOUGH INFO (p=0.59): none of the 3 evidence sentences supports or refutes the claim "
        "with p >= 0.50; closest: (Fox_Broadcasting_Company, 0), entailment p=0.41."
    )


def test_per_sentence_nei_single_sentence() -> None:
    text = explain_aggregate(aggregate_sentence_probs(np.array([[0.1, 0.6, 0.3]]), 0.5, 0.0), EV[:1])
    assert "the only evidence sentence neither supports nor refutes the claim" in text
    assert "closest: (Nikolaj_Coster-Waldau, 7), contradiction p=0.30" in text


def test_per_sentence_conflict() -> None:
    probs = np.array([[0.80, 0.1, 0.1], [0.1, 0.15, 0.75]])
    text = explain_aggregate(aggregate_sentence_probs(probs, 0.5, 0.1), EV[:2])
    assert text == (
        "NOT ENOUGH INFO (p=0.20): conflicting evidence: (Nikolaj_Coster-Waldau, 7) entails the claim "
        "(p=0.80) but (Fox_Broadcasting_Company, 0) contradicts it (p=0.75); "
        "neither leads by the margin 0.10."
    )


def test_concat_names_top_two_read_together() -> None:
    scores = {S: 0.91, N: 0.06, R: 0.03}
    text = explain_concat(S, scores, EV)
    assert text.startswith("SUPPORTS (p=0.91): the evidence (3 sentences read together) entails the claim; ")
    assert "(Nikolaj_Coster-Waldau, 7)" in text and "(Fox_Broadcasting_Company, 0)" in text
    assert "Game_of_Thrones" not in text
    assert '"He then played Detective John Amsterdam' in text


def test_concat_nei_cites_ids_only() -> None:
    text = explain_concat(N, {S: 0.1, N: 0.71, R: 0.19}, EV[:1])
    assert text == (
        "NOT ENOUGH INFO (p=0.71): the evidence (1 sentence read together) neither supports nor refutes "
        "the claim; top-ranked: (Nikolaj_Coster-Waldau, 7)."
    )


def test_concat_with_sentence_probs_names_the_strongest_sentence() -> None:
    single = np.array([[0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.05, 0.05, 0.9]])
    text = explain_concat(R, {S: 0.02, N: 0.1, R: 0.88}, EV, single)
    assert text == (
        "REFUTES (p=0.88): the evidence (3 sentences read together) contradicts the claim; strongest single "
        'sentence: "The series is filmed in Belfast." (Game_of_Thrones, 2), contradiction p=0.90 alone.'
    )
    nei = explain_concat(N, {S: 0.2, N: 0.7, R: 0.1}, EV, single)
    assert nei.endswith("closest single sentence: (Game_of_Thrones, 2), contradiction p=0.90.")
    with pytest.raises(ValueError, match="shape"):
        explain_concat(R, {S: 0.0, N: 0.0, R: 1.0}, EV, single[:2])
