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
import tempfile
import time
from collections.abc import Callable
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


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write JSON to ``path`` through a temporary file and an atomic rename."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def artifact_dir(cache_root: str | Path, kind: str, settings: dict, fingerprint: str) -> Path:
    """The directory where an artifact with these settings lives (may not exist yet)."""
    return Path(cache_root) / f"{kind}-{settings_hash(kind, settings, fingerprint)}"


def read_meta(path: str | Path) -> dict | None:
    """The ``meta.json`` of a complete artifact, or None."""
    meta = Path(path) / "meta.json"
    if not meta.is_file():
        return None
    return json.loads(meta.read_text(encoding="utf-8"))


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
        The final directory, which holds a ``meta.json``.
    """
    final = artifact_dir(cache_root, kind, settings, fingerprint)
    if not force and read_meta(final) is not None:
        logger.info("%s: reusing %s", kind, final)
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
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
