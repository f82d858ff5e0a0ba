"""The served world of the serve tests: the fixture corpus plus a page whose text is markup, the
fixture claims plus a claim that is markup, three configs (baseline BM25; graph-augmented with
GRAAL; baseline with rule reasoning programs) sharing the tiny classifier trained on the fixture
premises, one real ``garag compare`` run, and a loaded :class:`Service`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")

XSS_CLAIM = '<script>window.__xss = 1</script><img src=x onerror="window.__xss=2"> Liverpool is a city.'
XSS_PAGE = {
    "id": "Markup_Test",
    "text": "",
    "lines": "0\t<script>window.__xss = 3</script> Markup Test is a page about Liverpool markup .\n"
    "1\tMarkup Test was written in England .",
}


@dataclass
class World:
    root: Path
    configs: dict[str, Path]
    claims: Path
    corpus: Path
    results: Path
    run_id: str


@pytest.fixture(scope="session")
def world(tmp_path_factory, tiny_corpus: Path, tiny_claims: Path, predict_config) -> World:
    from app.cli import main

    root = tmp_path_factory.mktemp("serve")
    corpus = root / "wiki-pages"
    shutil.copytree(tiny_corpus, corpus)
    with (corpus / "wiki-001.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(XSS_PAGE) + "\n")
    claims = root / "claims.jsonl"
    xss = {"id": 99, "verifiable": "NOT VERIFIABLE", "label": "NOT ENOUGH INFO", "claim": XSS_CLAIM,
           "evidence": [[[99, None, None, None]]]}  # fmt: skip
    claims.write_text(tiny_claims.read_text(encoding="utf-8") + json.dumps(xss) + "\n", encoding="utf-8")
    baseline = predict_config(root, claims, corpus)
    base = yaml.safe_load(baseline.read_text(encoding="utf-8"))
    configs = {
        "baseline": root / "baseline.yaml",
        "graph": root / "graph.yaml",
        "programs": root / "programs.yaml",
    }
    configs["baseline"].write_text(yaml.safe_dump(base), encoding="utf-8")
    graph = {**base, "pipeline": {"mode": "graph", "evidence_pool": 10}, "decomposition": {"method": "rule"},
             "retrieval": {"retrievers": ["bm25", "graal"], "k": 20}}  # fmt: skip
    configs["graph"].write_text(yaml.safe_dump(graph), encoding="utf-8")
    programs = {**base, "reasoning": {"programs": "rule"}}
    configs["programs"].write_text(yaml.safe_dump(programs), encoding="utf-8")
    run_id = "tiny-baseline-vs-graph"
    args = ["compare", "--configs", str(configs["baseline"]), str(configs["graph"]), "--run-id", run_id,
            "--no-progress", "--no-faithfulness",
            "--set", f"paths.results_dir={root / 'results'}"]  # fmt: skip
    assert main(args) == 0
    return World(root, configs, claims, corpus, root / "results", run_id)


@pytest.fixture(scope="session")
def service(world: World):
    from app.serve.service import ServeSettings, Service, load_configs

    settings = ServeSettings(max_batch=4, micro_batch=8, max_wait=0.05, results_dir=world.results, timeout=60)
    svc = Service(load_configs([str(p) for p in world.configs.values()]), settings).load()
    assert svc.ready, svc.error
    yield svc
    svc.close()


@dataclass
class Server:
    url: str
    service: object


@contextmanager
def serving(service, app=None) -> Iterator[Server]:
    """The real app (``app``, else the service's) under a real uvicorn on 127.0.0.1 (an OS-chosen
    port), in a thread."""
    import threading
    import time

    import uvicorn

    from app.serve.app import create_app

    config = uvicorn.Config(
        app or create_app(service), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (srv.started and srv.servers):
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    port = srv.servers[0].sockets[0].getsockname()[1]
    try:
        yield Server(f"http://127.0.0.1:{port}", service)
    finally:
        srv.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def server(service) -> Iterator[Server]:
    """The real app under a real uvicorn on 127.0.0.1, without an API key."""
    with serving(service) as srv:
        yield srv


API_KEY = "s3cret-for-tests"


@pytest.fixture(scope="session")
def keyed_server(world: World) -> Iterator[Server]:
    """The same world served with ``GARAG_API_KEY`` set (its own service and uvicorn)."""
    from app.serve.service import ServeSettings, Service, load_configs

    settings = ServeSettings(
        max_batch=4, micro_batch=8, max_wait=0.05, results_dir=world.results, timeout=60, api_key=API_KEY
    )
    svc = Service(load_configs([str(world.configs["baseline"])]), settings).load()
    assert svc.ready, svc.error
    with serving(svc) as srv:
        yield srv
    svc.close()
