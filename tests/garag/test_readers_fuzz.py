"""Property-based fuzzing of the readers: any bytes in -> parsed records or InputError, nothing else."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from garag.claims import read_fever_claims, read_hover_claims
from garag.errors import ErrorPolicy, InputError
from garag.jsonl import read_records
from garag.types import Claim
from garag.wiki import Page, iter_pages

# max_examples and whether the draw is random: the profile tests/conftest.py loads
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Bytes that look like the formats often enough to get past the JSON parser: JSON values built
# from the fields the readers look at, mixed with raw bytes, torn lines and bad encodings.
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**9), st.floats(allow_nan=True), st.text(max_size=12)
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(["id", "claim", "label", "evidence", "verifiable", "num_hops", "lines", "text",
                         "predicted_label", "predicted_evidence"])  # fmt: skip
_record = st.dictionaries(_keys, st.one_of(_value, st.sampled_from(
    ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "SUPPORTED", "0\tA sentence .\n1\tAnother .", "3\tx\n1\ty",
     "50000000\tx", [["P", 0]], [[[1, 1, "P", 0]]], [[[1, None, None, None]]]])), max_size=6)  # fmt: skip
_line = st.one_of(
    _record.map(lambda r: json.dumps(r).encode()),
    _value.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
    st.just(b"\xff\xfe\x00"),
)
_file = st.tuples(st.lists(_line, max_size=8), st.booleans()).map(
    lambda parts: b"\n".join(parts[0]) + (b"\n" if parts[1] else b"")
)


def _read_all(reader, data: bytes, suffix: str = ".jsonl") -> list:  # noqa: ANN001
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"input{suffix}"
        path.write_bytes(data)
        out = []
        for skip in (False, True):
            try:
                out = list(reader(path, ErrorPolicy(skip=skip)))
            except InputError as e:
                assert e.path.startswith(str(path)) and str(e).startswith(e.path)
                assert not skip or e.kind in ("not_a_file", "bad_zip")  # skip mode only stops for those
        assert path.read_bytes() == data  # reading never writes
        return out


@FUZZ
@given(_file)
def test_fever_claims_reader(data: bytes) -> None:
    assert all(isinstance(c, Claim) and isinstance(c.text, str) for c in _read_all(read_fever_claims, data))


@FUZZ
@given(_file)
def test_hover_claims_reader(data: bytes) -> None:
    assert all(isinstance(c, Claim) for c in _read_all(read_hover_claims, data))


@FUZZ
@given(_file)
def test_wiki_pages_reader(data: bytes) -> None:
    for page in _read_all(iter_pages, data):
        assert isinstance(page, Page) and len(page.lines) == len(page.links) <= 100_001


@FUZZ
@given(_file)
def test_wiki_pages_zip_reader(data: bytes) -> None:
    _read_all(iter_pages, data, suffix=".zip")  # arbitrary bytes named .zip: an InputError, not BadZipFile


@FUZZ
@given(_file)
def test_predictions_reader(data: bytes) -> None:
    records = _read_all(lambda path, policy: read_records(path, policy=policy), data)
    assert all(isinstance(r, dict) and "id" in r for r in records)
