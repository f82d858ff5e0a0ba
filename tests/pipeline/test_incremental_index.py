"""Incremental indexing: an edited corpus's indexes derived from its parent's equal a rebuild.

Real FEVER pages (the embedded corpus): the base lacks some pages that other pages link to; the
edit adds them back (so base sentences must be re-linked to the new entities), replaces two pages
with shorter versions and removes pages that others link to.  Every retriever (BM25, MiniLM/FAISS,
pages, GRAAL) is derived, then rebuilt from scratch with ``force``, and both answer the same
queries with the same sentences and scores.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from garag.artifacts import read_meta
from garag.config import load_config
from garag.datasets import fever
from garag.errors import InputError
from garag.text import detokenize
from garag.wiki import Page, iter_pages
from pipeline.retrieval import RetrievalPipeline
from retrievers.graal.aliases import title_aliases
from retrievers.graal.graph_store import GraphStore
from retrievers.graal.retriever import GRAPH_DB

RETRIEVERS = ["bm25", "dense", "pages", "graal"]


def _line(page: Page) -> str:
    lines = "\n".join(
        "\t".join([str(n), text, *page.links[n]]) if text else f"{n}\t" for n, text in enumerate(page.lines)
    )
    return json.dumps({"id": page.id, "text": " ".join(t for t in page.lines if t), "lines": lines})


def _write(path: Path, pages: list[Page]) -> Path:
    path.write_text("".join(_line(p) + "\n" for p in pages), encoding="utf-8")
    return path


def _mentions(pages: list[Page]) -> dict[str, set[str]]:
    """Page -> the other pages whose text names it by a two- or three-word title alias."""
    keys: dict[str, set[str]] = defaultdict(set)
    for page in pages:
        for key, _ in title_aliases(page.id):
            if " " in key:
                keys[key].add(page.id)
    found: dict[str, set[str]] = defaultdict(set)
    for page in pages:
        for _, text, _ in page.sentences():
            words = detokenize(text).lower().replace(",", " ").replace(".", " ").split()
            for n in (2, 3):
                for i in range(len(words) - n + 1):
                    for target in keys.get(" ".join(words[i : i + n]), ()):
                        if target != page.id:
                            found[target].add(page.id)
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A base corpus, an add file, a remove file and the queries, from real FEVER pages.

    Ten pages that other pages name (Golden Globe Award, New York and the like) and up to ten
    pages naming each: six are left out of the base and added by the edit, four are removed.
    """
    root = tmp_path_factory.mktemp("incremental")
    pages = [p for p in itertools.islice(iter_pages(fever().corpus_path), 3000) if any(p.sentences())]
    mentioned = _mentions(pages)
    targets = sorted(mentioned, key=lambda t: (-len(mentioned[t]), t))[1:11]  # not United_States
    chosen = set(targets).union(*(sorted(mentioned[t])[:10] for t in targets))
    pages = [p for p in pages if p.id in chosen]
    late, gone = set(targets[:6]), targets[6:]
    replaced = [p for p in pages if p.id not in targets and len(p.lines) > 3][:2]
    base = _write(root / "base.jsonl", [p for p in pages if p.id not in late])
    shorter = [Page(p.id, p.lines[:2], p.links[:2]) for p in replaced]
    add = _write(root / "add.jsonl", [p for p in pages if p.id in late] + shorter)
    remove = root / "remove.txt"
    remove.write_text("# pages to drop\n" + "\n".join(gone) + "\n", encoding="utf-8")
    queries = [c.text for c in fever().claims()][:25]
    queries += [f"{p.id.replace('_', ' ')} {p.lines[0]}" for p in pages if p.id in targets]
    return {
        "root": root,
        "base": base,
        "add": add,
        "remove": remove,
        "queries": queries,
        "late": late,
        "gone": gone,
        "n_pages": len(pages),
    }


def _config(root: Path, corpus: dict, edits: bool):  # noqa: ANN202
    data = {"dataset": "custom", "claims": str(fever().claims_path), "corpus": str(corpus["base"])}
    if edits:
        data |= {"add_pages": [str(corpus["add"])], "remove_pages": [str(corpus["remove"])]}
    raw = {
        "data": data,
        "paths": {"cache_dir": str(root / "cache")},
        "retrieval": {"retrievers": RETRIEVERS, "k": 30},
        "fusion": {"depth": 30},
        "graal": {"parse": "tagger", "disambiguation": "words"},
    }
    path = root / ("edited.yaml" if edits else "base.yaml")
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return load_config(path)


def _answers(pipe: RetrievalPipeline, queries: list[str]) -> dict:
    out = {}
    for name, retriever in pipe.retrievers.items():
        for q, hits in zip(queries, retriever.retrieve_batch(queries, 30), strict=True):
            out[(name, q)] = [(h.sentence.page, h.sentence.line, h.score) for h in hits]
    return out


def _tables(graph: GraphStore) -> tuple:
    """A graph's page tables: page ids, their numbers and sizes, alias keys and pages."""
    return graph.names, graph.index, graph.sizes, graph.aliases._keys, graph.aliases._pages


def test_derived_indexes_equal_a_rebuild(corpus: dict) -> None:
    root = corpus["root"]
    RetrievalPipeline(_config(root, corpus, edits=False), progress=False).build()
    edited = RetrievalPipeline(_config(root, corpus, edits=True), progress=False)
    artifacts = edited.build()

    metas = {name: read_meta(path) for name, path in artifacts.items()}
    assert all("derived_from" in m for m in metas.values()), metas
    first_new = min(r for rows in edited.store.rows_of_pages(sorted(corpus["late"])).values() for r in rows)
    assert metas["bm25"]["tokenised"] == len(edited.store) - first_new  # only the new sentences
    graph = metas["graal"]["graph"]
    assert graph["sentences"] == len(edited.store) - first_new and graph["removed"] == 4 + 2
    assert graph["relinked"] > 0  # base sentences that name the added or removed pages
    pages = edited.store.page_names()
    assert set(pages[-8:]) >= corpus["late"] and not set(pages) & set(corpus["gone"])
    derived = _answers(edited, corpus["queries"])
    # the opened graph took over the builder's page tables (not read again): they equal a fresh read
    assert _tables(edited.retrievers["graal"].graph) == _tables(GraphStore(artifacts["graal"] / GRAPH_DB))
    derived_graph = root / "derived-graph.db"
    shutil.copyfile(artifacts["graal"] / GRAPH_DB, derived_graph)
    rows = list(edited.store.iter_rows())
    edited.store.close()

    rebuilt = RetrievalPipeline(_config(root, corpus, edits=True), progress=False)
    assert rebuilt.build(force=True) == artifacts  # same corpus, same artifact directories
    assert not any("derived_from" in read_meta(p) for p in artifacts.values())
    assert list(rebuilt.store.iter_rows()) == rows
    again = _answers(rebuilt, corpus["queries"])
    assert sum(len(h) for h in again.values()) > 500
    for key in again:
        assert derived[key] == again[key], key
    a, b = GraphStore(derived_graph), rebuilt.retrievers["graal"].graph
    assert _tables(b) == _tables(GraphStore(artifacts["graal"] / GRAPH_DB)) == _tables(a)
    assert a.names == b.names
    assert a.edge_set() == b.edge_set() and a.mention_set() == b.mention_set()
    assert {e: a.stats(e) for e in range(len(a.names))} == {e: b.stats(e) for e in range(len(b.names))}


def test_a_second_edit_derives_from_the_first(corpus: dict, tmp_path: Path) -> None:
    root = corpus["root"]
    first = RetrievalPipeline(_config(root, corpus, edits=True), progress=False)
    first_store = first.build()["store"]
    more = tmp_path / "more.jsonl"
    more.write_text(
        json.dumps(
            {"id": "Garag_Test_Page", "text": "", "lines": "0\tGarag Test Page is a page about tests ."}
        )
        + "\n",
        encoding="utf-8",
    )
    config = _config(root, corpus, edits=True)
    config = config.model_copy(
        update={"data": config.data.model_copy(update={"add_pages": [*config.data.add_pages, str(more)]})}
    )
    pipe = RetrievalPipeline(config, progress=False)
    artifacts = pipe.build()
    assert read_meta(artifacts["store"])["derived_from"] == first_store.name
    assert read_meta(artifacts["bm25"])["tokenised"] == 1
    hits = pipe.retrievers["bm25"].retrieve("a page about tests", 3)
    assert hits[0].sentence.page == "Garag_Test_Page"


def test_removing_an_unknown_page_names_the_file_and_line(corpus: dict, tmp_path: Path) -> None:
    bad = tmp_path / "remove.txt"
    bad.write_text("\n\nNo_Such_Page_Anywhere\n", encoding="utf-8")
    config = _config(corpus["root"], corpus, edits=True)
    config = config.model_copy(update={"data": config.data.model_copy(update={"remove_pages": [str(bad)]})})
    with pytest.raises(InputError, match=r"remove.txt:3: page 'No_Such_Page_Anywhere' is not in the corpus"):
        RetrievalPipeline(config, progress=False).build()


def test_cli_add_and_remove(corpus: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from app.cli import main

    _config(corpus["root"], corpus, edits=False)
    base = corpus["root"] / "base.yaml"
    edits = ["--add", str(corpus["add"]), "--remove", str(corpus["remove"])]
    args = ["index", "--config", str(base), *edits, "--set", "retrieval.retrievers=[bm25]", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr()
    store = Path(json.loads(out.out)["store"])
    assert read_meta(store)["pages"] == corpus["n_pages"] - len(corpus["gone"])
    assert "later commands use it when given the same --add/--remove" in out.err

    bad = tmp_path / "remove.txt"
    bad.write_text("No_Such_Page_Anywhere\n", encoding="utf-8")
    assert main(["index", "--config", str(base), "--remove", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"garag: error: {bad}:1: page 'No_Such_Page_Anywhere' is not in the corpus, " + (
        "so it cannot be removed"
    )


def test_config_shows_the_edit_flags(corpus: dict, capsys: pytest.CaptureFixture) -> None:
    from app.cli import main

    assert main(["config", "--remove", str(corpus["remove"])]) == 0
    assert f"remove_pages: [{corpus['remove']}]  # default + --remove" in capsys.readouterr().out
