"""A job survives its server: a real ``python -m app.cli serve`` process, killed with SIGKILL in the
middle of a job and started again on the same state directory, finishes the job with every claim
done exactly once (the claims verified before the kill are not verified again)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("python_multipart", reason="python-multipart (the serve extra) is not installed")

from app.serve.launch import start_serve  # noqa: E402

N = 3000


def start(world, state: Path, log: Path) -> tuple[subprocess.Popen, str]:
    args = ["--configs", str(world.configs["baseline"]), "--state-dir", str(state),
            "--results-dir", str(world.results), "--micro-batch", "4"]  # fmt: skip
    return start_serve(args, log, seconds=180)


def verified(url: str) -> float:
    """``garag_claims_verified`` of the baseline config: the claims this process has verified."""
    text = httpx.get(url + "/metrics").text
    found = re.search(r'^garag_claims_verified_total\{config="baseline"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_job_killed_with_its_server_resumes_and_does_every_claim_once(world, tmp_path):
    state, log = tmp_path / "state", tmp_path / "serve.log"
    base = [json.loads(x) for x in world.claims.read_text(encoding="utf-8").splitlines()]
    ids = [5000 + i for i in range(N)]
    data = "".join(json.dumps({**base[i % len(base)], "id": ids[i]}) + "\n" for i in range(N)).encode()
    proc, url = start(world, state, log)
    try:
        job = httpx.post(
            url + "/v1/jobs", files={"file": ("big.jsonl", data)}, data={"config": "baseline"}
        ).json()
        later = httpx.post(
            url + "/v1/jobs", json={"claims": ["Liverpool is a city."], "config": "baseline"}
        ).json()
        deadline = time.monotonic() + 120
        while httpx.get(f"{url}/v1/jobs/{job['id']}").json()["done"] < 50:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    db = sqlite3.connect(state / "jobs.sqlite")
    state_at_kill, done_at_kill = db.execute(
        "SELECT state, done FROM jobs WHERE id = ?", (job["id"],)
    ).fetchone()
    results_at_kill = db.execute("SELECT COUNT(*) FROM job_results WHERE job = ?", (job["id"],)).fetchone()[0]
    db.close()
    assert state_at_kill == "running" and 50 <= done_at_kill < N, "killed too late to test a resume"
    assert results_at_kill == done_at_kill  # progress and results were written together

    proc, url = start(world, state, log)
    try:
        deadline = time.monotonic() + 300
        while (resumed := httpx.get(f"{url}/v1/jobs/{job['id']}").json())["state"] != "done":
            assert resumed["state"] == "running" and time.monotonic() < deadline, resumed
            time.sleep(0.2)
        assert resumed["done"] == resumed["total"] == N and resumed["starts"] == 2
        assert resumed["metrics"]["n"] == N
        # the new process verified exactly the claims without a result at the kill
        assert verified(url) >= N - done_at_kill
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/v1/jobs/{later['id']}").json()["state"] != "done":  # the queued one ran too
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert verified(url) == N - done_at_kill + 1
        fever = [
            json.loads(x)
            for x in httpx.get(f"{url}/v1/jobs/{job['id']}/results?format=fever").text.splitlines()
        ]
        assert [x["id"] for x in fever] == ids  # every claim once, in the file's order
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    db = sqlite3.connect(state / "jobs.sqlite")
    sql = "SELECT COUNT(*), COUNT(DISTINCT idx), MIN(idx), MAX(idx) FROM job_results WHERE job = ?"
    rows = db.execute(sql, (job["id"],)).fetchone()
    assert rows == (N, N, 0, N - 1)
    assert os.path.getsize(state / "uploads" / f"{job['id']}.jsonl") == len(data)
