from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from garag.artifacts import ArtifactError, artifact_dir, build_artifact, read_meta


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


# ---- damaged artifacts are detected on load; interrupted builds leave nothing behind


def _flip_one_byte(path: Path) -> bytes:
    data = path.read_bytes()
    i = len(data) // 2
    path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :])
    return data


@pytest.mark.slow
def test_a_flipped_byte_in_any_index_artifact_is_refused_until_rebuilt(tmp_path: Path, capsys) -> None:
    from app.cli import main

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    settings = [
        "data.dataset=custom", f"data.claims={fixtures / 'claims.jsonl'}",
        f"data.corpus={fixtures / 'wiki-pages'}",
        f"paths.cache_dir={tmp_path}", "retrieval.retrievers=[bm25, dense, pages, graal]", "dense.device=cpu",
    ]  # fmt: skip
    argv = ["index", "--no-progress"] + [x for s in settings for x in ("--set", s)]
    assert main(argv) == 0
    artifacts = sorted(p for p in tmp_path.iterdir() if p.is_dir() and (p / "meta.json").is_file())
    kinds = {p.name.split("-")[0] for p in artifacts}
    assert kinds >= {"store", "bm25", "dense", "pages", "graal"}, kinds
    for artifact in artifacts:
        meta = json.loads((artifact / "meta.json").read_text(encoding="utf-8"))
        if "files" not in meta:
            continue  # not a build_artifact directory
        biggest = max(meta["files"], key=lambda rel: meta["files"][rel]["bytes"])
        original = _flip_one_byte(artifact / biggest)
        capsys.readouterr()
        assert main(argv) == 2, artifact.name
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("garag:")]
        assert err == [
            f"garag: error: {artifact / biggest}: cached artifact does not match its checksum from the build "
            f"(damaged); rebuild it with `garag index --force` or delete {artifact}"
        ]
        (artifact / biggest).write_bytes(original)
    assert main(argv) == 0
    damaged = next(p for p in artifacts if p.name.startswith("bm25-"))
    _flip_one_byte(damaged / max(json.loads((damaged / "meta.json").read_text())["files"]))
    assert main([*argv, "--force"]) == 0  # a forced rebuild replaces the damaged artifact
    assert main(argv) == 0


def test_interrupted_builds_are_cleaned_by_the_next_build(tmp_path: Path) -> None:
    import os

    kwargs = {"kind": "toy", "settings": {"a": 1}, "fingerprint": "fp"}
    final = artifact_dir(tmp_path, **kwargs)
    dead = tmp_path / f".{final.name}.tmp-999999999-abc"  # no such process
    alive = tmp_path / f".{final.name}.tmp-{os.getpid()}-def"  # a build in progress
    for d in (dead, alive):
        d.mkdir(parents=True)
        (d / "half.bin").write_bytes(b"x")

    def build(tmp: Path) -> dict:
        (tmp / "data.bin").write_bytes(b"artifact")
        return {}

    path = build_artifact(tmp_path, build=build, **kwargs)
    assert not dead.exists() and alive.exists()
    assert read_meta(path)["files"] == {
        "data.bin": {"bytes": 8, "sha256": hashlib.sha256(b"artifact").hexdigest()}
    }
    (path / "data.bin").write_bytes(b"artifacT")
    with pytest.raises(ArtifactError, match=r"data\.bin: cached artifact does not match its checksum"):
        build_artifact(tmp_path, build=build, **kwargs)
    (path / "data.bin").write_bytes(b"short")
    with pytest.raises(ArtifactError, match=r"data\.bin: cached artifact has 5 bytes, 8 when built"):
        build_artifact(tmp_path, build=build, **kwargs)
    (path / "meta.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"meta\.json: damaged cache metadata"):
        build_artifact(tmp_path, build=build, **kwargs)


def test_sqlite_cache_errors_name_the_file_and_call_only_unreadable_files_damaged(tmp_path: Path) -> None:
    import sqlite3

    from garag.artifacts import sqlite_cache_error

    path = tmp_path / "c.sqlite"
    damaged = sqlite_cache_error(
        path, "test cache", sqlite3.DatabaseError("file is not a database"), "delete it"
    )
    assert isinstance(damaged, ArtifactError)
    assert str(damaged) == f"{path}: damaged test cache (file is not a database); delete it"
    locked = sqlite_cache_error(
        path, "test cache", sqlite3.OperationalError("database is locked"), "delete it"
    )
    assert type(locked) is ValueError  # not "damaged", and no advice to delete a healthy file
    assert str(locked) == f"{path}: cannot use the test cache (database is locked)"
    closed = sqlite3.ProgrammingError("Cannot operate on a closed database.")
    assert sqlite_cache_error(path, "test cache", closed, "delete it") is closed  # garag's own bug: as it is
