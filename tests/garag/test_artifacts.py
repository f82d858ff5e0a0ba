from __future__ import annotations

from pathlib import Path

import pytest

from garag.artifacts import build_artifact, read_meta


def test_build_once_then_reuse(tmp_path: Path):
    calls = []

    def build(d: Path) -> dict:
        calls.append(d)
        (d / "x.txt").write_text("hello")
        return {"n": 1}

    a = build_artifact(tmp_path, "thing", {"k": 1}, "fp", build)
    b = build_artifact(tmp_path, "thing", {"k": 1}, "fp", build)
    assert a == b and len(calls) == 1
    assert read_meta(a)["n"] == 1 and read_meta(a)["settings"] == {"k": 1}
    c = build_artifact(tmp_path, "thing", {"k": 2}, "fp", build)
    assert c != a and len(calls) == 2
    build_artifact(tmp_path, "thing", {"k": 1}, "fp", build, force=True)
    assert len(calls) == 3


def test_failed_build_leaves_nothing(tmp_path: Path):
    def build(d: Path) -> dict:
        (d / "partial").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        build_artifact(tmp_path, "thing", {}, "fp", build)
    assert list(tmp_path.iterdir()) == []
