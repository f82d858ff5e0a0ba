"""What a run ran on: code commit, packages, model and data hashes, machine (for ``env.json``)."""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from garag.artifacts import file_sha256
from garag.cpu import CPU, describe_cpu
from garag.datasets import REPO_ROOT

PACKAGES = (
    "garag",
    "torch",
    "transformers",
    "sentence-transformers",
    "faiss-cpu",
    "bm25s",
    "PyStemmer",
    "numpy",
    "scipy",
    "spacy",
    "networkx",
    "matplotlib",
    "llama-cpp-python",
)
_MAX_HASH_BYTES = 4 << 30  # files above 4 GB are recorded by size only
ENV_FILE = "env.json"


def env_path(run_dir: str | Path) -> Path:
    """Where a run keeps its ``env.json``."""
    return Path(run_dir) / ENV_FILE


def read_env(run_dir: str | Path) -> dict:
    """A run's ``env.json`` ({} where the run has none yet).

    Raises:
        ValueError: the file is not a JSON object (one line naming it).
    """
    path = env_path(run_dir)
    if not path.is_file():
        return {}
    try:
        env = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(env, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(env).__name__}")
    return env


def tree_hashes(path: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``path`` (a file gives one entry)."""
    root = Path(path)
    if root.is_file():
        return {root.name: file_sha256(root)}
    if not root.is_dir():
        return {}
    out = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        size = f.stat().st_size
        out[str(f.relative_to(root))] = file_sha256(f) if size <= _MAX_HASH_BYTES else f"size:{size}"
    return out


def git_commit(repo: str | Path = REPO_ROOT) -> str | None:
    """The checked-out commit, read from ``.git`` files (no git process); None outside a checkout."""
    git = Path(repo) / ".git"
    if git.is_file():  # a worktree: "gitdir: <path>"
        text = git.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            git = (Path(repo) / text.split(":", 1)[1].strip()).resolve()
    head = git / "HEAD"
    if not head.is_file():
        return None
    ref = head.read_text(encoding="utf-8").strip()
    if not ref.startswith("ref:"):
        return ref
    name = ref.split(":", 1)[1].strip()
    common = git
    if (git / "commondir").is_file():
        common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in (git, common):
        if (base / name).is_file():
            return (base / name).read_text(encoding="utf-8").strip()
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == name:
                    return parts[0]
    return None


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of the packages that shape results (None when absent)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine() -> dict:
    """Platform, Python, CPU count, torch threads, and the CPU with its vector extensions
    (:func:`garag.cpu.describe_cpu`)."""
    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
    }
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    info["cpu"] = describe_cpu().to_dict()  # after torch's import: its kernels' level is read from it
    return info


def machine_line(info: dict) -> str:
    """One line for a benchmark's report from :func:`machine`'s dict: ``AMD EPYC, 2 CPUs, AVX2 (torch
    kernels AVX2), Python 3.11.7``.  A result written before the CPU was recorded gives its CPU count."""
    if info.get("cpu"):
        cpu = CPU.from_dict(info["cpu"]).line()
    else:
        cpu = f"{info.get('cpu_count', info.get('cpus', '?'))} CPUs"
    return f"{cpu}, Python {info['python']}" if info.get("python") else cpu


def prompt_hashes(prompts_dir: str | Path = REPO_ROOT / "prompts") -> dict[str, str]:
    """sha256 of every prompt template (``*.txt``, ``*.yaml``) shipped with garag."""
    root = Path(prompts_dir)
    if not root.is_dir():
        return {}
    return {
        str(p.relative_to(root)): file_sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".txt", ".yaml", ".yml", ".jinja")
    }


def environment() -> dict:
    """Code, packages, prompts and machine; models and data are added by the caller."""
    return {
        "git_commit": git_commit(),
        "packages": package_versions(),
        "prompts": prompt_hashes(),
        "machine": machine(),
        "argv": list(sys.argv),
    }
