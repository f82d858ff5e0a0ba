"""Corpus management through ``garag serve``'s API (app/serve/corpus.py): the real app under a real
uvicorn, the real pipelines (BM25, the tiny trained classifier) on a world of their own
(tests/serve/corpus_world.py): 50 pages added become retrievable without a restart, removed they are
not, answers during an update come from one index version or the other, a restart loads the edited
corpus; every endpoint and every error."""

from __future__ import annotations

import json
import threading
import time

import pytest

from .conftest import serving
from .corpus_world import claim_about, make_configs, make_service, page_name, pages_jsonl, wait_for_update

fastapi = pytest.importorskip("fastapi")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from app.serve.app import create_app  # noqa: E402
from app.serve.corpus_models import CorpusResponse, EditAccepted, PageOut, UpdateOut  # noqa: E402
from app.serve.service import ServeSettings, Service, load_configs  # noqa: E402
from garag.artifacts import read_meta  # noqa: E402
from garag.text import detokenize  # noqa: E402
from garag.types import SentenceId  # noqa: E402

LOCAL = "http://127.0.0.1"
NEW = [page_name(i) for i in range(50)]


@pytest.fixture(scope="module")
def cworld(world, tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    configs = make_configs(world, root)
    svc = make_service(list(configs.values()), root)
    yield root, configs, svc
    svc.close()


@pytest.fixture(scope="module")
def live(cworld):
    with serving(cworld[2]) as srv:
        yield srv


@pytest.fixture(scope="module")
def http(live):
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client


def state_files(root) -> list:
    return sorted(str(p.relative_to(root)) for p in (root / "state").rglob("*") if p.is_file())


def by_name(body: dict) -> dict:
    return {c["name"]: c for c in body["configs"]}


def test_get_corpus_shows_each_configs_corpus_counts_and_index_version(http, cworld):
    _, _, svc = cworld
    body = http.get("/v1/corpus").json()
    assert CorpusResponse.model_validate(body).model_dump(mode="json") == body
    configs = by_name(body)
    for name in ("baseline", "programs", "other"):
        store = svc.served[name].pipe.store
        assert (configs[name]["pages"], configs[name]["sentences"]) == (store.n_pages, len(store))
        assert configs[name]["index_version"] == svc.index_version(name) != ""
        assert configs[name]["edits_applied"] == 0
    assert configs["baseline"]["pages"] == 13 and configs["other"]["pages"] == 6
    assert (
        configs["baseline"]["corpus_id"] == configs["programs"]["corpus_id"] != configs["other"]["corpus_id"]
    )
    assert [(c["configs"], c["edits"]) for c in body["corpora"]] == [
        (["baseline", "programs"], []),
        (["other"], []),
    ]
    assert body["updates"] == []
    paths = http.get("/openapi.json").json()["paths"]
    assert {
        "/v1/corpus",
        "/v1/corpus/pages",
        "/v1/corpus/updates/{update_id}",
        "/v1/corpus/pages/{page_id}",
    } <= set(paths)


def test_a_page_is_shown_from_the_corpus_of_the_config_asked(http, cworld):
    store = cworld[2].served["baseline"].pipe.store
    body = http.get("/v1/corpus/pages/Sandra_Bullock").json()
    PageOut.model_validate(body)
    assert body["config"] == "baseline" and body["index_version"] == cworld[2].index_version("baseline")
    assert [(s["line"], s["raw_text"]) for s in body["sentences"]] == [
        (s.id.line, s.text) for s in store.page("Sandra_Bullock")]  # fmt: skip
    assert (
        all(s["text"] == detokenize(s["raw_text"]) for s in body["sentences"]) and len(body["sentences"]) > 1
    )
    other = http.get("/v1/corpus/pages/Sandra_Bullock", params={"config": "other"})  # not in its 6 pages
    assert other.status_code == 404
    assert other.json() == {"status": 404, "error": "page 'Sandra_Bullock' is not in the corpus of config "
                            f"'other' (index version {cworld[2].index_version('other')})"}  # fmt: skip


PAGE_A = b'{"id": "Page_A", "text": "A .", "lines": "0\\tPage A is a page ."}\n'


@pytest.mark.parametrize(
    "body, error",
    [
        (PAGE_A + b'{"id": "Page_B", "lines": \n', "line 2: not valid JSON (Expecting value)"),
        (PAGE_A + b'{"id": "Page_B", "text": "B ."}\n', "line 2: page 'Page_B' has no string 'lines'"),
        (b'{"text": "x", "lines": "0\\tx"}\n', "line 1: page has no string 'id'"),
        (
            b'{"id": "Page_B", "lines": "zero\\tB ."}\n',
            "line 1: 'lines' entry does not start with a sentence number: 'zero\\tB .'",
        ),  # fmt: skip
        (PAGE_A + b"\xff\xfe\n", "line 2: not UTF-8 text (byte 0 of the line)"),
        (PAGE_A + PAGE_A, "page id 'Page_A' appears twice"),
        (b"", "the upload holds no page (wiki-pages JSON lines: id, text, lines)"),
        (
            b'{"id": "#A", "lines": "0\\tA ."}\n',
            "page id '#A' starts with '#': it could not be removed later",
        ),
    ],
)
def test_a_bad_upload_gets_one_line_naming_it_and_nothing_is_kept(http, cworld, body, error):
    before = state_files(cworld[0])
    r = http.post("/v1/corpus/pages", content=body)
    assert (r.status_code, r.json()) == (422, {"error": error, "status": 422})
    assert state_files(cworld[0]) == before
    assert all(c["edits"] == [] for c in http.get("/v1/corpus").json()["corpora"])


@pytest.mark.parametrize(
    "method, path, kwargs, status, error",
    [
        (
            "POST",
            "/v1/corpus/pages?config=nope",
            {"content": PAGE_A},
            422,
            "config: unknown config 'nope'; loaded: baseline, programs, other",
        ),
        (
            "DELETE",
            "/v1/corpus/pages",
            {"json": {"ids": ["No_Such_Page", "The_Beatles", "Nor_This"]}},
            422,
            "ids: not in the corpus of baseline, programs: 'No_Such_Page', 'Nor_This'",
        ),
        (
            "DELETE",
            "/v1/corpus/pages",
            {"json": {"ids": ["Sandra_Bullock"], "config": "other"}},
            422,
            "ids: not in the corpus of other: 'Sandra_Bullock'",
        ),
        (
            "DELETE",
            "/v1/corpus/pages",
            {"json": {"ids": []}},
            422,
            "ids: List should have at least 1 item after validation, not 0",
        ),
        (
            "DELETE",
            "/v1/corpus/pages",
            {"json": {"ids": ["England", " The_Beatles"]}},
            422,
            "ids.1: page id ' The_Beatles' starts or ends with white space, or holds a line break",
        ),
        (
            "DELETE",
            "/v1/corpus/pages",
            {"json": {"ids": ["England"], "force": True}},
            422,
            "force: Extra inputs are not permitted",
        ),
        (
            "DELETE",
            "/v1/corpus/pages",
            {"json": {"ids": ["England"], "config": "nope"}},
            422,
            "config: unknown config 'nope'; loaded: baseline, programs, other",
        ),
        ("GET", "/v1/corpus/updates/nope", {}, 404, "no corpus update 'nope'"),
        (
            "GET",
            "/v1/corpus/pages/No_Such_Page",
            {},
            404,
            "page 'No_Such_Page' is not in the corpus of config 'baseline' (index version {v})",
        ),
        (
            "GET",
            "/v1/corpus/pages/England?config=nope",
            {},
            422,
            "config: unknown config 'nope'; loaded: baseline, programs, other",
        ),
    ],
)
def test_edits_that_cannot_be_done_get_one_line_and_nothing_is_kept(
    http, cworld, method, path, kwargs, status, error
):
    before = state_files(cworld[0])
    r = http.request(method, path, **kwargs)
    error = error.format(v=cworld[2].index_version("baseline"))
    body = r.json()
    assert (r.status_code, body["error"], body["status"]) == (status, error, status)
    assert set(body) <= {"error", "status", "detail"}  # (validation errors list every problem in detail)
    assert state_files(cworld[0]) == before


def test_limits_key_and_loading_apply_to_the_corpus_endpoints(cworld, tmp_path):
    _, configs, svc = cworld
    small = Service(load_configs([str(configs["other"])]), ServeSettings(
        results_dir=tmp_path, state_dir=tmp_path / "state", max_upload=200, api_key="k"))  # fmt: skip
    client = TestClient(create_app(small), base_url=LOCAL)  # not loaded yet
    assert client.get("/v1/corpus").status_code == 401
    key = {"X-API-Key": "k"}
    assert client.get("/v1/corpus", headers=key).json() == {
        "error": "not ready: the models are loading", "status": 503}  # fmt: skip
    r = client.post("/v1/corpus/pages", headers=key, content=PAGE_A)
    assert (r.status_code, r.json()["error"]) == (503, "not ready: the models are loading")
    big = client.post("/v1/corpus/pages", headers=key, content=PAGE_A * 5)  # over max_upload
    assert big.json() == {"error": "request body over 200 bytes", "status": 413}
    assert not (tmp_path / "state" / "corpus").exists()


def test_50_pages_added_are_retrieved_without_a_restart_and_removed_are_not(http, live, cworld):
    """While the update runs, four threads verify claims about the new pages: each answer names its
    index version, and its evidence is wholly that version's (new pages only from the new one).  One
    baseline batch is held from before the switch until after it: it still answers from the old one."""
    root, configs, svc = cworld
    v0, other_v0 = svc.index_version("baseline"), svc.index_version("other")
    old = svc.served["baseline"].pipe
    real_run, held, release = old.run, threading.Event(), threading.Event()

    def held_run(claims, *args, **kwargs):  # the real pipeline; its first batch waits for the switch
        if not held.is_set():
            held.set()
            assert release.wait(120)
        return real_run(claims, *args, **kwargs)

    seen: list[tuple[int, dict]] = []
    errors: list[str] = []
    stop = threading.Event()

    def hammer(t: int) -> None:
        with httpx.Client(base_url=live.url, timeout=60) as c:
            n = 0
            while not stop.is_set():
                i, config = (7 * t + n) % 50, ("baseline", "programs")[n % 2]
                n += 1
                r = c.post("/v1/verify", json={"claim": claim_about(i), "config": config})
                if r.status_code == 200:
                    seen.append((i, r.json()))
                else:
                    errors.append(r.text)

    earlier = http.get("/v1/history?page_size=1").json()["total"]
    threads = [threading.Thread(target=hammer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    while len(seen) < 4 and not errors:
        time.sleep(0.01)
    old.run = held_run
    assert held.wait(60)
    r = http.post("/v1/corpus/pages", content=pages_jsonl(range(50)))
    assert r.status_code == 202, r.text
    accepted = EditAccepted.model_validate(r.json())
    assert (accepted.configs, accepted.not_applied, accepted.replaced) == (
        ["baseline", "programs"],
        ["other"],
        [],
    )
    assert (accepted.edit.kind, accepted.edit.pages, accepted.edit.status) == ("add", 50, "pending")
    assert accepted.update.status in ("queued", "running")
    done = UpdateOut.model_validate(wait_for_update(http.get, accepted.update.id))
    after = len(seen)
    release.set()
    while len(seen) < after + 8 and not errors:
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(60)
    assert done.status == "done", done.error
    v1 = done.result["baseline"]["index_version"]
    assert v1 != v0 and done.result["programs"] == done.result["baseline"] and done.progress == 1.0
    assert (done.result["baseline"]["pages"], done.phase, done.error) == (63, "done", None)
    new = svc.served["baseline"].pipe
    for kind in ("store", "bm25"):  # derived from the indexes it answered from, not rebuilt
        assert read_meta(new.retrieval.artifacts[kind])["derived_from"] == old.retrieval.artifacts[kind].name
    assert errors == []
    stores = {v0: old.store, v1: svc.served["baseline"].pipe.store}
    assert {b["index_version"] for _, b in seen} == {v0, v1}  # answers from both sides of the switch
    assert v0 in {b["index_version"] for _, b in seen[after:] if b["config"] == "baseline"}  # the held batch
    for i, b in seen:
        store = stores[b["index_version"]]
        for e in b["evidence"]:  # every sentence from the version the answer names
            assert store.get(SentenceId(e["page"], e["line"])).text == e["raw_text"]
        pages = {e["page"] for e in b["evidence"]}
        assert (page_name(i) in pages) if b["index_version"] == v1 else not (pages & set(NEW))
    kept = [json.loads(x) for x in http.get("/v1/history/export?format=jsonl").text.splitlines()][earlier:]
    assert len(kept) == len(seen)  # the history keeps the version each answer came from, the held batch's
    assert all(e["index_version"] == e["response"]["index_version"] for e in kept)  # (v0) too
    assert sorted(e["index_version"] for e in kept) == sorted(b["index_version"] for _, b in seen)

    configs_now = by_name(http.get("/v1/corpus").json())
    assert [configs_now[n]["index_version"] for n in ("baseline", "programs", "other")] == [v1, v1, other_v0]
    assert [configs_now[n]["pages"] for n in ("baseline", "programs", "other")] == [63, 63, 6]
    assert [configs_now[n]["edits_applied"] for n in ("baseline", "programs", "other")] == [1, 1, 0]
    page = http.get(f"/v1/corpus/pages/{NEW[7]}").json()
    assert [s["raw_text"] for s in page["sentences"]] == [
        f"{NEW[7]} is a glimmerstone village in the Vellmoria highlands .",
        f"{NEW[7]} was founded by the lantern makers of Vellmoria ."]  # fmt: skip
    assert http.get(f"/v1/corpus/pages/{NEW[7]}", params={"config": "other"}).status_code == 404
    other = http.post("/v1/verify", json={"claim": claim_about(7), "config": "other"}).json()
    assert other["index_version"] == other_v0 and not {e["page"] for e in other["evidence"]} & set(NEW)

    again = make_service(list(configs.values()), root)  # a restart on the same state directory
    try:
        assert [again.index_version(n) for n in ("baseline", "programs", "other")] == [v1, v1, other_v0]
        result = again.submit("baseline", [claim_about(31)], None)[0].result(60)
        assert page_name(31) in {e["page"] for e in result["evidence"]}
    finally:
        again.close()

    r = http.request("DELETE", "/v1/corpus/pages", json={"ids": NEW})
    assert r.status_code == 202, r.text
    assert (r.json()["edit"]["kind"], r.json()["edit"]["pages"]) == ("remove", 50)
    gone = wait_for_update(http.get, r.json()["update"]["id"])
    assert gone["status"] == "done", gone["error"]
    v2 = gone["result"]["baseline"]["index_version"]
    assert v2 not in (v0, v1) and gone["result"]["baseline"]["pages"] == 13
    for i in (0, 31, 49):
        b = http.post("/v1/verify", json={"claim": claim_about(i), "config": "programs"}).json()
        assert b["index_version"] == v2 and not {e["page"] for e in b["evidence"]} & set(NEW)
    assert http.get(f"/v1/corpus/pages/{NEW[7]}").status_code == 404
    body = http.get("/v1/corpus").json()
    edits = body["corpora"][0]["edits"]
    assert [(e["kind"], e["pages"], e["status"]) for e in edits] == [
        ("add", 50, "applied"),
        ("remove", 50, "applied"),
    ]
    assert [u["id"] for u in body["updates"]] == [gone["id"], done.id]  # the newest first
    again_add = http.post("/v1/corpus/pages", content=pages_jsonl([3]))
    refused = (
        f"pages '{NEW[3]}' were removed by an earlier edit and cannot be added again "
        "(removals apply after additions)"
    )
    assert again_add.json() == {"status": 422, "error": refused}
    twice = http.request("DELETE", "/v1/corpus/pages", json={"ids": [NEW[3]]})
    assert twice.json()["error"] == f"ids: not in the corpus of baseline, programs: '{NEW[3]}'"


def test_an_uploaded_page_replaces_the_page_with_its_id(http, cworld):
    page = b'{"id": "Snowpiercer", "lines": "0\\tSnowpiercer is a 2013 romantic comedy about trains ."}\n'
    r = http.post("/v1/corpus/pages", content=page, params={"config": "programs"})
    assert r.status_code == 202 and r.json()["replaced"] == ["Snowpiercer"]
    assert wait_for_update(http.get, r.json()["update"]["id"])["status"] == "done"
    body = http.get("/v1/corpus/pages/Snowpiercer", params={"config": "baseline"}).json()
    assert [s["raw_text"] for s in body["sentences"]] == [
        "Snowpiercer is a 2013 romantic comedy about trains ."
    ]
    assert by_name(http.get("/v1/corpus").json())["baseline"]["pages"] == 13


def test_an_update_is_listed_among_the_jobs_and_runs_to_its_end(http, cworld):
    page = pages_jsonl([99])
    r = http.post("/v1/corpus/pages", content=page, params={"config": "baseline"})
    assert r.status_code == 202
    update = r.json()["update"]
    assert update["job"], update
    done = wait_for_update(http.get, update["id"])
    assert done["status"] == "done"
    job = http.get(f"/v1/jobs/{update['job']}").json()
    assert job["kind"] == "corpus_update" and job["state"] == "done" and job["name"] == "corpus: add 1 page"
    versions = {c["index_version"] for c in done["result"].values()}
    assert job["metrics"]["configs"] == done["result"] and set(job["index_versions"]) <= versions
    assert update["job"] in [j["id"] for j in http.get("/v1/jobs").json()["jobs"]]
    for action in ("cancel", "resume"):
        r = http.post(f"/v1/jobs/{update['job']}/{action}")
        assert r.status_code == 409 and "corpus_update" in r.json()["error"], r.json()
    r = http.request("DELETE", "/v1/corpus/pages", json={"ids": [page_name(99)], "config": "baseline"})
    assert r.status_code == 202 and wait_for_update(http.get, r.json()["update"]["id"])["status"] == "done"


def test_a_failed_update_says_why_and_one_a_restart_interrupted_runs_again(world, tmp_path):
    from pipeline.verification import VerificationPipeline

    configs = make_configs(world, tmp_path)

    def factory(cfg):  # the real pipeline, but an edited corpus fails to build as on a full disk
        if cfg.data.add_pages:
            raise OSError(28, "No space left on device (raised by the test)")
        return VerificationPipeline(cfg, progress=False)

    svc = make_service([configs["other"]], tmp_path, factory=factory)
    try:
        client = TestClient(create_app(svc), base_url=LOCAL)
        v0 = svc.index_version("other")
        r = client.post("/v1/corpus/pages", content=pages_jsonl([0]))
        failed = wait_for_update(client.get, r.json()["update"]["id"])
        assert (failed["status"], failed["error"]) == (
            "failed", "OSError: [Errno 28] No space left on device (raised by the test)")  # fmt: skip
        body = client.get("/v1/corpus").json()
        assert [e["status"] for e in body["corpora"][0]["edits"]] == ["failed"]
        assert (body["configs"][0]["index_version"], body["configs"][0]["pages"]) == (v0, 6)
        answer = client.post("/v1/verify", json={"claim": claim_about(0), "config": "other"}).json()
        assert answer["index_version"] == v0
    finally:
        svc.close()
    again = make_service([configs["other"]], tmp_path)  # the real factory: the failed edit stays out
    try:
        client = TestClient(create_app(again), base_url=LOCAL)
        assert again.index_version("other") == v0
        r = client.post("/v1/corpus/pages", content=pages_jsonl([0]))  # its pages may come again
        update_id = r.json()["update"]["id"]
        v1 = wait_for_update(client.get, update_id)["result"]["other"]["index_version"]
        assert by_name(client.get("/v1/corpus").json())["other"]["pages"] == 7
    finally:
        again.close()
    # the state a crash in the middle of that update leaves: its edit pending, the update running
    state = tmp_path / "state" / "corpus"
    edits = json.loads((state / "edits.json").read_text(encoding="utf-8"))
    edits["edits"][1]["status"] = "pending"
    (state / "edits.json").write_text(json.dumps(edits), encoding="utf-8")
    record = json.loads((state / "updates" / f"{update_id}.json").read_text(encoding="utf-8"))
    record.update(status="running", phase="building", result={}, finished=None)
    (state / "updates" / f"{update_id}.json").write_text(json.dumps(record), encoding="utf-8")
    third = make_service([configs["other"]], tmp_path)
    try:
        client = TestClient(create_app(third), base_url=LOCAL)
        resumed = wait_for_update(client.get, update_id)
        assert (resumed["status"], resumed["result"]["other"]["index_version"]) == ("done", v1)
        body = client.get("/v1/corpus").json()
        assert [e["status"] for e in body["corpora"][0]["edits"]] == ["failed", "applied"]
        assert (body["configs"][0]["index_version"], body["configs"][0]["pages"]) == (v1, 7)
    finally:
        third.close()
