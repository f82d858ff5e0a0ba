from __future__ import annotations

import json
from pathlib import Path

import pytest

from garag.errors import ErrorPolicy, InputError
from garag.store import SentenceStore, build_store
from garag.types import SentenceId


def test_lookup_by_id_and_by_page(tiny_store: SentenceStore):
    s = tiny_store.get(SentenceId("Sandra_Bullock", 3))
    assert s is not None and "executive producer" in s.text
    assert tiny_store.get(SentenceId("Sandra_Bullock", 0)) is None  # empty line slot
    assert tiny_store.get(SentenceId("No_such_page", 0)) is None
    assert [x.id.line for x in tiny_store.page("The_Beatles")] == [0, 1, 3]
    assert tiny_store.page("No_such_page") == []


def test_rows_are_dense_and_round_trip(tiny_store: SentenceStore):
    n = len(tiny_store)
    rows = [r for r, _, _ in tiny_store.iter_rows()]
    assert rows == list(range(n))
    sents = tiny_store.sentences_by_rows([3, 0])
    assert [tiny_store.row_of(s.id) for s in sents] == [3, 0]
    with pytest.raises(KeyError):
        tiny_store.sentences_by_rows([n + 5])


def test_pages_text_stream_groups_by_page(tiny_store: SentenceStore):
    pages = {name: texts for _, name, texts in tiny_store.iter_pages_text()}
    assert len(pages) == 12
    assert len(pages["The_Beatles"]) == 3


def test_page_streams_equal_the_page_lookups_without_the_page_index(tmp_path: Path):
    """What the graph build streams: pages in order (from any page on), with their sentences and
    links, and each page's sentence count and first sentence, an empty page included."""
    f = tmp_path / "w.jsonl"
    pages = [
        {"id": "A", "lines": "0\tA is a letter .\n1\t\n2\tIt links to B .\tB\tB"},
        {"id": "Empty", "lines": ""},
        {"id": "B", "lines": "0\tB follows A ."},
        {"id": "C", "lines": "0\tC is third .\n1\tC is round ."},
    ]
    f.write_text("".join(json.dumps(p) + "\n" for p in pages))
    build_store(f, tmp_path / "s.db", progress=False)
    lookups = SentenceStore(tmp_path / "s.db")
    names = lookups.page_names()
    assert names == ["A", "Empty", "B", "C"]
    store = SentenceStore(tmp_path / "s.db")  # the streams' own store: they never load its page index
    for first in (0, 1, 3):
        by_page = lookups.pages(names[first:])
        meta = [
            (p, len(by_page.get(p, [])), by_page[p][0].text if p in by_page else "") for p in names[first:]
        ]
        assert list(store.iter_pages(first)) == [(p, by_page[p]) for p in names[first:] if p in by_page]
        assert list(store.iter_page_meta(first)) == meta
        assert store._page_idx is None
    assert list(store.iter_pages(0))[0][1][1].links == ("B", "B")
    assert ("Empty", 0, "") in list(store.iter_page_meta(0))


def test_duplicate_page_is_an_error(tmp_path: Path):
    f = tmp_path / "w.jsonl"
    f.write_text(
        json.dumps({"id": "A", "lines": "0\tx ."}) + "\n" + json.dumps({"id": "A", "lines": "0\ty ."}) + "\n"
    )
    with pytest.raises(InputError, match="page id 'A' appears twice"):
        build_store(f, tmp_path / "s.db", progress=False)
    stats = build_store(f, tmp_path / "s2.db", ErrorPolicy(skip=True), progress=False)
    assert stats["pages"] == 1 and stats["skipped"] == {"duplicate_page": 1}


def test_links_are_kept(tmp_path: Path):
    f = tmp_path / "w.jsonl"
    f.write_text(json.dumps({"id": "A", "lines": "0\tx is in y .\ty\tY_-LRB-place-RRB-"}) + "\n")
    build_store(f, tmp_path / "s.db", progress=False)
    assert SentenceStore(tmp_path / "s.db").get(SentenceId("A", 0)).links == ("y", "Y_-LRB-place-RRB-")


def test_missing_store_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="run `garag index` first"):
        SentenceStore(tmp_path / "none.db")
