"""CSV downloads (job results, the history) that a spreadsheet opens as text.

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
Excel, LibreOffice and Google Sheets, so a claim such as ``=HYPERLINK(...)`` in an uploaded file
would run when its results are opened (CSV injection, OWASP).  Such a text cell gets a leading
``'``, which spreadsheets show as a text marker; numbers are written as numbers.  The JSONL
downloads keep every text as it was.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> object:
    """``value``, with a ``'`` before a text that a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_lines(rows: Iterable[Sequence[object]]) -> Iterator[str]:
    """Each row as one CSV line (RFC 4180: ``\\r\\n`` ends), its text cells made safe for spreadsheets."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    for row in rows:
        writer.writerow([safe_cell(v) for v in row])
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
