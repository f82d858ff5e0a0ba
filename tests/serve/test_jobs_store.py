"""The job store and runner on a real SQLite file, with the session's loaded service: a result is
written once or not at all, progress moves with it, the runner runs any registered kind, fails a
job with one line, and one runner at a time holds a state directory."""

from __future__ import annotations

import sqlite3
import time

import pytest

from app.serve.job_runner import JobRunner
from app.serve.jobs import JobStore, Result


def until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_result_is_written_once_with_its_progress(tmp_path):
    store = JobStore(tmp_path / "jobs.sqlite")
    job = store.create("claims", "baseline", [{"n": i} for i in range(4)], {"name": "four"})
    assert (job.state, job.total, job.done, job.kind, job.params) == (
        "queued",
        4,
        0,
        "claims",
        {"name": "four"},
    )
    assert store.add_results(job.id, [Result(0, "SUPPORTS", None, None, {"i": 0})], 0.5, ["v1", "v1"])
    assert [i for i, _ in store.pending(job.id)] == [1, 2, 3] and store.get(job.id).index_versions == ["v1"]
    with pytest.raises(sqlite3.IntegrityError):  # item 0 again, beside a new one: nothing is written
        store.add_results(
            job.id, [Result(1, "REFUTES", None, None, {}), Result(0, "REFUTES", None, None, {})], 1, ["v9"]
        )
    after = store.get(job.id)
    assert after.index_versions == ["v1"]  # nothing of the failed call, its version neither
    assert (after.done, after.busy_seconds) == (1, 0.5) and [i for i, _ in store.pending(job.id)] == [1, 2, 3]
    assert store.results(job.id)[0] == 1
    assert store.add_results(job.id, [Result(1, "REFUTES", None, None, {})], 0.5, ["v2", "v1"])
    assert store.get(job.id).index_versions == ["v1", "v2"]  # a corpus switch during the job
    db = sqlite3.connect(tmp_path / "jobs.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_states_cancel_and_delete(tmp_path):
    store = JobStore(tmp_path / "jobs.sqlite")
    job = store.create("claims", "baseline", [{"n": 1}], {})
    assert not store.delete(job.id)  # queued
    assert store.start(job.id, "v1") and store.get(job.id).state == "running"
    assert store.start(job.id, "v2")  # a resume on another corpus version records both
    assert store.get(job.id).index_versions == ["v1", "v2"] and store.get(job.id).starts == 2
    assert store.cancel(job.id) and not store.cancel(job.id)
    store.finish(job.id, "done")  # a cancelled job stays cancelled
    assert store.get(job.id).state == "cancelled"
    assert not store.start(job.id, "v3")
    assert not store.add_results("gone", [Result(0, None, None, None, {})], 0.1)
    assert store.counts() == {"queued": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 1}
    assert store.delete(job.id) and store.get(job.id) is None and store.items(job.id) == []


def test_the_runner_runs_a_registered_kind_and_fails_a_job_with_one_line(tmp_path, service):
    store = JobStore(tmp_path / "jobs.sqlite")
    runner = JobRunner(store, service, tmp_path / "jobs.lock", poll=0.05)
    seen = []

    def echo(ctx):
        for idx, item in ctx.store.pending(ctx.job.id):
            ctx.check()
            version = ctx.service.index_version(ctx.job.config)
            result = Result(idx, None, None, None, {"echo": item["text"]})
            ctx.store.add_results(ctx.job.id, [result], 0.01, [version])
        seen.append(ctx.job.id)
        return {"n": ctx.job.total}

    def broken(ctx):
        raise ValueError("line 1\n  of the error")

    runner.register("echo", echo)
    runner.register("broken", broken)
    try:
        ok = store.create("echo", "baseline", [{"text": "a"}, {"text": "b"}], {})
        bad = store.create("broken", "baseline", [{"text": "c"}], {})
        other = store.create("echo", "not-served", [{"text": "d"}], {})  # another server's config
        unknown = store.create("corpus", "baseline", [{"text": "e"}], {})  # a kind nobody registered
        runner.ensure_started()
        until(lambda: store.get(bad.id).state == "failed")
        done = store.get(ok.id)
        assert (done.state, done.done, done.metrics, seen) == ("done", 2, {"n": 2}, [ok.id])
        assert [r.record for r in store.results(ok.id)[1]] == [{"echo": "a"}, {"echo": "b"}]
        assert store.get(bad.id).error == "ValueError: line 1 of the error"
        assert done.index_versions == [service.index_version("baseline")]
        assert store.get(other.id).state == "queued" and store.get(unknown.id).state == "queued"
        # a second runner on the same state directory waits for the lock
        second = JobRunner(store, service, tmp_path / "jobs.lock", poll=0.05)
        second.register("corpus", echo)
        second.ensure_started()
        time.sleep(0.5)
        assert store.get(unknown.id).state == "queued"
        runner.stop()
        until(lambda: store.get(unknown.id).state == "done")  # it takes over
        second.stop()
    finally:
        runner.stop()
