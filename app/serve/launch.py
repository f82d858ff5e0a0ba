"""Start ``garag serve`` as a child process on a free local port and wait until it answers.

For scripts that drive a real server (the load and jobs benchmarks, the restart tests, a user's own
smoke check): ``start_serve(["--configs", "configs/baseline.yaml"], Path("serve.log"))`` returns the
process and its URL once ``/v1/ready`` answers 200.  Standard library only, so that a script can
import it before the serve extra is installed.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path


class ServeDidNotStart(RuntimeError):
    """The server exited, or did not answer in time (then it was killed); the message ends with its
    log's last lines, ``proc`` is the ended process."""

    def __init__(self, message: str, proc: subprocess.Popen) -> None:
        super().__init__(message)
        self.proc = proc


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the OS picks it; another process may take it before we bind)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, http.client.HTTPException, OSError):  # refused, 503 while loading, a reset
        return False


def _log_end(log: Path, chars: int = 3000) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return text[-chars:].rstrip()


def start_serve(
    args: Sequence[str],
    log: Path,
    *,
    host: str = "127.0.0.1",
    wait_for: str = "/v1/ready",
    seconds: float = 1800.0,
    poll: float = 0.2,
    new_session: bool = False,
    cwd: Path | None = None,
) -> tuple[subprocess.Popen, str]:
    """``python -m app.cli serve ARGS --host HOST --port P`` with this Python, its output appended to
    ``log``; returns the process and ``http://HOST:P`` once ``wait_for`` answers 200.

    Args:
        args: ``garag serve`` options other than ``--host`` and ``--port``.
        log: file the server's stdout and stderr are appended to.
        seconds: how long to wait (models load for minutes on a cold cache).
        poll: seconds between tries.
        new_session: start it in its own process group (``kill -- -PID`` stops its children too).
        cwd: the directory relative paths in ``args`` are read from (default: this process's).

    Raises:
        ServeDidNotStart: it exited, or did not answer within ``seconds`` (then it is killed).
    """
    port = free_port(host)
    cmd = [sys.executable, "-m", "app.cli", "serve", *args, "--host", host, "--port", str(port)]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=new_session
        )
    url = f"http://{host}:{port}"
    deadline = time.monotonic() + seconds
    while not _answers(url + wait_for):
        if proc.poll() is not None:
            ended = f"garag serve exited with {proc.returncode}; {log} ends:\n{_log_end(log)}"
            raise ServeDidNotStart(ended, proc)
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            late = f"garag serve did not answer {wait_for} in {seconds:g} s; {log} ends:\n{_log_end(log)}"
            raise ServeDidNotStart(late, proc)
        time.sleep(poll)
    return proc, url
