from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from garag.errors import ErrorPolicy, InputError
from garag.wiki import corpus_fingerprint, iter_pages, parse_lines_field


def _write(path: Path, rows: list) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_lines_keep_empty_slots_and_links():
    texts, links = parse_lines_field("0\tFirst .\tA\tB\n1\t\n2\tThird .", "f", 1)
    assert texts == ("First .", "", "Third .")
    assert links == (("A", "B"), (), ())


def test_lines_with_gaps_are_filled_so_numbers_hold():
    texts, _ = parse_lines_field("0\tA .\n3\tD .", "f", 1)
    assert texts == ("A .", "", "", "D .")


def test_lines_backwards_number_is_an_error_naming_file_and_line():
    with pytest.raises(InputError, match=r"wiki\.jsonl:7: sentence number 0 repeats"):
        parse_lines_field("0\tA .\n0\tB .", "wiki.jsonl", 7)


def test_tiny_corpus_pages(tiny_corpus: Path):
    pages = {p.id: p for p in iter_pages(tiny_corpus)}
    assert len(pages) == 12
    bullock = pages["Sandra_Bullock"]
    assert bullock.lines[0] == "" and bullock.lines[3].startswith("She was an executive producer")
    assert [n for n, _, _ in bullock.sentences()] == [2, 3]


def test_bad_json_raises_with_file_and_line(tmp_path: Path):
    f = _write(tmp_path / "wiki-001.jsonl", [{"id": "A", "lines": "0\tx ."}, "{not json"])
    with pytest.raises(InputError, match=r"wiki-001\.jsonl:2: not valid JSON"):
        list(iter_pages(f))


def test_skip_mode_counts_bad_lines(tmp_path: Path):
    f = _write(
        tmp_path / "wiki-001.jsonl",
        [{"id": "A", "lines": "0\tx ."}, "{bad", {"id": "B"}, {"id": "C", "lines": ""}],
    )
    policy = ErrorPolicy(skip=True)
    pages = list(iter_pages(f, policy))
    assert [p.id for p in pages] == ["A", "C"]
    assert policy.counts == {"bad_json": 1, "missing_lines": 1}


def test_empty_id_page_of_the_official_dump_is_ignored(tmp_path: Path):
    f = _write(
        tmp_path / "wiki-001.jsonl", [{"id": "", "text": "", "lines": ""}, {"id": "A", "lines": "0\tx ."}]
    )
    assert [p.id for p in iter_pages(f)] == ["A"]


def test_zip_release_reads_like_the_directory(tiny_corpus: Path, tmp_path: Path):
    z = tmp_path / "wiki-pages.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.write(tiny_corpus / "wiki-001.jsonl", "wiki-pages/wiki-001.jsonl")
    assert [p.id for p in iter_pages(z)] == [p.id for p in iter_pages(tiny_corpus)]


def test_fingerprint_changes_with_content(tmp_path: Path):
    f = _write(tmp_path / "w.jsonl", [{"id": "A", "lines": "0\tx ."}])
    before = corpus_fingerprint(f)
    _write(f, [{"id": "A", "lines": "0\ty ."}])
    assert corpus_fingerprint(f) != before


def test_missing_corpus_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="wiki-pages corpus not found"):
        list(iter_pages(tmp_path / "nope"))
