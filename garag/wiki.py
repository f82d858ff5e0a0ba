"""Streaming reader for FEVER's wiki-pages format.

A corpus is a directory of ``*.jsonl`` files, a single ``.jsonl`` file, or the
release's ``wiki-pages.zip``.  Each line is one page::

    {"id": "Page_Id", "text": "...", "lines": "0\\tFirst sentence .\\tlink1\\tlink2\\n1\\t\\n2\\t..."}

``lines`` holds ``N<TAB>sentence[<TAB>link ...]`` for every sentence number;
empty sentences are kept as ``N<TAB>`` so that line numbers hold.  Pages are
yielded one at a time, so reading the 5.4M-page dump needs memory for one page.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from garag.artifacts import update_with_file
from garag.errors import ErrorPolicy, InputError
from garag.jsonl import iter_text_lines

# Line numbers index a page's sentences, and the gaps between them are kept as empty lines; a
# bound stops one bad number (50,000,000) from costing gigabytes.  The real dump's pages are far shorter.
MAX_SENTENCE_NUMBER = 100_000


@dataclass(frozen=True)
class Page:
    """One wiki page: ``lines[n]`` is sentence ``n`` ("" when empty or unknown)."""

    id: str
    lines: tuple[str, ...]
    links: tuple[tuple[str, ...], ...]

    def sentences(self) -> Iterator[tuple[int, str, tuple[str, ...]]]:
        """Yield ``(line, text, links)`` for the non-empty sentences."""
        for n, text in enumerate(self.lines):
            if text:
                yield n, text, self.links[n]


def corpus_files(path: str | Path) -> list[Path]:
    """The files that make up a corpus, in a stable order."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".jsonl" or p.suffix == ".zip")
        if not files:
            raise FileNotFoundError(f"{path}: no .jsonl or .zip wiki-pages files in this directory")
        return files
    if path.is_file():
        return [path]
    raise FileNotFoundError(f"{path}: wiki-pages corpus not found (expected a directory, .jsonl or .zip)")


def corpus_fingerprint(path: str | Path) -> str:
    """sha256 over the corpus files' names and bytes (streamed)."""
    digest = hashlib.sha256()
    for f in corpus_files(path):
        digest.update(f.name.encode())
        update_with_file(digest, f)
    return digest.hexdigest()


def _iter_text_lines(path: Path, policy: ErrorPolicy) -> Iterator[tuple[str, int, str]]:
    """Yield ``(source_name, line_number, raw_line)`` for a .jsonl file or each .jsonl in a zip."""
    if path.suffix == ".zip":
        try:
            zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise InputError(str(path), None, f"not a readable zip file ({e})", kind="bad_zip") from None
        with zf:
            for name in sorted(n for n in zf.namelist() if n.endswith(".jsonl")):
                source = f"{path}!{name}"
                try:
                    with zf.open(name) as raw:
                        for i, line in iter_text_lines(path, policy, raw, source):
                            yield source, i, line
                except (zipfile.BadZipFile, EOFError, OSError) as e:
                    raise InputError(source, None, f"damaged zip member ({e})", kind="bad_zip") from None
    else:
        for i, line in iter_text_lines(path, policy):
            yield str(path), i, line


def parse_lines_field(
    lines: str, source: str, lineno: int
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Parse a page's ``lines`` field into per-line texts and hyperlink targets.

    Raises:
        InputError: a line does not start with its number, or numbers go backwards.
    """
    texts: list[str] = []
    links: list[tuple[str, ...]] = []
    if not lines:
        return (), ()
    for raw in lines.split("\n"):
        if raw == "":
            # A stray blank between entries (seen in the official dump): no sentence.
            continue
        parts = raw.split("\t")
        try:
            n = int(parts[0])
        except ValueError:
            raise InputError(
                source, lineno, f"'lines' entry does not start with a sentence number: {raw[:60]!r}"
            ) from None
        if n < len(texts):
            raise InputError(source, lineno, f"sentence number {n} repeats or goes backwards")
        if n > MAX_SENTENCE_NUMBER:
            raise InputError(
                source, lineno, f"sentence number {n} is out of range (at most {MAX_SENTENCE_NUMBER:,})"
            )
        while len(texts) < n:
            texts.append("")
            links.append(())
        texts.append(parts[1].strip() if len(parts) > 1 else "")
        links.append(tuple(p for p in parts[2:] if p))
    return tuple(texts), tuple(links)


def iter_pages(path: str | Path, policy: ErrorPolicy | None = None) -> Iterator[Page]:
    """Stream the pages of a wiki-pages corpus.

    Args:
        path: directory of ``.jsonl``/``.zip`` files, one ``.jsonl`` or the release zip.
        policy: error policy; the default raises on the first bad line.

    Raises:
        InputError: naming the file and line of a malformed page (unless skipping).
    """
    policy = policy or ErrorPolicy()
    for f in corpus_files(path):
        for source, lineno, raw in _iter_text_lines(f, policy):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                policy.handle(InputError(source, lineno, f"not valid JSON ({e.msg})"), "bad_json")
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
                policy.handle(InputError(source, lineno, "page has no string 'id'"), "missing_id")
                continue
            if obj["id"] == "":
                # The official dump starts with a page whose id is empty; it has no text.
                continue
            lines_field = obj.get("lines")
            if not isinstance(lines_field, str):
                policy.handle(
                    InputError(source, lineno, f"page {obj['id']!r} has no string 'lines'"), "missing_lines"
                )
                continue
            try:
                texts, links = parse_lines_field(lines_field, source, lineno)
            except InputError as e:
                policy.handle(e, "bad_lines")
                continue
            yield Page(id=obj["id"], lines=texts, links=links)
