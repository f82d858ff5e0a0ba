from __future__ import annotations

from pathlib import Path

from garag.jsonl import ResumableJsonl


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
