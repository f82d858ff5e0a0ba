"""kill -9 at several points of `garag predict` and `garag index`, then rerun: the results equal an
uninterrupted run's.  Real processes, real SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
VOLATILE = ("seconds", "retriever_seconds")


def _garag(*argv: str) -> subprocess.Popen:
    code = "import sys\nfrom app.cli import main\nsys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, *argv]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 120.0) -> bool:
    """SIGKILL ``proc`` as soon as ``ready()`` holds; False when it finished first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.005)
    proc.kill()
    raise AssertionError("the condition to kill at was never reached")


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def _records(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        for key in VOLATILE:
            r.pop(key, None)
        r["scores"] = {k: round(v, 4) for k, v in r["scores"].items()}  # batch padding moves them ~1e-6
        out.append(r)
    return sorted(out, key=lambda r: r["id"])


@pytest.fixture(scope="module")
def world(tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("kill")
    base = [json.loads(x) for x in tiny_claims.read_text(encoding="utf-8").splitlines()]
    claims = root / "claims.jsonl"
    with claims.open("w", encoding="utf-8") as fh:
        for i in range(600):
            fh.write(json.dumps({**base[i % len(base)], "id": i + 1}) + "\n")
    path = predict_config(root, claims, tiny_corpus)
    clean = root / "clean"
    proc = _garag("predict", "--config", str(path), "--no-progress", "--out", str(clean))
    assert proc.wait() == 0, proc.stderr.read().decode() if proc.stderr else ""
    return {"root": root, "config": path, "clean": _records(clean / "predictions.jsonl")}


def test_predict_killed_while_loading_and_mid_run_resumes_to_the_same_predictions(world: dict) -> None:
    out = world["root"] / "killed"
    preds = out / "predictions.jsonl"
    argv = ("predict", "--config", str(world["config"]), "--no-progress", "--out", str(out))
    # 1: killed while the model loads (the manifest is written, no prediction yet)
    assert _kill_when(_garag(*argv), lambda: (out / "run.json").is_file() and _lines(preds) == 0)
    # 2: killed mid-run, after the first batch and before the last
    killed = _kill_when(_garag(*argv), lambda: 32 <= _lines(preds) < 500)
    if not killed:
        pytest.skip("the run finished before it could be killed mid-way")
    done = _lines(preds)
    assert 32 <= done < 600
    proc = _garag(*argv)
    assert proc.wait() == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert _records(preds) == world["clean"]


def test_index_killed_mid_build_resumes_to_the_same_artifacts(tmp_path: Path) -> None:
    hover = Path(__file__).resolve().parents[2] / "data" / "hover"
    corpus = next(p for p in hover.iterdir() if p.is_dir() or p.suffix in (".jsonl", ".zip"))
    assert corpus.exists()

    def argv(cache: Path) -> tuple[str, ...]:
        sets = ["data.dataset=hover", f"paths.cache_dir={cache}", "retrieval.retrievers=[bm25, pages]"]
        return ("index", "--no-progress", *[x for s in sets for x in ("--set", s)])

    clean = tmp_path / "clean"
    proc = _garag(*argv(clean))
    assert proc.wait() == 0, proc.stderr.read().decode() if proc.stderr else ""
    killed = tmp_path / "killed"

    def building(kind: str):  # noqa: ANN202
        return lambda: any(killed.glob(f".{kind}-*.tmp-*"))

    for kind in ("store", "bm25"):  # killed inside each build in turn
        assert _kill_when(_garag(*argv(killed)), building(kind)), kind
    assert any(killed.glob(".*.tmp-*"))  # an interrupted build left its temporary directory
    proc = _garag(*argv(killed))
    assert proc.wait() == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert not any(killed.glob(".*.tmp-*"))  # ... which the rerun removed

    def files(cache: Path) -> dict[str, dict]:
        out = {}
        for meta in cache.glob("*/meta.json"):
            out[meta.parent.name] = json.loads(meta.read_text(encoding="utf-8"))["files"]
        return out

    assert files(killed) == files(clean) and len(files(clean)) >= 3
    shutil.rmtree(clean)
