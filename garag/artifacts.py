"""Artifact directories named by what built them, written atomically.

Every expensive artifact (sentence store, BM25 index, embeddings, FAISS index,
graphs, models) lives under one cache root in ``<kind>-<hash>`` where the hash
covers the settings and the corpus fingerprint.  A build writes into a
temporary sibling and renames it into place, so a crash never leaves a
half-written artifact that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def update_with_file(digest: Any, path: str | Path, block: int = 1 << 20) -> None:
    """Feed a file's bytes to a hashlib object, ``block`` bytes at a time."""
    with open(path, "rb") as fh:
        while buf := fh.read(block):
            digest.update(buf)


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (streamed)."""
    digest = hashlib.sha256()
    update_with_file(digest, path)
    return digest.hexdigest()


def settings_hash(*parts: Any) -> str:
    """Stable 16-hex hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def write_file_atomic(path: str | Path, write: Callable[[Path], None]) -> None:
    """Have ``write`` fill a temporary sibling of ``path``, fsync it, then rename it into place.

    A crash leaves either the old file or the new one, never a half-written one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, fsync and an atomic rename."""
    write_file_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write JSON to ``path`` through a temporary file and an atomic rename."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def artifact_dir(cache_root: str | Path, kind: str, settings: dict, fingerprint: str) -> Path:
    """The directory where an artifact with these settings lives (may not exist yet)."""
    return Path(cache_root) / f"{kind}-{settings_hash(kind, settings, fingerprint)}"


class ArtifactError(ValueError):
    """A cached artifact is damaged: its message names the file and how to rebuild it."""


def sqlite_cache_error(path: str | Path, what: str, exc: sqlite3.Error, fix: str) -> Exception:
    """The error to raise for an SQLite cache file that failed, naming the file.

    A file SQLite cannot read (not a database, malformed: a plain ``DatabaseError``) is damaged:
    an :class:`ArtifactError` that says ``fix``.  A file it cannot use now (locked, read-only, disk
    full: ``OperationalError``) is not called damaged: a ``ValueError`` with SQLite's reason.  Any
    other error (a closed connection, a wrong parameter) is garag's own and is returned as it is.
    """
    if isinstance(exc, sqlite3.OperationalError):
        return ValueError(f"{path}: cannot use the {what} ({exc})")
    if type(exc) is sqlite3.DatabaseError:
        return ArtifactError(f"{path}: damaged {what} ({exc}); {fix}")
    return exc


@contextmanager
def sqlite_cache_errors(path: str | Path, what: str, fix: str) -> Iterator[None]:
    """Raise the SQLite errors of the block as :func:`sqlite_cache_error` turns them."""
    try:
        yield
    except sqlite3.Error as exc:
        err = sqlite_cache_error(path, what, exc, fix)
        if err is exc:
            raise
        raise err from None


def read_meta(path: str | Path) -> dict | None:
    """The ``meta.json`` of a complete artifact, or None.

    Raises:
        ArtifactError: ``meta.json`` exists but is not a JSON object.
    """
    meta = Path(path) / "meta.json"
    if not meta.is_file():
        return None
    try:
        obj = json.loads(meta.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        obj = None
    if not isinstance(obj, dict):
        raise ArtifactError(f"{meta}: damaged cache metadata; delete {Path(path)} to rebuild it")
    return obj


def file_checksums(root: str | Path, exclude: tuple[str, ...] = ("meta.json",)) -> dict[str, dict]:
    """``{relative path: {"bytes": n, "sha256": hex}}`` of every file under ``root``."""
    root = Path(root)
    out = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = f.relative_to(root).as_posix()
        if rel not in exclude:
            out[rel] = {"bytes": f.stat().st_size, "sha256": file_sha256(f)}
    return out


def verify_checksums(root: str | Path, recorded: dict[str, dict], rebuild_hint: str) -> None:
    """Check the files recorded at build time: present, same size, same sha256.

    Raises:
        ArtifactError: naming the first damaged file and ``rebuild_hint``.
    """
    root = Path(root)
    for rel, want in recorded.items():
        f = root / rel
        if not f.is_file():
            problem = "is missing"
        elif f.stat().st_size != want["bytes"]:
            problem = f"has {f.stat().st_size} bytes, {want['bytes']} when built"
        elif file_sha256(f) != want["sha256"]:
            problem = "does not match its checksum from the build (damaged)"
        else:
            continue
        raise ArtifactError(f"{f}: cached artifact {problem}; {rebuild_hint}")


def _remove_stale_builds(final: Path) -> None:
    """Remove temporary directories that interrupted builds of ``final`` left behind.

    A temporary directory is named ``.<final>.tmp-<pid>-<random>``; it is stale once that
    process is gone (a directory of an older garag, without a pid, once a day old).
    """
    for tmp in final.parent.glob(f".{final.name}.tmp-*"):
        pid_text = tmp.name.rsplit(".tmp-", 1)[1].split("-", 1)[0]
        if pid_text.isdigit():
            stale = not _alive(int(pid_text))
        else:
            stale = time.time() - tmp.stat().st_mtime > 86_400
        if stale and tmp.is_dir():
            logger.info("removing %s, left by an interrupted build", tmp)
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_artifact(
    cache_root: str | Path,
    kind: str,
    settings: dict,
    fingerprint: str,
    build: Callable[[Path], dict | None],
    force: bool = False,
) -> Path:
    """Return the artifact directory, building it first if it is missing.

    Args:
        cache_root: root of all artifacts.
        kind: artifact kind, e.g. ``"store"``, ``"bm25"``.
        settings: everything that changes the artifact.
        fingerprint: the corpus fingerprint.
        build: called with a fresh temporary directory; writes the artifact
            there and returns extra metadata for ``meta.json``.
        force: rebuild even when a complete artifact exists.

    Returns:
        The final directory, which holds a ``meta.json`` with every file's size and sha256.

    Raises:
        ArtifactError: a reused artifact's files do not match the checksums of its build.
    """
    final = artifact_dir(cache_root, kind, settings, fingerprint)
    meta = None if force else read_meta(final)
    if meta is not None:
        if "files" in meta:
            verify_checksums(final, meta["files"], f"rebuild it with `garag index --force` or delete {final}")
        logger.info("%s: reusing %s", kind, final)
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-{os.getpid()}-", dir=final.parent))
    started = time.time()
    try:
        extra = build(tmp) or {}
        meta = {
            "kind": kind,
            "settings": settings,
            "corpus_fingerprint": fingerprint,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - started, 3),
            **extra,
            "files": file_checksums(tmp),
        }
        write_json_atomic(tmp / "meta.json", meta)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("%s: built %s in %.1fs", kind, final, time.time() - started)
    return final
