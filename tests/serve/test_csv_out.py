"""CSV downloads open in a spreadsheet as text: a cell that would be a formula gets a leading quote."""

from __future__ import annotations

import csv
import io

import pytest

from app.serve.csv_out import csv_lines, safe_cell


@pytest.mark.parametrize("text", ["=1+2", "+1 more", "-5 degrees", "@SUM(A1)", "\tx", "\rx"])
def test_a_text_a_spreadsheet_would_compute_is_quoted(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["Liverpool", "a = b", " =1", "", 7, -5, 0.25, None])
def test_other_cells_and_numbers_are_kept(value):
    assert safe_cell(value) == value


def test_lines_are_rfc_4180_rows_that_read_back():
    rows = [["id", "claim"], [1, 'He said "=no", then left.\nNext line'], [-2, "=cmd|' /C calc'!A0"]]
    text = "".join(csv_lines(rows))
    assert text.endswith("\r\n") and text.count("\r\n") == 3
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back == [
        ["id", "claim"],
        ["1", 'He said "=no", then left.\nNext line'],
        ["-2", "'=cmd|' /C calc'!A0"],
    ]
