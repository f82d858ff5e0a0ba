# ruff: noqa: E501  (the case table keeps one case per line or two)
"""A corpus of bad inputs, each run through the real CLI: one error line naming the file and line
or the key, the expected exit code, no traceback, and every input file's bytes unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD_CLAIM = {"id": 1, "verifiable": "VERIFIABLE", "label": "SUPPORTS", "claim": "The Beatles formed.",
              "evidence": [[[1, 1, "The_Beatles", 0]]]}  # fmt: skip
GOOD_PAGE = {"id": "P", "text": "A page .", "lines": "0\tA page .\n1\tMore ."}


def _jsonl(*records: object) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _claim(**changes: object) -> dict:
    return {**GOOD_CLAIM, **changes}


def _page(**changes: object) -> dict:
    return {**GOOD_PAGE, **changes}


def _prediction(**changes: object) -> dict:
    return {"id": 1, "predicted_label": "SUPPORTS", "predicted_evidence": [["The_Beatles", 0]], **changes}


# (case id, files under the case directory, CLI arguments, exit code, message pattern).
# "{d}" in arguments and patterns is the case directory; "{corpus}" / "{claims}" the good fixtures.
PREDICT = ["predict", "--set", "data.dataset=custom", "--set", "data.corpus={corpus}", "--out", "{d}/out"]
INDEX = [
    "index",
    "--no-progress",
    "--set",
    "data.dataset=custom",
    "--set",
    "data.claims={claims}",
    "--set",
    "retrieval.retrievers=[bm25]",
]
SCORE = ["evaluate", "--set", "data.dataset=custom", "--set", "data.claims={claims}",
         "--set", "data.corpus={corpus}", "--predictions"]  # fmt: skip
CASES = [
    # --- config files and --set values
    ("set-k-zero", {}, ["config", "--set", "retrieval.k=0"], 2, r"retrieval\.k: must be >= 1, got 0"),
    ("set-rrf-inf", {}, ["config", "--set", "fusion.rrf_k=.inf"], 2, r"fusion\.rrf_k: must be a finite number"),
    ("set-b-range", {}, ["config", "--set", "bm25.b=2"], 2, r"bm25\.b: must be in \[0, 1\], got 2"),
    ("set-unknown-section", {}, ["config", "--set", "nope.x=1"], 2, r"config: unknown key\(s\) \['nope'\]"),
    ("set-unknown-key", {}, ["config", "--set", "bm25.kk=1"], 2, r"bm25: unknown key\(s\) \['kk'\]"),
    ("set-bool-type", {}, ["config", "--set", "data.skip_bad_lines=maybe"], 2,
     r"data\.skip_bad_lines: expected true/false, got 'maybe'"),
    ("set-max-length", {}, ["config", "--set", "verifier.max_length=8"], 2, r"verifier\.max_length: must be in"),
    ("set-temperature", {}, ["config", "--set", "llm.temperature=-1"], 2, r"llm\.temperature: must be in \[0, 2\]"),
    ("set-bad-yaml", {}, ["config", "--set", "bm25.k1=[1"], 2, r"--set 'bm25\.k1=\[1': the value is not valid YAML"),
    ("set-no-equals", {}, ["config", "--set", "bm25.k1"], 2, r"--set 'bm25\.k1': expected key\.path=value"),
    ("set-choice", {}, ["config", "--set", "pipeline.mode=graf"], 2, r"pipeline\.mode: must be one of"),
    ("config-missing", {}, ["config", "--config", "{d}/nope.yaml"], 2, r"{d}/nope\.yaml: config file not found"),
    ("config-yaml-syntax", {"c.yaml": b"bm25:\n  k1: [1\n"}, ["config", "--config", "{d}/c.yaml"], 2,
     r"{d}/c\.yaml:\d+: not valid YAML"),
    ("config-top-list", {"c.yaml": b"- 1\n"}, ["config", "--config", "{d}/c.yaml"], 2,
     r"{d}/c\.yaml: the top level must be a mapping"),
    ("config-not-utf8", {"c.yaml": b"bm25:\n  stemmer: \xff\n"}, ["config", "--config", "{d}/c.yaml"], 2,
     r"{d}/c\.yaml: not UTF-8"),
    ("config-bad-value", {"c.yaml": b"fusion:\n  depth: 0\n"}, ["config", "--config", "{d}/c.yaml"], 2,
     r"fusion\.depth: must be >= 1, got 0"),
    # --- command-line arguments
    ("arg-k-zero", {}, ["retrieve", "x", "-k", "0"], 2, r"argument -k: must be >= 1, got 0"),
    ("arg-k-text", {}, ["retrieve", "x", "-k", "many"], 2, r"argument -k: expected an integer >= 1"),
    ("arg-unknown-command", {}, ["frobnicate"], 2, r"argument command: invalid choice: 'frobnicate'"),
    ("arg-empty-claim", {}, ["retrieve", "  "], 2, r"the claim is empty"),
    ("arg-unknown-dataset", {}, ["predict", "--dataset", "fevr", "--out", "{d}/o"], 2, r"unknown dataset 'fevr'"),
    ("arg-sample-zero", {}, ["compare", "--configs", "a.yaml", "b.yaml", "--sample", "0"], 2,
     r"argument --sample: must be >= 1"),
    # --- claims files
    ("claims-missing", {}, [*PREDICT, "--set", "data.claims={d}/nope.jsonl"], 2, r"{d}/nope\.jsonl: no such file"),
    ("claims-directory", {"dir/x": b""}, [*PREDICT, "--set", "data.claims={d}/dir"], 2, r"{d}/dir: is a directory"),
    ("claims-bad-json", {"c.jsonl": _jsonl(_claim()) + b"{oops\n"}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"],
     2, r"{d}/c\.jsonl:2: not valid JSON"),
    ("claims-not-utf8", {"c.jsonl": _jsonl(_claim()) + b'{"id": 2, "claim": "\xff"}\n'},
     [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2, r"{d}/c\.jsonl:2: not UTF-8 text"),
    ("claims-array", {"c.jsonl": b"[1, 2]\n"}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2,
     r"{d}/c\.jsonl:1: a claim line must be a JSON object"),
    ("claims-no-id", {"c.jsonl": _jsonl({"claim": "x"})}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2,
     r"{d}/c\.jsonl:1: claim has no 'id'"),
    ("claims-list-id", {"c.jsonl": _jsonl(_claim(id=[1, 2]))}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2,
     r"{d}/c\.jsonl:1: claim id \[1, 2\] must be an integer or a string"),
    ("claims-bool-id", {"c.jsonl": _jsonl(_claim(id=True))}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2,
     r"{d}/c\.jsonl:1: claim id True must be"),
    ("claims-text-type", {"c.jsonl": _jsonl(_claim(claim=5))}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2,
     r"{d}/c\.jsonl:1: claim 1: field 'claim' must be a string"),
    ("claims-label", {"c.jsonl": _jsonl(_claim(label="TRUE"))}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2,
     r"{d}/c\.jsonl:1: claim 1: unknown label 'TRUE'"),
    ("claims-repeated-id", {"c.jsonl": _jsonl(_claim(), _claim())}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"],
     2, r"{d}/c\.jsonl:2: claim id 1 repeated"),
    ("claims-evidence-shape", {"c.jsonl": _jsonl(_claim(evidence=[[[1, "P", 0]]]))},
     [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2, r"{d}/c\.jsonl:1: claim 1: evidence item"),
    ("claims-evidence-line", {"c.jsonl": _jsonl(_claim(evidence=[[[1, 1, "P", -3]]]))},
     [*PREDICT, "--set", "data.claims={d}/c.jsonl"], 2, r"{d}/c\.jsonl:1: claim 1: bad evidence pointer"),
    ("claims-empty-text", {"c.jsonl": _jsonl(_claim(claim="  ?! "))}, [*PREDICT, "--set", "data.claims={d}/c.jsonl"],
     2, r"{d}/c\.jsonl: claim 1 \(#1\) has no words"),
    ("hover-evidence", {"h.jsonl": _jsonl({"id": 1, "claim": "x", "label": "SUPPORTED", "evidence": [["P"]]})},
     [*PREDICT, "--set", "data.claims={d}/h.jsonl", "--set", "data.claim_format=hover"], 2,
     r"{d}/h\.jsonl:1: claim 1: evidence item \['P'\] is not \[page, line\]"),
    ("hover-label", {"h.jsonl": _jsonl({"id": 1, "claim": "x", "label": "SUPPORTS", "evidence": []})},
     [*PREDICT, "--set", "data.claims={d}/h.jsonl", "--set", "data.claim_format=hover"], 2,
     r"{d}/h\.jsonl:1: claim 1: unknown label 'SUPPORTS'"),
    # --- wiki-pages corpora
    ("corpus-missing", {}, [*INDEX, "--set", "data.corpus={d}/nope"], 2, r"{d}/nope: wiki-pages corpus not found"),
    ("corpus-empty-dir", {"w/readme.txt": b"x"}, [*INDEX, "--set", "data.corpus={d}/w"], 2,
     r"{d}/w: no \.jsonl or \.zip wiki-pages files"),
    ("corpus-not-a-zip", {"w.zip": b"this is not a zip"}, [*INDEX, "--set", "data.corpus={d}/w.zip"], 2,
     r"{d}/w\.zip: not a readable zip file"),
    ("corpus-bad-json", {"w.jsonl": _jsonl(_page()) + b"{nope\n"}, [*INDEX, "--set", "data.corpus={d}/w.jsonl"],
     2, r"{d}/w\.jsonl:2: not valid JSON"),
    ("corpus-not-utf8", {"w.jsonl": _jsonl(_page()) + b'{"id": "\xff"}\n'}, [*INDEX, "--set", "data.corpus={d}/w.jsonl"],
     2, r"{d}/w\.jsonl:2: not UTF-8 text"),
    ("corpus-no-id", {"w.jsonl": _jsonl({"lines": "0\tx"})}, [*INDEX, "--set", "data.corpus={d}/w.jsonl"], 2,
     r"{d}/w\.jsonl:1: page has no string 'id'"),
    ("corpus-no-lines", {"w.jsonl": _jsonl(_page(lines=None))}, [*INDEX, "--set", "data.corpus={d}/w.jsonl"], 2,
     r"{d}/w\.jsonl:1: page 'P' has no string 'lines'"),
    ("corpus-line-number", {"w.jsonl": _jsonl(_page(lines="zero\tx"))}, [*INDEX, "--set", "data.corpus={d}/w.jsonl"],
     2, r"{d}/w\.jsonl:1: 'lines' entry does not start with a sentence number"),
    ("corpus-backwards", {"w.jsonl": _jsonl(_page(lines="1\tb\n0\ta"))}, [*INDEX, "--set", "data.corpus={d}/w.jsonl"],
     2, r"{d}/w\.jsonl:1: sentence number 0 repeats or goes backwards"),
    ("corpus-huge-line", {"w.jsonl": _jsonl(_page(lines="50000000\tx"))},
     [*INDEX, "--set", "data.corpus={d}/w.jsonl"], 2, r"{d}/w\.jsonl:1: sentence number 50000000 is out of range"),
    # --- predictions to score
    ("pred-missing", {}, [*SCORE, "{d}/nope.jsonl"], 2, r"{d}/nope\.jsonl: no predictions file"),
    ("pred-directory", {"p/x": b""}, [*SCORE, "{d}/p"], 2, r"{d}/p: is a directory"),
    ("pred-corrupt-middle", {"p.jsonl": _jsonl(_prediction()) + b"{bad\n" + _jsonl(_prediction(id=2))},
     [*SCORE, "{d}/p.jsonl"], 2, r"{d}/p\.jsonl:2: not valid JSON"),
    ("pred-torn-tail", {"p.jsonl": _jsonl(_prediction()) + b'{"id": 2, "pre'}, [*SCORE, "{d}/p.jsonl"], 2,
     r"{d}/p\.jsonl:2: incomplete last line"),
    ("pred-no-id", {"p.jsonl": _jsonl({"predicted_label": "SUPPORTS"})}, [*SCORE, "{d}/p.jsonl"], 2,
     r"{d}/p\.jsonl:1: the record has no 'id'"),
    ("pred-list-id", {"p.jsonl": _jsonl(_prediction(id=[1]))}, [*SCORE, "{d}/p.jsonl"], 2,
     r"{d}/p\.jsonl: prediction for claim \[1\]: the id must be an integer or a string"),
    ("pred-label", {"p.jsonl": _jsonl(_prediction(predicted_label="YES"))}, [*SCORE, "{d}/p.jsonl"], 2,
     r"{d}/p\.jsonl: prediction for claim 1: label 'YES' is not one of"),
    ("pred-evidence", {"p.jsonl": _jsonl(_prediction(predicted_evidence=[["P", "zero"]]))},
     [*SCORE, "{d}/p.jsonl"], 2, r"{d}/p\.jsonl: prediction for claim 1: evidence \['P', 'zero'\] has no line"),
    # --- run directories
    ("out-is-a-file", {"f": b"keep"}, ["predict", "--out", "{d}/f"], 2, r"--out {d}/f: exists and is not a directory"),
    ("run-missing", {}, ["evaluate", "--run", "{d}/no-run"], 2, r"no run '{d}/no-run'"),
]  # fmt: skip


def _fill(text: str, d: Path) -> str:
    return text.format(d=d, corpus=FIXTURES / "wiki-pages", claims=FIXTURES / "claims.jsonl")


@pytest.mark.parametrize(("case", "files", "argv", "code", "pattern"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_naming_where(tmp_path: Path, capsys, case, files, argv, code, pattern) -> None:
    d = tmp_path / case
    d.mkdir()
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}
    argv = [_fill(a, d) for a in argv] + ["--set", f"paths.cache_dir={d}/cache"]
    assert main(argv) == code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "Traceback" not in captured.out
    errors = [line for line in captured.err.splitlines() if line.startswith("garag: ")]
    assert len(errors) == 1, captured.err
    assert errors[0].startswith("garag: error: ")
    assert re.search(_fill(pattern, d).replace(str(d), re.escape(str(d))), errors[0]), errors[0]
    assert {p: p.read_bytes() for p in before} == before  # inputs untouched


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)
