"""garag.cpu: the CPU and vector extensions a run records (env.json, the verifier's meta.json)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from garag.cpu import CPU, KERNEL_LIMITS, describe_cpu, read_cpuinfo, widest_vector

EPYC = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
    "flags\t\t: fpu sse sse2 avx fma avx2\n\n"
    "processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse sse2 avx fma avx2 extra1\n"
)
XEON = (
    "model name\t: Intel(R)   Xeon(R) Platinum 8481C\n"
    "flags\t: avx avx2 fma avx512f avx512_bf16 amx_tile amx_bf16\n"
)


def _info(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text, encoding="utf-8")
    return path


def test_read_cpuinfo_takes_the_first_model_and_every_processors_flags(tmp_path):
    model, flags = read_cpuinfo(_info(tmp_path, EPYC))
    assert model == "AMD EPYC 7B13"
    assert flags == {"fpu", "sse", "sse2", "avx", "fma", "avx2", "extra1"}
    assert read_cpuinfo(_info(tmp_path, XEON))[0] == "Intel(R) Xeon(R) Platinum 8481C"  # spaces folded
    assert read_cpuinfo(tmp_path / "absent") == (None, None)
    assert read_cpuinfo(_info(tmp_path, "Hardware: some board\n")) == (None, None)


@pytest.mark.parametrize(
    ("flags", "widest"),
    [
        ({"avx", "avx2", "avx512f", "amx_tile"}, "amx"),
        ({"avx", "avx2", "avx512f", "avx512_bf16"}, "avx512"),
        ({"avx", "fma", "avx2"}, "avx2"),
        ({"sse2", "avx"}, "avx"),
        ({"neon", "asimd"}, None),
        (set(), None),
        (None, None),
    ],
)
def test_widest_vector_extension(flags, widest):
    assert widest_vector(flags) == widest


def test_describe_cpu_records_flags_and_the_variables_that_hold_kernels_back(tmp_path, monkeypatch):
    for name in KERNEL_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("FAISS_OPT_LEVEL", "")  # set but empty: holds nothing
    cpu = describe_cpu(_info(tmp_path, XEON))
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8481C" and cpu.vector == "amx"
    assert cpu.flags == ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
    assert cpu.limits == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert cpu.line().endswith("AMX" + (f" (torch kernels {cpu.torch_kernels})" if cpu.torch_kernels else "")
                               + ", held by ONEDNN_MAX_CPU_ISA=AVX2")  # fmt: skip
    assert CPU.from_dict(cpu.to_dict()) == cpu


def test_torch_kernels_are_read_from_torch_once_it_is_imported(tmp_path, monkeypatch):
    import torch

    assert describe_cpu(_info(tmp_path, EPYC)).torch_kernels == torch.backends.cpu.get_cpu_capability()
    monkeypatch.delitem(sys.modules, "torch")  # not imported: not imported for a description either
    assert describe_cpu(_info(tmp_path, EPYC)).torch_kernels is None


def test_a_description_from_an_older_or_odd_record_still_prints():
    assert CPU.from_dict({}).line() == "unknown CPU, CPUs unknown, vector extensions unknown"
    odd = CPU.from_dict({"model": "M", "cpus": 2, "vector": "avx2", "flags": None, "limits": ["x"]})
    assert odd.line() == "M, 2 CPUs, AVX2" and odd.flags == () and odd.limits == {}
