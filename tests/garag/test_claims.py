from __future__ import annotations

import json
from pathlib import Path

import pytest

from garag.claims import read_fever_claims
from garag.datasets import get_dataset
from garag.errors import ErrorPolicy, InputError
from garag.types import SentenceId


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_fever_claims_sets_and_nei(tiny_claims: Path):
    claims = list(read_fever_claims(tiny_claims))
    assert len(claims) == 6
    two_page = claims[1]
    assert two_page.evidence == ((SentenceId("The_Beatles", 0), SentenceId("Liverpool", 0)),)
    nei = claims[4]
    assert nei.label == "NOT ENOUGH INFO" and nei.evidence == () and not nei.verifiable
    assert len(claims[2].evidence) == 2  # two alternative sets


def test_unknown_label_names_file_line_and_label(tmp_path: Path):
    f = _write(tmp_path / "dev.jsonl", [{"id": 1, "claim": "x", "label": "MAYBE", "evidence": []}])
    with pytest.raises(InputError, match=r"dev\.jsonl:1: claim 1: unknown label 'MAYBE'"):
        list(read_fever_claims(f))


def test_repeated_id_is_an_error_or_counted(tmp_path: Path):
    rows = [{"id": 7, "claim": "a", "label": "SUPPORTS", "evidence": [[[1, 1, "P", 0]]]}] * 2
    f = _write(tmp_path / "dev.jsonl", rows)
    with pytest.raises(InputError, match=r"dev\.jsonl:2: claim id 7 repeated"):
        list(read_fever_claims(f))
    policy = ErrorPolicy(skip=True)
    assert len(list(read_fever_claims(f, policy))) == 1
    assert policy.counts == {"repeated_id": 1}


def test_blind_test_file_has_no_label(tmp_path: Path):
    f = _write(tmp_path / "test.jsonl", [{"id": 3, "claim": "Paris is in France."}])
    (claim,) = read_fever_claims(f)
    assert claim.label is None and claim.evidence == ()


def test_evidence_that_is_not_a_list_is_named(tmp_path: Path):
    # found by tests/garag/test_readers_fuzz.py: `"evidence": true` raised a TypeError
    f = _write(tmp_path / "dev.jsonl", [{"id": 1, "claim": "x", "label": "SUPPORTS", "evidence": True}])
    with pytest.raises(InputError, match=r"dev\.jsonl:1: claim 1: evidence is not a list of evidence sets"):
        list(read_fever_claims(f))


def test_bad_evidence_pointer(tmp_path: Path):
    f = _write(
        tmp_path / "dev.jsonl", [{"id": 1, "claim": "x", "label": "SUPPORTS", "evidence": [[["P", 0]]]}]
    )
    with pytest.raises(InputError, match="is not \\[ann_id, ev_id, page, line\\]"):
        list(read_fever_claims(f))


def test_hover_reader_on_embedded_data():
    ds = get_dataset("hover")
    claims = list(ds.claims())
    assert len(claims) == 244
    assert {c.label for c in claims} == {"SUPPORTED", "NOT_SUPPORTED"}
    first = claims[0]
    assert first.num_hops == 2 and first.evidence == (
        (SentenceId("Dum_Dum_Motijheel_College", 0), SentenceId("Kolkata", 0)),
    )


def test_fever_embedded_counts():
    claims = list(get_dataset("fever").claims())
    assert len(claims) == 2526
    assert sum(c.verifiable for c in claims) == 1685


def test_a_contrast_sets_claims_say_where_they_come_from(tmp_path: Path):
    from garag.claims import read_hover_claims
    from garag.types import ContrastOf

    fever = tmp_path / "fever.jsonl"
    fever.write_text(
        json.dumps({"id": "7~negation", "label": "SUPPORTS", "claim": "X is not Y.",
                    "evidence": [[[None, None, "X", 0]]], "contrast": {"change": "negation", "source": 7}})
        + "\n"
    )  # fmt: skip
    assert next(read_fever_claims(fever)).contrast == ContrastOf("negation", 7)
    hover = tmp_path / "hover.jsonl"
    hover.write_text(
        json.dumps({"id": 3, "label": "SUPPORTED", "claim": "X is Y.", "evidence": [["X", 0]]}) + "\n"
    )
    assert next(read_hover_claims(hover)).contrast is None


@pytest.mark.parametrize("bad", [{"change": "negation"}, {"change": "", "source": 1}, ["negation", 1]])
def test_a_malformed_contrast_is_one_line_naming_the_line(tmp_path: Path, bad):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": 1, "label": "SUPPORTS", "claim": "X is Y.", "contrast": bad}) + "\n")
    with pytest.raises(
        InputError, match=r"c\.jsonl:1: claim 1: contrast .* is not \{change: NAME, source: ID\}"
    ):
        list(read_fever_claims(path))


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"evidence": True}, r"evidence is not a list of \[page, line\]"),
        ({"evidence": {"X": 0}}, r"evidence is not a list of \[page, line\]"),
        ({"evidence": [["X", "0"]]}, r"evidence item \['X', '0'\] is not \[page, line\]"),
        ({"num_hops": "two"}, r"num_hops 'two' is not a positive integer"),
        ({"num_hops": 0}, r"num_hops 0 is not a positive integer"),
        ({"num_hops": True}, r"num_hops True is not a positive integer"),
    ],
)
def test_a_malformed_hover_claim_is_one_line_naming_the_line(tmp_path: Path, field: dict, message: str):
    from garag.claims import read_hover_claims

    path = tmp_path / "h.jsonl"
    good = {"id": 1, "label": "SUPPORTED", "claim": "X is Y.", "evidence": [["X", 0]], "num_hops": 2}
    path.write_text(json.dumps(good) + "\n" + json.dumps(good | {"id": 2} | field) + "\n")
    with pytest.raises(InputError, match=rf"h\.jsonl:2: claim 2: {message}"):
        list(read_hover_claims(path))
    assert [c.num_hops for c in read_hover_claims(path, ErrorPolicy(skip=True))] == [2]
