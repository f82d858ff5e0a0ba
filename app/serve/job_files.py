"""The claims of a job: an uploaded FEVER or HoVer JSONL file, a CSV file with a ``claim`` column, or
a JSON list.  Every problem is one :class:`ClaimsFileError` line naming the file (or JSON key) and the
line, never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from garag.claims import FEVER_LABELS, HOVER_LABELS, read_fever_claims, read_hover_claims
from garag.errors import ErrorPolicy, InputError
from garag.types import Claim

FORMATS = ("fever", "hover", "csv")
# a claim longer than this is refused (as by POST /v1/verify)
MAX_CLAIM_CHARS = 2000


class ClaimsFileError(ValueError):
    """A claims file (or JSON list) that cannot be read: the message names the file and line."""


@dataclass(frozen=True)
class ClaimsFile:
    """The claims of a job and what they are.

    Attributes:
        format: "fever" or "hover" (JSON lines of that format), "csv", or "json" (a request's list).
        claims: in the file's order; ids unique.
        labels: the label set the gold labels belong to (FEVER's or HoVer's); None when no claim has one.
    """

    format: str
    claims: list[Claim]
    labels: tuple[str, ...] | None


def _vocabulary(labels: Sequence[tuple[str, str]]) -> tuple[str, ...] | None:
    """The one label set every ``(where, label)`` belongs to (FEVER's or HoVer's)."""
    if not labels:
        return None
    first_where, first = labels[0]
    vocab = FEVER_LABELS if first in FEVER_LABELS else HOVER_LABELS if first in HOVER_LABELS else None
    for where, label in labels:
        if vocab is None or label not in vocab:
            known = ", ".join(FEVER_LABELS + HOVER_LABELS) if vocab is None else ", ".join(vocab)
            after = "" if vocab is None else f" (the first label, at {first_where}, is {first!r})"
            raise ClaimsFileError(f"{where}: unknown label {label!r}; expected one of {known}{after}")
    return vocab


def _check_text(where: str, claim_id: object, text: str) -> None:
    if not any(ch.isalnum() for ch in text):
        raise ClaimsFileError(f"{where}: claim {claim_id!r} has no words: {text!r}")
    if len(text) > MAX_CLAIM_CHARS:
        raise ClaimsFileError(f"{where}: claim {claim_id!r} is longer than {MAX_CLAIM_CHARS} characters")


def detect_format(data: bytes, filename: str) -> str:
    """fever, hover or csv: a ``.csv`` name or a first line that is not a JSON object is CSV; JSON lines
    are HoVer's when a claim has ``num_hops``, a HoVer label or ``[page, line]`` evidence."""
    if filename.lower().endswith((".csv", ".tsv")):
        return "csv"
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{"):
        return "csv"
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        evidence = obj.get("evidence")
        pair = (
            isinstance(evidence, list)
            and evidence
            and isinstance(evidence[0], list)
            and (len(evidence[0]) == 2 and isinstance(evidence[0][0], str))
        )
        if "num_hops" in obj or obj.get("label") in HOVER_LABELS or pair:
            return "hover"
    return "fever"


def read_jsonl(path: Path, filename: str, fmt: str) -> ClaimsFile:
    """FEVER or HoVer claims from ``path`` (the upload as it came), errors naming ``filename``."""
    reader = read_fever_claims if fmt == "fever" else read_hover_claims
    lines: dict[object, int] = {}
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), (int, str)):
            lines.setdefault(obj["id"], number)
    try:
        claims = list(reader(path, ErrorPolicy()))
    except InputError as e:
        line = f":{e.line}" if e.line is not None else ""
        raise ClaimsFileError(f"{filename}{line}: {e.reason}") from None
    if not claims:
        raise ClaimsFileError(f"{filename}: no claim in the file")
    for c in claims:
        _check_text(f"{filename}:{lines.get(c.id, '?')}", c.id, c.text)
    labels = [(f"{filename}:{lines.get(c.id, '?')}", c.label) for c in claims if c.label is not None]
    return ClaimsFile(fmt, claims, _vocabulary(labels))


def _csv_id(value: str) -> int | str:
    """A CSV id: an integer where the cell is one written plainly (FEVER's ids), else the text."""
    return int(value) if value.isdigit() and str(int(value)) == value else value


def read_csv(data: bytes, filename: str) -> ClaimsFile:
    """Claims of a CSV file with a header naming a ``claim`` column (``id`` and ``label`` optional)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ClaimsFileError(f"{filename}:{line}: not UTF-8 text") from None
    delimiter = "\t" if filename.lower().endswith(".tsv") else ","
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(rows, None)
        if header is None:
            raise ClaimsFileError(f"{filename}: the file is empty")
        names = [h.strip().lower() for h in header]
        if "claim" not in names:
            raise ClaimsFileError(f"{filename}:1: no 'claim' column in the header {header!r}")
        col = {n: names.index(n) for n in ("id", "claim", "label") if n in names}
        claims: list[Claim] = []
        seen: dict[object, int] = {}
        labels: list[tuple[str, str]] = []
        for row in rows:
            line = rows.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise ClaimsFileError(f"{filename}:{line}: {len(row)} cells, the header has {len(header)}")
            raw_id = row[col["id"]].strip() if "id" in col else ""
            claim_id = _csv_id(raw_id) if raw_id else len(claims) + 1
            if claim_id in seen:
                raise ClaimsFileError(
                    f"{filename}:{line}: claim id {claim_id!r} repeated (first on line {seen[claim_id]})"
                )
            seen[claim_id] = line
            text = row[col["claim"]]
            _check_text(f"{filename}:{line}", claim_id, text)
            label = row[col["label"]].strip() if "label" in col else ""
            if label:
                labels.append((f"{filename}:{line}", label))
            claims.append(Claim(claim_id, text, label=label or None))
    except csv.Error as e:
        raise ClaimsFileError(f"{filename}:{rows.line_num}: not CSV ({e})") from None
    if not claims:
        raise ClaimsFileError(f"{filename}: no claim in the file")
    return ClaimsFile("csv", claims, _vocabulary(labels))


def read_upload(path: Path, filename: str, fmt: str = "auto") -> ClaimsFile:
    """The claims of an uploaded file (kept at ``path`` as it came), in format ``fmt`` or detected."""
    data = path.read_bytes()
    if not data.strip():
        raise ClaimsFileError(f"{filename}: the file is empty")
    if fmt == "auto":
        fmt = detect_format(data, filename)
    if fmt not in FORMATS:
        raise ClaimsFileError(f"format: {fmt!r} is not one of auto, {', '.join(FORMATS)}")
    return read_csv(data, filename) if fmt == "csv" else read_jsonl(path, filename, fmt)


def read_json_claims(items: Sequence[Any]) -> ClaimsFile:
    """The claims of a JSON request: texts, or ``{"claim", "id"?, "label"?}`` objects (key ``claims.N``)."""
    claims: list[Claim] = []
    seen: set = set()
    labels: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        where = f"claims.{i}"
        obj = {"claim": item} if isinstance(item, str) else item
        text, claim_id, label = obj["claim"], obj.get("id"), obj.get("label")
        claim_id = i + 1 if claim_id is None else claim_id
        if claim_id in seen:
            raise ClaimsFileError(f"{where}: claim id {claim_id!r} repeated")
        seen.add(claim_id)
        _check_text(where, claim_id, text)
        if label is not None:
            labels.append((where, label))
        claims.append(Claim(claim_id, text, label=label))
    if not claims:
        raise ClaimsFileError("claims: no claim")
    return ClaimsFile("json", claims, _vocabulary(labels))
