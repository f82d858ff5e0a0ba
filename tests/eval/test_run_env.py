"""The machine a run or a benchmark ran on, as recorded and as one line of a report."""

from __future__ import annotations

import platform

from eval.run_env import machine, machine_line
from garag.cpu import CPU, describe_cpu


def test_machine_line_names_the_cpu_its_vector_extensions_and_python() -> None:
    info = machine()
    line = machine_line(info)
    assert line == f"{CPU.from_dict(info['cpu']).line()}, Python {platform.python_version()}"
    cpu = describe_cpu()
    assert line.startswith(f"{cpu.model or 'unknown CPU'}, {cpu.cpus} CPUs, ")


def test_machine_line_reads_results_written_before_the_cpu_was_recorded() -> None:
    # benchmarks wrote {"cpus": N, "python": ...} (serve_load, retrieval_speed) or a bare CPU count
    assert machine_line({"cpus": 2, "python": "3.11.7"}) == "2 CPUs, Python 3.11.7"
    assert machine_line({"cpu_count": 16}) == "16 CPUs"
    assert machine_line({}) == "? CPUs"
