"""``app.serve.launch.start_serve``: a real ``python -m app.cli serve`` child process; the started
case is every restart and keep-alive test, here the two ways it fails."""

from __future__ import annotations

import signal

import pytest

from app.serve.launch import ServeDidNotStart, start_serve


def test_a_server_that_exits_is_reported_with_its_log_end(tmp_path):
    log = tmp_path / "serve.log"
    with pytest.raises(ServeDidNotStart) as raised:
        start_serve(["--configs", str(tmp_path / "missing.yaml")], log, seconds=120)
    e = raised.value
    assert e.proc.returncode not in (None, 0)
    assert f"garag serve exited with {e.proc.returncode}" in str(e)
    assert str(e).endswith("missing.yaml: no such config file")  # the server's own one line closes it


def test_a_server_that_never_answers_is_killed_at_the_deadline(world, tmp_path):
    pytest.importorskip("uvicorn", reason="uvicorn (the serve extra) is not installed")
    pytest.importorskip("fastapi", reason="fastapi (the serve extra) is not installed")
    args = ["--configs", str(world.configs["baseline"]), "--state-dir", str(tmp_path / "state"),
            "--no-history"]  # fmt: skip
    with pytest.raises(ServeDidNotStart, match="did not answer /v1/no-such-path in 8 s") as raised:
        start_serve(args, tmp_path / "serve.log", wait_for="/v1/no-such-path", seconds=8)
    assert raised.value.proc.returncode == -signal.SIGKILL  # running until killed, not ended by itself
