"""Corpus edits: pages added to or removed from a corpus without rebuilding its indexes.

A corpus is a base wiki-pages corpus (``data.corpus``) plus edits:

* ``data.add_pages``: wiki-pages files applied in order.  A page whose id is already in the corpus
  replaces it (and moves to the end, as if removed and added again); a later file wins over an
  earlier one.
* ``data.remove_pages``: text files of page ids, one per line (blank lines and ``#`` comments
  skipped), removed after the adds.  Removing a page that is not in the corpus is an error.

The edited corpus has a fingerprint of its own (the base's, the add files' in order and the
remove files'), so its artifacts never mix with the base's.  The page order, which fixes store
row ids, is: the base's surviving pages in base order, then each add file's surviving pages in
file order.  The same order results from applying the edits to any already indexed sub-list of
them (a *parent*: some of the remove files and a prefix of the add files), which is what lets the
indexes of the edited corpus be derived from the parent's (``CorpusDelta``) and still equal a
rebuild.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from garag.artifacts import settings_hash
from garag.errors import ErrorPolicy, InputError
from garag.jsonl import iter_text_lines
from garag.wiki import Page, iter_pages


@dataclass(frozen=True)
class CorpusEdits:
    """The edit files of a corpus (see module docstring)."""

    add: tuple[Path, ...] = ()
    remove: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.add or self.remove)

    def sub(self, n_remove: int, n_add: int) -> CorpusEdits:
        """The first ``n_remove`` remove files and the first ``n_add`` add files."""
        return CorpusEdits(self.add[:n_add], self.remove[:n_remove])

    def parents(self) -> Iterator[CorpusEdits]:
        """The proper sub-lists a corpus can be derived from, the closest (most files) first."""
        subs = [(r, a) for r in range(len(self.remove) + 1) for a in range(len(self.add) + 1)]
        subs.remove((len(self.remove), len(self.add)))
        for r, a in sorted(subs, key=lambda s: (-(s[0] + s[1]), -s[1])):
            yield self.sub(r, a)


def remove_file(path: str | Path) -> Path:
    """``path`` as a remove file that exists.

    Raises:
        InputError: it is not a file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), None, "file of page ids to remove not found")
    return path


def read_page_ids(path: str | Path) -> list[tuple[int, str]]:
    """``(line number, page id)`` of a remove file.

    Raises:
        InputError: the file is missing or unreadable, or holds no page id.
    """
    out = []
    for n, raw in iter_text_lines(remove_file(path), ErrorPolicy()):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((n, line))
    if not out:
        raise InputError(str(path), None, "no page ids in this file (one id per line)")
    return out


def edited_fingerprint(base: str, add: list[str], remove: list[str]) -> str:
    """Fingerprint of a corpus from its base's and its edit files' fingerprints (the base's own when
    there are no edits; the remove files' order does not matter, the add files' does)."""
    if not add and not remove:
        return base
    return settings_hash("corpus-edits", base, add, sorted(remove))


def removed_ids(edits: CorpusEdits) -> dict[str, tuple[Path, int]]:
    """Every page id the remove files name -> where it is first named."""
    out: dict[str, tuple[Path, int]] = {}
    for f in edits.remove:
        for n, page in read_page_ids(f):
            out.setdefault(page, (Path(f), n))
    return out


def page_ids(path: str | Path, policy: ErrorPolicy) -> set[str]:
    """The page ids of a wiki-pages file (a bad record raises or is skipped as ``policy`` says, but is
    not counted: the pass that reads the pages counts it)."""
    return {p.id for p in iter_pages(path, ErrorPolicy(skip=policy.skip))}


def iter_add_file(path: str | Path, policy: ErrorPolicy) -> Iterator[Page]:
    """The pages of an add file, each id once: a repeat goes to ``policy``, naming the file."""
    seen: set[str] = set()
    for page in iter_pages(path, policy):
        if page.id in seen:
            policy.handle(InputError(str(path), None, f"page id {page.id!r} appears twice"), "duplicate_page")
            continue
        seen.add(page.id)
        yield page


def iter_edited_pages(base: str | Path, edits: CorpusEdits, policy: ErrorPolicy) -> Iterator[Page]:
    """The pages of the edited corpus in its order (see module docstring), streamed.

    Raises:
        InputError: a remove file names a page that is not in the corpus (after the stream).
    """
    removed = removed_ids(edits)
    later = [page_ids(f, policy) for f in edits.add]  # later[k]: ids of add file k
    seen: set[str] = set()
    for k, source in enumerate([base, *edits.add]):
        shadow = set().union(*later[k:]) if k < len(later) else set()
        for page in iter_pages(source, policy) if k == 0 else iter_add_file(source, policy):
            seen.add(page.id)
            if page.id not in removed and page.id not in shadow:
                yield page
    _check_removed(removed, seen)


def _check_removed(removed: dict[str, tuple[Path, int]], present: set[str]) -> None:
    for page, (path, line) in removed.items():
        if page not in present:
            raise InputError(str(path), line, f"page {page!r} is not in the corpus, so it cannot be removed")


@dataclass(frozen=True)
class EditPlan:
    """How to go from a parent corpus to the edited one.

    Attributes:
        drop: parent pages that are not kept (removed, or replaced by an added page).
        add_files: the add files whose pages are appended, in order.
        skip: per add file, the page ids not appended from it (removed, or replaced by a later file).
    """

    drop: frozenset[str]
    add_files: tuple[Path, ...]
    skip: tuple[frozenset[str], ...]

    def added_pages(self, policy: ErrorPolicy) -> Iterator[Page]:
        """The appended pages, in corpus order."""
        for f, skip in zip(self.add_files, self.skip, strict=True):
            yield from (p for p in iter_add_file(f, policy) if p.id not in skip)


def edit_plan(
    parent_pages: set[str], parent: CorpusEdits, edits: CorpusEdits, policy: ErrorPolicy
) -> EditPlan:
    """The plan from the corpus with edits ``parent`` (whose page ids are ``parent_pages``) to the
    corpus with ``edits``; ``parent`` must be one of ``edits.parents()``.

    Raises:
        InputError: a remove file names a page that is in neither the parent nor an added file.
    """
    rest = edits.add[len(parent.add) :]
    ids = [page_ids(f, policy) for f in rest]
    removed = removed_ids(edits)
    _check_removed(
        {p: w for p, w in removed.items() if p not in removed_ids(parent)}, parent_pages.union(*ids)
    )
    drop = (set(removed) | set().union(*ids)) & parent_pages
    skip = tuple(frozenset(set(removed) | set().union(*ids[k + 1 :])) for k in range(len(rest)))
    return EditPlan(frozenset(drop), tuple(rest), skip)


def compact_map(keep: np.ndarray) -> np.ndarray:
    """Old position -> new position of the kept items (``keep`` true), in order; -1 for the others."""
    return np.where(keep, np.cumsum(keep) - 1, -1).astype(np.int64)


@dataclass(frozen=True)
class CorpusDelta:
    """Where a parent corpus's rows and pages went in the edited corpus (row ids are dense, in
    corpus order, so kept rows keep their relative order and come first).

    Attributes:
        row_map: parent row -> row here (-1: its page was dropped).
        page_map: parent page number -> page number here (-1: dropped).
        kept_rows: rows ``0..kept_rows-1`` here come from the parent; later rows are new.
        kept_pages: pages ``0..kept_pages-1`` here come from the parent; later pages are new.
        dropped: the parent's dropped pages (removed or replaced).
    """

    row_map: np.ndarray
    page_map: np.ndarray
    kept_rows: int
    kept_pages: int
    dropped: frozenset[str]

    @classmethod
    def from_pages(cls, pages: list[tuple[str, int]], drop: frozenset[str]) -> CorpusDelta:
        """The delta for the parent's pages ``(page id, sentences)`` in page order."""
        keep = np.array([p not in drop for p, _ in pages], dtype=bool)
        sizes = np.array([n for _, n in pages], dtype=np.int64)
        row_keep = np.repeat(keep, sizes)
        return cls(compact_map(row_keep), compact_map(keep), int(row_keep.sum()), int(keep.sum()), drop)
