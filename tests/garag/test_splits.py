"""Tune / report splits: whole groups of claims sharing a gold page, written once, tied to their claims."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from garag.datasets import get_dataset
from garag.splits import SplitError, claim_groups, read_split, split_claims, write_split
from garag.types import Claim, SentenceId


def _claim(i: int, *pages: str) -> Claim:
    return Claim(i, f"claim {i}", "SUPPORTS", (tuple(SentenceId(p, 0) for p in pages),) if pages else ())


def test_groups_are_connected_through_shared_pages():
    claims = [_claim(1, "A"), _claim(2, "B"), _claim(3, "A", "C"), _claim(4, "C", "D"), _claim(5), _claim(6)]
    groups = sorted(sorted(c.id for c in g) for g in claim_groups(claims))
    assert groups == [[1, 3, 4], [2], [5], [6]]  # 1-3 share A, 3-4 share C; no-evidence claims alone


def test_split_keeps_groups_whole_and_is_deterministic():
    # groups of 4 claims on one page; every 20th claim also names the next group's page (bigger groups)
    claims = [_claim(i, f"P{i // 4}", *([f"P{i // 4 + 1}"] if i % 20 == 0 else [])) for i in range(200)]
    assert len(claim_groups(claims)) == 40  # 50 pages, 10 links
    parts = split_claims(claims, 0.4, seed=7)
    assert sorted(parts["tune"] + parts["report"]) == list(range(200))
    assert split_claims(claims, 0.4, seed=7) == parts and split_claims(claims, 0.4, seed=8) != parts
    where = {i: p for p, ids in parts.items() for i in ids}
    for g in claim_groups(claims):
        assert len({where[c.id] for c in g}) == 1
    with pytest.raises(ValueError, match="tune_fraction"):
        split_claims(claims, 1.0, seed=1)


def test_written_split_is_refused_for_other_claims(tmp_path: Path):
    claims_file = tmp_path / "claims.jsonl"
    claims_file.write_text("x\n", encoding="utf-8")
    claims = [_claim(i, f"P{i}") for i in range(10)]
    doc = write_split(tmp_path / "s.json", "d", claims_file, claims, 0.5, seed=1)
    assert doc["counts"] == {"tune": 5, "report": 5}
    parts = read_split(tmp_path / "s.json", claims_file)
    assert parts["tune"] | parts["report"] == frozenset(range(10))
    claims_file.write_text("y\n", encoding="utf-8")
    with pytest.raises(SplitError, match="made from another claims file"):
        read_split(tmp_path / "s.json", claims_file)
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(SplitError, match="bad.json: not valid JSON"):
        read_split(tmp_path / "bad.json", claims_file)
    with pytest.raises(SplitError, match="no such split file"):
        read_split(tmp_path / "none.json", claims_file)


@pytest.mark.parametrize("name", ["fever", "hover"])
def test_committed_splits_share_no_gold_page_between_parts(name: str):
    every = list(get_dataset(name).claims())
    tune = list(get_dataset(name, part="tune").claims())
    report = list(get_dataset(name, part="report").claims())
    assert len(tune) + len(report) == len(every) and tune and report
    assert 0.3 < len(tune) / len(every) < 0.5
    pages = [{s.page for c in part for g in c.evidence for s in g} for part in (tune, report)]
    assert not pages[0] & pages[1]
    if name == "hover":  # every hop count is in both parts
        assert {c.num_hops for c in tune} == {c.num_hops for c in report} == {2, 3, 4}


def test_cli_writes_a_split_once(tmp_path: Path, tiny_claims: Path, tiny_corpus: Path, capsys):
    out = tmp_path / "split.json"
    args = ["split", "--set", "data.dataset=custom", "--set", f"data.claims={tiny_claims}",
            "--set", f"data.corpus={tiny_corpus}", "--out", str(out), "--tune-fraction", "0.5"]  # fmt: skip
    assert main(args) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["counts"]["tune"] + written["counts"]["report"] == len(list(open(tiny_claims)))
    assert main(args) == 2
    assert "exists: a split is made once" in capsys.readouterr().err
    # a run over one part reads only that part's claims
    ds = get_dataset("custom", str(tiny_claims), str(tiny_corpus), part="report", split=str(out))
    assert sorted(c.id for c in ds.claims()) == sorted(written["report"])
