"""Which CPU a run ran on, and which vector instructions its kernels used.

Training and timing depend on them: the same verifier recipe trains to different bytes with
AVX-512 and with AVX2 kernels, and bfloat16 only pays off with AMX (docs/results.md, "make run").
Runs record :func:`describe_cpu` in ``env.json`` and the verifier's ``meta.json``; benchmarks and
reports print :meth:`CPU.line`.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

# flags that decide which kernels torch, oneDNN, MKL and faiss can use, in the order they are printed
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
# environment variables that hold those libraries below what the CPU has (docs/results.md)
KERNEL_LIMITS = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "FAISS_OPT_LEVEL",
    "NPY_DISABLE_CPU_FEATURES",
    "BLIS_ARCH_TYPE",
)


@dataclass(frozen=True)
class CPU:
    """What :func:`describe_cpu` read.

    Attributes:
        model: the first ``model name`` of ``/proc/cpuinfo``, else ``platform.processor()``; None
            when neither says.
        cpus: CPUs this process may run on.
        vector: the widest vector extension the flags show: ``"amx"``, ``"avx512"``, ``"avx2"``,
            ``"avx"``, or None (flags unreadable, or none of these).
        flags: which of :data:`VECTOR_FLAGS` the CPU has, in that order.
        torch_kernels: the instruction set torch's CPU kernels dispatch to
            (``torch.backends.cpu.get_cpu_capability()``, e.g. ``"AVX512"``, ``"AVX2"``); None where
            torch is not imported yet or lacks the call.
        limits: the :data:`KERNEL_LIMITS` variables set in the environment, with their values.
    """

    model: str | None
    cpus: int | None
    vector: str | None
    flags: tuple[str, ...]
    torch_kernels: str | None
    limits: dict[str, str]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["flags"] = list(self.flags)
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> CPU:
        """The inverse of :meth:`to_dict`, tolerant of keys an older or newer garag wrote."""
        limits = d.get("limits")
        return cls(
            model=d.get("model"),
            cpus=d.get("cpus"),
            vector=d.get("vector"),
            flags=tuple(d.get("flags") or ()),
            torch_kernels=d.get("torch_kernels"),
            limits=dict(limits) if isinstance(limits, Mapping) else {},
        )

    def line(self) -> str:
        """One line for a report: ``AMD EPYC, 2 CPUs, AVX2 (torch kernels AVX2)``."""
        parts = [self.model or "unknown CPU", f"{self.cpus} CPUs" if self.cpus else "CPUs unknown"]
        vector = "vector extensions unknown"
        if self.vector:
            vector = self.vector.upper().replace("AVX512", "AVX-512")
        if self.torch_kernels:
            vector += f" (torch kernels {self.torch_kernels})"
        parts.append(vector)
        if self.limits:
            parts.append("held by " + " ".join(f"{k}={v}" for k, v in self.limits.items()))
        return ", ".join(parts)


def read_cpuinfo(cpuinfo: str | Path = "/proc/cpuinfo") -> tuple[str | None, set[str] | None]:
    """The first ``model name`` and the union of ``flags`` in ``cpuinfo``; None for what is not
    there (the file unreadable, or not Linux's format)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, None
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None and value.strip():
            model = " ".join(value.split())
        elif key == "flags":
            flags.update(value.split())
    return model, (flags or None)


def widest_vector(flags: set[str] | None) -> str | None:
    """``"amx"``, ``"avx512"``, ``"avx2"`` or ``"avx"``: the widest the flags show; None if none."""
    if not flags:
        return None
    for name, flag in (("amx", "amx_tile"), ("avx512", "avx512f"), ("avx2", "avx2"), ("avx", "avx")):
        if flag in flags:
            return name
    return None


def _torch_kernels() -> str | None:
    """torch's dispatch level, without importing torch where nothing has yet."""
    torch = sys.modules.get("torch")
    get = getattr(getattr(getattr(torch, "backends", None), "cpu", None), "get_cpu_capability", None)
    if get is None:
        return None
    try:
        return str(get())
    except Exception:  # noqa: BLE001 - a description must not fail a run
        return None


def _cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count()


def describe_cpu(cpuinfo: str | Path = "/proc/cpuinfo") -> CPU:
    """This machine's CPU as :class:`CPU` (reads ``cpuinfo``, the environment and, where it is
    imported already, torch)."""
    model, flags = read_cpuinfo(cpuinfo)
    return CPU(
        model=model or platform.processor() or None,
        cpus=_cpus(),
        vector=widest_vector(flags),
        flags=tuple(f for f in VECTOR_FLAGS if flags and f in flags),
        torch_kernels=_torch_kernels(),
        limits={k: os.environ[k] for k in KERNEL_LIMITS if os.environ.get(k)},
    )
