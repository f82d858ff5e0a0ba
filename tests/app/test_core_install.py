"""`make run` installs garag without its extras (`make setup-core`): the commands it runs must not
import an extra.  Each module of a distribution that only an extra brings (llama-cpp-python, LangChain,
FastAPI, Ray, pytest, ...) is made unimportable in a child process, which then runs `garag compare`
of a baseline and a graph config (BM25, GRAAL on spaCy, decomposition, triplets) on the tiny corpus."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

BLOCKER = """
import sys
# None in sys.modules: `import x` fails and importlib.util.find_spec("x") says absent, as without x
for name in sys.argv[1].split(","):
    sys.modules[name] = None
sys.argv = ["garag", *sys.argv[2:]]
from app.cli import main
sys.exit(main())
"""


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _for_an_extra(requirement: str) -> bool:
    """Whether a requirement applies only with an extra (``...; extra == "llm"``)."""
    return "extra ==" in requirement.partition(";")[2]


def _needed(name: str, seen: set[str]) -> set[str]:
    """``name`` and every distribution it requires, extras' requirements left out."""
    if name in seen:
        return seen
    seen.add(name)
    try:
        requires = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return seen
    for req in requires:
        if not _for_an_extra(req):
            _needed(_name(req), seen)
    return seen


def extras_only_modules() -> set[str]:
    """Top-level modules whose distributions only garag's extras bring in."""
    core = _needed("garag", set())
    extra = set()
    for req in metadata.requires("garag") or []:
        if _for_an_extra(req):
            extra |= _needed(_name(req), set())
    only = extra - core
    modules = set()
    for module, dists in metadata.packages_distributions().items():
        names = {d.lower().replace("_", "-") for d in dists}
        if names and names <= only and not module.startswith("_"):
            modules.add(module)
    return modules


def test_the_extras_only_modules_are_found() -> None:
    blocked = extras_only_modules()
    assert {"llama_cpp", "fastapi", "ray", "pytest", "langchain_core"} <= blocked
    assert not {"torch", "transformers", "faiss", "spacy", "sklearn", "numpy"} & blocked


def test_garag_compare_runs_without_any_extra(tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path):
    base = predict_config(tmp_path, tiny_claims, tiny_corpus)
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(base.read_text(encoding="utf-8"), encoding="utf-8")
    graph = yaml.safe_load(base.read_text(encoding="utf-8"))
    graph.update(
        {
            "pipeline": {"mode": "graph", "evidence_pool": 10},
            "decomposition": {"method": "rule"},
            "retrieval": {"retrievers": ["bm25", "graal"], "k": 20},
            "triplets": {"method": "syntactic"},
            "propagation": {"method": "garag"},
        }
    )
    (tmp_path / "graph.yaml").write_text(yaml.safe_dump(graph), encoding="utf-8")
    blocked = ",".join(sorted(extras_only_modules()))
    args = ["compare", "--configs", str(baseline), str(tmp_path / "graph.yaml"), "--run-id", "core"]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER, blocked, *args, "--no-progress", "--no-faithfulness"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "results" / "core"
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["per_system"]) == {"baseline", "graph"}
    claims = len(tiny_claims.read_text(encoding="utf-8").splitlines())
    for name in ("baseline", "graph"):
        assert len((run / "predictions" / f"{name}.jsonl").read_text().splitlines()) == claims
    assert (run / "report.md").is_file()
    # the blocker works: the same child fails on a command that needs an extra
    failed = subprocess.run(
        [sys.executable, "-c", BLOCKER, blocked, "serve", "--config", str(baseline), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert failed.returncode != 0
    assert "serve" in failed.stderr.splitlines()[-1], failed.stderr[-2000:]
