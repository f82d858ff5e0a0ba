"""Corpus edits (garag/corpus.py): page order, replacement, removal, errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from garag.corpus import CorpusEdits, edit_plan, iter_edited_pages
from garag.errors import ErrorPolicy, InputError


def _pages(path: Path, *pages: tuple[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": "", "lines": f"0\t{t}"}) + "\n" for i, t in pages))
    return path


def _ids(tmp_path: Path, name: str, *ids: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{i}\n" for i in ids))
    return path


def test_adds_replace_and_move_to_the_end_then_removes_apply(tmp_path: Path) -> None:
    base = _pages(tmp_path / "base.jsonl", ("A", "a0"), ("B", "b0"), ("C", "c0"), ("D", "d0"))
    one = _pages(tmp_path / "one.jsonl", ("B", "b1"), ("E", "e1"), ("F", "f1"))
    two = _pages(tmp_path / "two.jsonl", ("E", "e2"), ("G", "g2"))
    edits = CorpusEdits((one, two), (_ids(tmp_path, "rm.txt", "C", "F"),))
    pages = [(p.id, p.lines[0]) for p in iter_edited_pages(base, edits, ErrorPolicy())]
    assert pages == [("A", "a0"), ("D", "d0"), ("B", "b1"), ("E", "e2"), ("G", "g2")]
    # the same corpus from an already indexed parent (the base plus the first add file)
    parent = CorpusEdits((one,), ())
    plan = edit_plan({"A", "C", "D", "B", "E", "F"}, parent, edits, ErrorPolicy())
    assert plan.drop == {"C", "F", "E"}
    assert [(p.id, p.lines[0]) for p in plan.added_pages(ErrorPolicy())] == [("E", "e2"), ("G", "g2")]


def test_a_repeated_id_in_an_add_file_names_the_file(tmp_path: Path) -> None:
    base = _pages(tmp_path / "base.jsonl", ("A", "a0"))
    add = _pages(tmp_path / "add.jsonl", ("P", "p1"), ("P", "p2"))
    with pytest.raises(InputError, match=r"add.jsonl: page id 'P' appears twice"):
        list(iter_edited_pages(base, CorpusEdits((add,)), ErrorPolicy()))
    policy = ErrorPolicy(skip=True)
    pages = [(p.id, p.lines[0]) for p in iter_edited_pages(base, CorpusEdits((add,)), policy)]
    assert pages == [("A", "a0"), ("P", "p1")] and policy.counts == {"duplicate_page": 1}


def test_bad_records_in_an_add_file_are_counted_once(tmp_path: Path) -> None:
    base = _pages(tmp_path / "base.jsonl", ("A", "a0"))
    add = _pages(tmp_path / "add.jsonl", ("P", "p1"))
    add.write_text(add.read_text() + "not json\n")
    with pytest.raises(InputError, match=r"add.jsonl:2"):
        list(iter_edited_pages(base, CorpusEdits((add,)), ErrorPolicy()))
    policy = ErrorPolicy(skip=True)
    assert [p.id for p in iter_edited_pages(base, CorpusEdits((add,)), policy)] == ["A", "P"]
    assert sum(policy.counts.values()) == 1


def test_remove_files_name_the_line_of_an_unknown_page(tmp_path: Path) -> None:
    base = _pages(tmp_path / "base.jsonl", ("A", "a0"))
    empty = _ids(tmp_path, "empty.txt", "# nothing")
    with pytest.raises(InputError, match=r"empty.txt: no page ids in this file"):
        list(iter_edited_pages(base, CorpusEdits((), (empty,)), ErrorPolicy()))
    unknown = _ids(tmp_path, "rm.txt", "A", "Z")
    with pytest.raises(InputError, match=r"rm.txt:2: page 'Z' is not in the corpus"):
        list(iter_edited_pages(base, CorpusEdits((), (unknown,)), ErrorPolicy()))
