"""A real ``python -m app.cli serve`` process on a free 127.0.0.1 port, for the tests that need the
command itself (its options, a kill and restart), not an app served in process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(
    args: list[str], log: Path, wait_for: str = "/v1/ready", seconds: float = 180
) -> tuple[subprocess.Popen, int]:
    """``garag serve ARGS --port P`` with its output appended to ``log``, once ``wait_for`` answers
    200; the process and P.  Asserts (with the log's end) if it exits or does not answer in time."""
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "serve", *args, "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, f"the server exited: {log.read_text()[-3000:]}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}{wait_for}", timeout=5).status_code == 200:
                return proc, port
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the server did not answer: {log.read_text()[-3000:]}"
        time.sleep(0.2)
