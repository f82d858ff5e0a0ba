from __future__ import annotations

import re
from pathlib import Path

import pytest

from garag.errors import ErrorPolicy, InputError
from garag.jsonl import ResumableJsonl, read_records


def test_resume_keeps_complete_lines_and_cuts_a_torn_one(tmp_path: Path):
    path = tmp_path / "pred.jsonl"
    with ResumableJsonl(path) as out:
        out.write({"id": 1, "x": "a"})
        out.write({"id": 2, "x": "b"})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"id": 3, "x": "tor')  # killed mid-write
    again = ResumableJsonl(path)
    assert again.done == {1, 2} and again.is_done(2) and not again.is_done(3)
    with again as out:
        out.write({"id": 3, "x": "c"})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == ['{"id": 1, "x": "a"}', '{"id": 2, "x": "b"}', '{"id": 3, "x": "c"}']


def _three(path: Path) -> bytes:
    with ResumableJsonl(path) as out:
        for i in (1, 2, 3):
            out.write({"id": i})
    return path.read_bytes()


def test_a_corrupt_middle_line_is_refused_and_nothing_is_cut(tmp_path: Path):
    path = tmp_path / "pred.jsonl"
    good = _three(path)
    lines = good.splitlines(keepends=True)
    path.write_bytes(lines[0] + b'{"id": 2, "x": \n' + lines[2])
    before = path.read_bytes()
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:2: not valid JSON"):
        ResumableJsonl(path)
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:2: not valid JSON"):
        read_records(path)
    assert path.read_bytes() == before


def test_reading_never_writes_and_skips_only_when_asked(tmp_path: Path):
    path = tmp_path / "pred.jsonl"
    good = _three(path)
    path.write_bytes(good + b'[1, 2]\n\xff\xfe\n{"x": 1}\n{"id": 9, "x": "tor')
    before = path.read_bytes()
    policy = ErrorPolicy(skip=True)
    assert [r["id"] for r in read_records(path, policy=policy)] == [1, 2, 3]
    assert dict(policy.counts) == {"bad_json": 2, "bad_record": 1, "torn_line": 1}
    assert any(":7: incomplete last line" in e for e in policy.examples)
    assert path.read_bytes() == before
    # Opening the writer without writing cuts nothing either; only `with` (appending) does.
    assert ResumableJsonl(tmp_path / "missing.jsonl").records == []
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(good + b'{"id": 4, "x": "tor')
    reader = ResumableJsonl(torn)
    assert torn.read_bytes().endswith(b'"tor') and reader.done == {1, 2, 3}
    with reader:
        pass
    assert torn.read_bytes() == good


def test_missing_file_and_directory_are_named(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_records(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="is a directory"):
        read_records(tmp_path)
