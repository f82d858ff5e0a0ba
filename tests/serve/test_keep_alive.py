"""``garag serve --keep-alive``: a real ``python -m app.cli serve`` process keeps an idle connection
open for its next request as long as the option says, then closes it (uvicorn's own 5 s closed
connections whose next request was already sent while a flood held the event loop)."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn", reason="uvicorn (the serve extra) is not installed")

from app.serve.launch import start_serve  # noqa: E402

HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def answer(conn: socket.socket) -> bytes:
    """One whole response to /v1/health (its body is small JSON, sent with a Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_an_idle_connection_stays_open_for_keep_alive_seconds_then_closes(world, tmp_path):
    args = ["--configs", str(world.configs["baseline"]), "--state-dir", str(tmp_path / "state"),
            "--no-history", "--keep-alive", "7"]  # fmt: skip
    proc, url = start_serve(args, tmp_path / "serve.log", wait_for="/v1/health", seconds=120)
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
            conn.sendall(HEALTH)
            assert answer(conn).startswith(b"HTTP/1.1 200")
            time.sleep(5.5)  # idle past uvicorn's own 5 s: the same connection takes the next request
            conn.sendall(HEALTH)
            assert answer(conn).startswith(b"HTTP/1.1 200")
            idle = time.monotonic()
            assert conn.recv(1) == b""  # the server closes it once idle for --keep-alive seconds
            assert 6 < time.monotonic() - idle < 15
    finally:
        proc.terminate()
        proc.wait(30)
