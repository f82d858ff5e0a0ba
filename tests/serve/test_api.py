"""``garag serve``'s API with the real app and the real pipelines on the fixture corpus (BM25, GRAAL,
spaCy, the tiny trained classifier) and a real ``garag compare`` run: every endpoint, every error
status, and concurrent requests through a real uvicorn each getting their own verdict."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import threading

import pytest

from .conftest import XSS_CLAIM, serving

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from app.serve.app import create_app  # noqa: E402
from app.serve.service import Service, load_configs  # noqa: E402
from garag.text import detokenize  # noqa: E402
from garag.types import SentenceId  # noqa: E402

LOCAL = "http://127.0.0.1"  # a loopback Host: the server answers no other name by default
CLAIM = "The Beatles were formed in Liverpool."


def with_settings(service: Service, **changes) -> Service:
    """The same loaded pipelines under other limits (a shallow copy: nothing is reloaded)."""
    other = copy.copy(service)
    other.settings = dataclasses.replace(service.settings, **changes)
    return other


@pytest.fixture(scope="module")
def client(service) -> TestClient:
    return TestClient(create_app(service), base_url=LOCAL)


def test_health_ready_configs_and_openapi(client: TestClient):
    assert client.get("/v1/health").json() == {"status": "ok", "version": "0.1.0"}
    ready = client.get("/v1/ready")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "configs": ["baseline", "graph", "programs"], "error": None}
    configs = client.get("/v1/configs").json()
    assert configs["max_batch"] == 4
    assert {c["name"]: c["mode"] for c in configs["configs"]} == {
        "baseline": "baseline", "graph": "graph", "programs": "baseline"}  # fmt: skip
    assert {c["llm_judge"] for c in configs["configs"]} == {"never"}
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/v1/verify", "/v1/verify/batch", "/v1/runs", "/v1/runs/{run_id}", "/v1/runs/{run_id}/claims",
              "/v1/health", "/v1/ready"):  # fmt: skip
        assert p in paths
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text
    assert "cdn." not in docs.text  # works offline
    assert client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js").status_code == 200


def test_baseline_verdict_has_evidence_with_ids_text_and_retrievers(client: TestClient, service):
    r = client.post("/v1/verify", json={"claim": CLAIM, "config": "baseline"})
    assert r.status_code == 200
    body = r.json()
    assert body["claim"] == CLAIM and body["config"] == "baseline"
    assert body["label"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
    assert body["label"] == max(body["scores"], key=body["scores"].get)
    store = service.served["baseline"].pipe.store
    assert len(body["evidence"]) == 3  # the config's verifier.top_k
    for e in body["evidence"]:
        raw = store.get(SentenceId(e["page"], e["line"])).text
        assert e["raw_text"] == raw and e["text"] == detokenize(raw)
        assert e["retrievers"] == ["bm25"]
    assert ("The_Beatles", 0) in [(e["page"], e["line"]) for e in body["evidence"]]
    cited = [(e["page"], e["line"]) for e in body["evidence"] if e["cited"]]
    assert cited and all(
        f"({p}, {n})" in body["explanation"] or body["label"] != "SUPPORTS" for p, n in cited[:1]
    )
    assert body["graph"] is None and body["graal_paths"] == [] and body["steps"] is None
    t = body["timings"]
    assert {"retrieval", "verification", "total"} <= set(t)
    assert t["total"] >= t["retrieval"] + t["verification"]


def test_the_configs_answer_each_others_nli_pairs(client: TestClient, service):
    """The service's pipelines share one memory of scored pairs: graph, asked about a claim baseline
    has just verified, takes the pairs of the sentences both read from it."""
    base, graph = (service.served[n].pipe.verifier for n in ("baseline", "graph"))
    assert base._memory is graph._memory
    claim = "The Beatles were formed in Liverpool in a year."  # asked nowhere else
    assert client.post("/v1/verify", json={"claim": claim, "config": "baseline"}).status_code == 200
    before = graph.pairs_remembered
    body = client.post("/v1/verify", json={"claim": claim, "config": "graph"}).json()
    assert graph.pairs_remembered > before
    assert body["label"] == max(body["scores"], key=body["scores"].get)


@pytest.mark.parametrize("config", ["baseline", "graph", "programs"])
def test_responses_match_their_documented_models(client: TestClient, config):
    from app.serve import models as m

    two = "John Lennon was born in 1940 and Snowpiercer is a romantic comedy."
    body = client.post("/v1/verify", json={"claim": two, "config": config}).json()
    # nothing missing, nothing extra (extra keys are dropped by validation, then differ here)
    assert m.VerifyResponse.model_validate(body).model_dump(mode="json", exclude_unset=True) == body
    batch = client.post("/v1/verify/batch", json={"claims": [two, CLAIM], "config": config}).json()
    m.BatchResponse.model_validate(batch)
    for path, model in [("/v1/configs", m.ConfigsResponse), ("/v1/runs", m.RunsResponse)]:
        m.__dict__[model.__name__].model_validate(client.get(path).json())


def test_k_sets_the_number_of_evidence_sentences(client: TestClient, service):
    one = client.post("/v1/verify", json={"claim": CLAIM, "config": "baseline", "k": 1}).json()
    assert len(one["evidence"]) == 1
    assert service.served["baseline"].config.verifier.top_k == 3  # restored for the next batch
    again = client.post("/v1/verify", json={"claim": CLAIM, "config": "baseline"}).json()
    assert len(again["evidence"]) == 3


def test_configs_report_the_configs_own_k_while_a_request_with_another_k_runs(client: TestClient, service):
    served = service.served["baseline"]
    real_run = served.pipe.run
    started, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def held_run(claims, *args, **kwargs):  # the real pipeline, held until the test has looked
        seen.append(served.config.verifier.top_k)
        started.set()
        assert release.wait(30)
        return real_run(claims, *args, **kwargs)

    served.pipe.run = held_run
    try:
        reply: dict = {}
        t = threading.Thread(
            target=lambda: reply.update(client.post("/v1/verify", json={"claim": CLAIM, "k": 1}).json())
        )
        t.start()
        assert started.wait(30)
        listed = {c["name"]: c["top_k"] for c in client.get("/v1/configs").json()["configs"]}
        release.set()
        t.join(60)
    finally:
        release.set()
        served.pipe.run = real_run
    assert seen == [1]  # the batch did run with the request's k
    assert listed["baseline"] == 3  # and /v1/configs still gave the config's own
    assert len(reply["evidence"]) == 1


def test_graph_verdict_has_the_fact_graph_and_graal_paths(client: TestClient):
    body = client.post("/v1/verify", json={"claim": CLAIM, "config": "graph"}).json()
    g = body["graph"]
    ids = {n["id"] for n in g["nodes"]}
    facts = [n for n in g["nodes"] if n["kind"] == "fact"]
    entities = [n for n in g["nodes"] if n["kind"] == "entity"]
    assert facts and entities
    assert all(e["source"] in ids and e["target"] in ids for e in g["edges"])
    assert all(n["id"] == f"fact:{n['page']}:{n['line']}" and n["text"] for n in facts)
    # every fact node has its page's entity; propagated scores are not all equal
    assert all(
        any(e["kind"] == "page" and n["id"] in (e["source"], e["target"]) for e in g["edges"]) for n in facts
    )
    assert len({round(n["propagated"], 9) for n in g["nodes"]}) > 1
    # the evidence read is the graph's best facts, in the graph's order
    best = sorted(facts, key=lambda n: -n["score"])[: len(body["evidence"])]
    assert [(n["page"], n["line"]) for n in best] == [(e["page"], e["line"]) for e in body["evidence"]]
    assert set(g["covered"]) <= set(g["claim_entities"])
    reasons = {p["reason"] for p in body["graal_paths"]}
    assert reasons and reasons <= {"path", "page", "mention", "neighbour"}
    path = next(p for p in body["graal_paths"] if p["reason"] == "path")
    assert {"The_Beatles"} <= set(path["entities"]) and path["edges"]
    assert any("graal" in e["retrievers"] for e in body["evidence"])
    # subquestions retrieve lists of their own; a sentence names the retrievers, not the queries
    two = "John Lennon was born in 1940 and Snowpiercer is a romantic comedy."
    body = client.post("/v1/verify", json={"claim": two, "config": "graph"}).json()
    assert len(body["subquestions"]) >= 2
    assert all(e["retrievers"] and set(e["retrievers"]) <= {"bm25", "graal"} for e in body["evidence"])
    assert "graal_paths" in body["timings"] and "graph" in body["timings"]


def test_graph_nodes_carry_the_pipeline_propagated_scores(service):
    """The drawn graph is the ranked one: fact nodes' propagated scores equal the ranking's."""
    from garag.types import Claim
    from pipeline.graph_reasoning import fact_graph_view

    s = service.served["graph"]
    result = s.pipe.run([Claim(0, CLAIM)])[0]
    view = fact_graph_view(result.graph.facts, s.config.propagation, result.graph.claim_entities)
    by_id = {n["id"]: n for n in view["nodes"]}
    for f in result.graph.facts:
        node = by_id[f"fact:{f.sentence.page}:{f.sentence.line}"]
        assert node["propagated"] == pytest.approx(f.propagated) and node["score"] == pytest.approx(f.score)


def test_reasoning_steps_where_the_config_has_them(client: TestClient):
    body = client.post("/v1/verify", json={"claim": "John Lennon was born in 1940 and Snowpiercer is a "
                                           "romantic comedy.", "config": "programs"}).json()  # fmt: skip
    steps = body["steps"]
    assert steps["source"] == "rule" and steps["label"] == body["label"]
    verify = [s for s in steps["steps"] if s["kind"] == "verify"]
    assert len(verify) >= 2 and all(s["label"] in body["scores"] for s in verify)


def test_batch_gives_each_claim_its_own_verdict_in_order(client: TestClient):
    claims = [CLAIM, "Sandra Bullock was never a producer.", XSS_CLAIM]
    r = client.post("/v1/verify/batch", json={"claims": claims, "config": "baseline"})
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["claim"] for x in results] == claims
    single = client.post("/v1/verify", json={"claim": claims[1], "config": "baseline"}).json()
    assert results[1]["label"] == single["label"] and results[1]["evidence"] == single["evidence"]


def test_concurrent_requests_are_micro_batched_and_each_gets_its_own_result(server):
    import httpx

    claims = [CLAIM, "Sandra Bullock was never a producer.", "The Beatles were formed in England.",
              "John Lennon was born in 1940.", "Snowpiercer is a romantic comedy.",
              "Liverpool is a city in England.", "Ringo Starr was a drummer.",
              "Sandra Bullock is an actress."]  # fmt: skip
    solo = {c: httpx.post(f"{server.url}/v1/verify", json={"claim": c}, timeout=60).json() for c in claims}
    batcher = server.service.served["baseline"].batcher
    before = len(batcher.batches)
    barrier = threading.Barrier(len(claims))
    got: dict[str, dict] = {}

    def call(c: str) -> None:
        barrier.wait()
        got[c] = httpx.post(f"{server.url}/v1/verify", json={"claim": c}, timeout=60).json()

    threads = [threading.Thread(target=call, args=(c,)) for c in claims * 2]
    barrier = threading.Barrier(len(threads))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in claims:
        assert got[c]["claim"] == c
        assert got[c]["label"] == solo[c]["label"] and got[c]["evidence"] == solo[c]["evidence"]
    sizes = batcher.batches[before:]
    assert sum(sizes) == len(threads) and max(sizes) > 1  # several callers shared a verifier batch


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"claim": ""}, "claim"),
        ({"claim": "   "}, "claim"),
        ({"claim": CLAIM, "config": "nope"}, "config"),
        ({"claim": CLAIM, "k": 0}, "k"),
        ({"claim": CLAIM, "k": 21}, "k"),
        ({"claim": CLAIM, "extra": 1}, "extra"),
        ({"claim": "x" * 2001}, "claim"),
        ({"config": "baseline"}, "claim"),
        ({"claim": 5}, "claim"),
    ],
)
def test_bad_verify_input_is_422_json_naming_the_key(client: TestClient, body, where):
    r = client.post("/v1/verify", json=body)
    assert r.status_code == 422
    err = r.json()
    assert err["status"] == 422 and err["error"].startswith(where) and "Traceback" not in r.text


def test_malformed_json_is_422(client: TestClient):
    r = client.post("/v1/verify", content=b'{"claim": ', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["status"] == 422


def test_too_large_is_413(client: TestClient, service):
    r = client.post("/v1/verify/batch", json={"claims": [CLAIM] * 5})
    assert r.status_code == 413 and r.json() == {"error": "claims: 5 claims, the limit is 4", "status": 413}
    big = client.post("/v1/verify", json={"claim": "x" * (300 * 1024)})
    assert big.status_code == 413 and "bytes" in big.json()["error"]
    small = TestClient(create_app(with_settings(service, max_body=64)), base_url=LOCAL)
    chunked = small.post("/v1/verify", content=iter([b'{"claim": "', b"y" * 100, b'"}']),
                         headers={"content-type": "application/json"})  # fmt: skip
    assert chunked.status_code == 413  # no content-length: counted as it streams


def test_batch_errors_name_the_claim(client: TestClient):
    r = client.post("/v1/verify/batch", json={"claims": [CLAIM, " "]})
    assert r.status_code == 422 and r.json()["error"] == "claims.1: the claim is empty"
    assert client.post("/v1/verify/batch", json={"claims": []}).status_code == 422


def test_api_key_is_required_when_set(service):
    keyed = TestClient(create_app(with_settings(service, api_key="s3cret")), base_url=LOCAL)
    assert keyed.get("/v1/health").status_code == 200  # liveness stays open
    for method, path, body in [("get", "/v1/runs", None), ("post", "/v1/verify", {"claim": CLAIM}),
                               ("get", "/v1/configs", None)]:  # fmt: skip
        r = keyed.request(method.upper(), path, json=body)
        assert r.status_code == 401 and r.json() == {"error": "missing or wrong X-API-Key", "status": 401}
        wrong = keyed.request(method.upper(), path, json=body, headers={"X-API-Key": "s3cret!"})
        assert wrong.status_code == 401
        ok = keyed.request(method.upper(), path, json=body, headers={"X-API-Key": "s3cret"})
        assert ok.status_code == 200
    assert keyed.get("/").status_code == 200  # the page itself holds no data


def test_not_ready_is_503_and_health_still_answers(world):
    from app.serve.service import ServeSettings

    loading = Service(load_configs([world.configs["baseline"]]), ServeSettings(results_dir=world.results))
    c = TestClient(create_app(loading), base_url=LOCAL)
    assert c.get("/v1/health").status_code == 200
    ready = c.get("/v1/ready")
    assert ready.status_code == 503 and ready.json()["ready"] is False
    r = c.post("/v1/verify", json={"claim": CLAIM})
    assert r.status_code == 503 and r.json()["error"].startswith("not ready")


def test_failed_load_is_reported_by_ready(world, tmp_path):
    from app.serve.service import ServeSettings

    bad = tmp_path / "bad.yaml"
    bad.write_text(world.configs["baseline"].read_text().replace("wiki-pages", "no-such-corpus"))
    svc = Service(load_configs([bad]), ServeSettings()).load()
    body = TestClient(create_app(svc), base_url=LOCAL).get("/v1/ready").json()
    assert body["ready"] is False and "no-such-corpus" in body["error"]


def test_timeout_is_504(service):
    slow = TestClient(create_app(with_settings(service, timeout=1e-4)), base_url=LOCAL)
    r = slow.post("/v1/verify", json={"claim": CLAIM, "config": "graph"})
    assert r.status_code == 504 and r.json()["error"].startswith("no verdict within")


class FailingPipeline:
    """A fake pipeline (named so): it loads, then fails on every claim, to show a 500's body."""

    def __init__(self, config) -> None:  # noqa: ANN001
        self.config = config

    def build(self) -> FailingPipeline:
        return self

    def run(self, claims):  # noqa: ANN001, ANN201
        raise RuntimeError("secret internal detail /etc/passwd")


def test_internal_error_is_500_json_without_details(world):
    from app.serve.service import ServeSettings

    svc = Service(load_configs([world.configs["baseline"]]), ServeSettings(), factory=FailingPipeline).load()
    r = TestClient(create_app(svc), raise_server_exceptions=False, base_url=LOCAL).post(
        "/v1/verify", json={"claim": CLAIM}
    )
    assert r.status_code == 500
    assert r.json() == {"error": "internal error: RuntimeError", "status": 500}
    assert "passwd" not in r.text and "Traceback" not in r.text
    svc.close()


# -- runs --------------------------------------------------------------------------------------------


def test_runs_list_and_detail_match_the_run_files(client: TestClient, world):
    metrics = json.loads((world.results / world.run_id / "metrics.json").read_text())
    runs = client.get("/v1/runs").json()["runs"]
    assert [r["run_id"] for r in runs] == [world.run_id]
    assert runs[0]["systems"] == ["baseline", "graph"] and runs[0]["n_claims"] == 7
    for s in ("baseline", "graph"):
        assert runs[0]["metrics"][s]["label_accuracy"] == metrics["per_system"][s]["label_accuracy"]
    detail = client.get(f"/v1/runs/{world.run_id}").json()
    assert detail["significance"] == metrics["paired"] and detail["slices"] == metrics["slices"]
    assert set(detail["labels"]) == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}


def _records(world, system: str) -> dict:
    path = world.results / world.run_id / "predictions" / f"{system}.jsonl"
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_run_claims_filter_and_page(client: TestClient, world):
    url = f"/v1/runs/{world.run_id}/claims"
    everything = client.get(url, params={"page_size": 200}).json()
    assert everything["total"] == 7 and len(everything["claims"]) == 7
    paged = [client.get(url, params={"page_size": 2, "page": p}).json() for p in (1, 2, 3, 4)]
    assert paged[0]["pages"] == math.ceil(7 / 2)
    assert [c["id"] for p in paged for c in p["claims"]] == [c["id"] for c in everything["claims"]]
    base, graph = _records(world, "baseline"), _records(world, "graph")
    supports = client.get(url, params={"label": "SUPPORTS", "page_size": 200}).json()["claims"]
    assert supports and {c["id"] for c in supports} == {
        i for i, r in base.items() if r["label"] == "SUPPORTS"
    }
    for system, recs in (("baseline", base), ("graph", graph)):
        for correct in (True, False):
            got = client.get(url, params={"system": system, "correct": correct, "page_size": 200}).json()
            want = {i for i, r in recs.items() if (r["dataset_label"] == r["label"]) is correct}
            assert {c["id"] for c in got["claims"]} == want
    disagree = client.get(url, params={"disagree": "true", "page_size": 200}).json()["claims"]
    want = {
        i
        for i in base
        if (base[i]["dataset_label"] == base[i]["label"]) != (graph[i]["dataset_label"] == graph[i]["label"])
    }
    assert {c["id"] for c in disagree} == want
    sl = client.get(url, params={"slice": "evidence on several pages", "page_size": 200}).json()["claims"]
    assert [c["id"] for c in sl] == [2]
    assert client.get(url, params={"q": "sandra"}).json()["total"] == 1
    row = everything["claims"][0]
    assert row["systems"]["baseline"]["evidence_read"] == base[row["id"]]["evidence_read"]


def test_run_claim_detail_has_both_systems_evidence_with_text(client: TestClient, world, service):
    d = client.get(f"/v1/runs/{world.run_id}/claims/2").json()
    assert set(d["records"]) == {"baseline", "graph"}
    store = service.served["baseline"].pipe.store
    for system, sents in d["sentences"].items():
        assert [[s["page"], s["line"]] for s in sents] == d["records"][system]["evidence_read"]
        for s in sents:
            raw = store.get(SentenceId(s["page"], s["line"])).text
            assert (s["raw_text"], s["text"]) == (raw, detokenize(raw))
    assert [[s["page"], s["line"]] for s in d["gold_evidence"][0]] == [["The_Beatles", 0], ["Liverpool", 0]]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/runs/nope", 404),
        ("/v1/runs/..%2F..%2Fetc", 404),
        ("/v1/runs/{run}/claims/12345", 404),
        ("/v1/runs/{run}/claims?correct=true", 422),
        ("/v1/runs/{run}/claims?system=nope", 422),
        ("/v1/runs/{run}/claims?page=0", 422),
        ("/v1/runs/{run}/claims?page_size=1000", 422),
        ("/v1/nothing-here", 404),
    ],
)
def test_run_errors(client: TestClient, world, path, status):
    r = client.get(path.format(run=world.run_id))
    assert r.status_code == status and r.json()["status"] == status


def test_evidence_reads_as_people_write_it_and_keeps_the_corpus_text(client: TestClient):
    body = client.post(
        "/v1/verify", json={"claim": "John Lennon was born in 1940.", "config": "baseline"}
    ).json()
    lennon = next(e for e in body["evidence"] if "-LRB-" in e["raw_text"])
    assert "-LRB-" not in lennon["text"] and "(" in lennon["text"]


def test_markup_claims_come_back_as_plain_json_text(client: TestClient):
    body = client.post("/v1/verify", json={"claim": XSS_CLAIM, "config": "graph"}).json()
    assert body["claim"] == XSS_CLAIM
    texts = [e["text"] for e in body["evidence"]]
    assert any("<script>" in t for t in texts)  # the markup page is retrieved, verbatim, as data


def test_page_is_served_with_a_strict_content_security_policy(client: TestClient):
    r = client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp
    js = client.get("/static/app.js").text
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js  # data never becomes markup
    assert re.search(r"cytoscape\.min\.js", r.text)
    assert client.get("/static/vendor/cytoscape.min.js").status_code == 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0 is not a loopback address: set GARAG_API_KEY"),
        (["--configs", "no/such.yaml"], "no/such.yaml: no such config file"),
        (["--port", "70000"], "--port must be in 1..65535"),
        (["--keep-alive", "0"], "--timeout and --keep-alive must be > 0"),
    ],
)
def test_serve_command_refuses_unsafe_or_bad_arguments_in_one_line(args, message, capsys, monkeypatch):
    from app.cli import main

    monkeypatch.delenv("GARAG_API_KEY", raising=False)
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_configs_name_each_configs_llm_judge(tmp_path, world):
    """/v1/configs says which served config asks the LLM judge (read before anything is loaded)."""
    from app.serve.service import ServeSettings

    paths = []
    for name, judge in (("plain", "never"), ("judged", "always"), ("hover_only", "two_way")):
        paths.append(tmp_path / f"{name}.yaml")
        paths[-1].write_text(f"verifier:\n  llm_judge: {judge}\n", encoding="utf-8")
    settings = ServeSettings(max_batch=1, micro_batch=1, max_wait=0.01, results_dir=world.results, timeout=5)
    described = Service(load_configs(paths), settings).describe()
    assert {c["name"]: c["llm_judge"] for c in described} == {
        "plain": "never", "judged": "always", "hover_only": "two_way"}  # fmt: skip


@pytest.mark.parametrize(
    ("host", "status"),
    [("127.0.0.1:8000", 200), ("localhost", 200), ("[::1]:8000", 200), ("LOCALHOST:1", 200),
     ("evil.example", 400), ("evil.example:8000", 400), ("127.0.0.1.evil.example", 400), ("", 400)],
)  # fmt: skip
def test_only_allowed_host_names_are_answered(client: TestClient, host: str, status: int):
    """A page on another site that rebinds its name to 127.0.0.1 sends its own Host: refused, on every
    path (the page and /v1/health too)."""
    for path in ("/", "/v1/health", "/v1/configs"):
        r = client.get(path, headers={"host": host})
        assert r.status_code == status, (path, host)
        if status == 400:
            assert "is not allowed (garag serve --allowed-host" in r.json()["error"]


def test_allowed_host_adds_a_name(service):
    c = TestClient(
        create_app(with_settings(service, allowed_hosts=("127.0.0.1", "garag.lan"))), base_url=LOCAL
    )
    assert c.get("/v1/health", headers={"host": "garag.lan:8000"}).status_code == 200
    assert c.get("/v1/health", headers={"host": "localhost"}).status_code == 400


def test_serve_answers_the_loopback_names_the_bind_address_and_allowed_hosts():
    from app.commands import serve_hosts

    assert serve_hosts("127.0.0.1", []) == ("127.0.0.1", "localhost", "::1")
    assert serve_hosts("0.0.0.0", ["Garag.LAN"]) == ("127.0.0.1", "localhost", "::1", "garag.lan")
    assert serve_hosts("192.168.1.5", []) == ("127.0.0.1", "localhost", "::1", "192.168.1.5")


def test_a_flood_gets_429s_while_the_server_keeps_answering(world):
    """60 concurrent requests of 3 claims each on a real uvicorn whose queue holds 4 claims: some are
    answered, the rest get 429 with Retry-After, none a 5xx, and /v1/health answers in the middle."""
    import httpx

    from app.serve.service import ServeSettings

    settings = ServeSettings(micro_batch=1, max_wait=0.0, results_dir=world.results, timeout=60, max_queue=4)
    svc = Service(load_configs([str(world.configs["baseline"])]), settings).load()
    statuses: list[int] = []
    retry_after: set[str] = set()
    with serving(svc) as server, httpx.Client(base_url=server.url, timeout=60) as http:

        def one() -> None:
            r = http.post("/v1/verify/batch", json={"claims": [CLAIM] * 3, "config": "baseline"})
            statuses.append(r.status_code)
            if r.status_code == 429:
                retry_after.add(r.headers.get("retry-after", ""))

        threads = [threading.Thread(target=one) for _ in range(60)]
        for t in threads:
            t.start()
        health = http.get("/v1/health")
        for t in threads:
            t.join(60)
    svc.close()
    assert health.status_code == 200
    assert len(statuses) == 60 and set(statuses) <= {200, 429}
    assert statuses.count(200) >= 1 and statuses.count(429) >= 1
    assert retry_after and all(v.isdigit() and int(v) >= 1 for v in retry_after)


def test_loading_one_run_does_not_wait_for_another(world, tmp_path):
    """RunIndex holds one lock per run: while one run's load is held, another run is answered."""
    import shutil

    from app.serve.runs import RunIndex

    for name in ("slow", "quick"):
        shutil.copytree(world.results / world.run_id, tmp_path / name)
    index = RunIndex(tmp_path)
    entered, release = threading.Event(), threading.Event()
    real_load = index._load

    def held(run_id, path):  # noqa: ANN001, ANN202 - the real loader, held open for "slow"
        if run_id == "slow":
            entered.set()
            release.wait(10)
        return real_load(run_id, path)

    index._load = held  # type: ignore[method-assign]
    slow = threading.Thread(target=index.get, args=("slow",))
    slow.start()
    assert entered.wait(10)
    quick: list = []
    other = threading.Thread(target=lambda: quick.append(index.get("quick")))
    other.start()
    other.join(10)
    assert quick and quick[0].run_id == "quick"  # answered while "slow" is still loading
    release.set()
    slow.join(10)


def test_metrics_count_requests_latency_claims_and_the_queue(client: TestClient):
    assert client.post("/v1/verify", json={"claim": CLAIM, "config": "baseline"}).status_code == 200
    assert client.get("/v1/runs/nope").status_code == 404
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert re.search(r'garag_requests_total\{method="POST",path="/v1/verify",status="200"\} [1-9]', text)
    assert re.search(
        r'garag_requests_total\{method="GET",path="/v1/runs/\{run_id\}",status="404"\} [1-9]', text
    )
    assert re.search(r'garag_request_seconds_count\{path="/v1/verify"\} [1-9]', text)
    assert re.search(r'garag_claims_verified_total\{config="baseline"\} [1-9]', text)
    assert re.search(r'garag_queue_claims\{config="graph"\} 0\.0', text)


def test_metrics_need_the_key_when_one_is_set(service):
    keyed = TestClient(create_app(with_settings(service, api_key="s3cret")), base_url=LOCAL)
    assert keyed.get("/metrics").status_code == 401
    assert keyed.get("/metrics", headers={"X-API-Key": "s3cret"}).status_code == 200
