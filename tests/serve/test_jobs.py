"""``garag serve``'s jobs through a real uvicorn on 127.0.0.1, with the real pipelines on the fixture
corpus and a real SQLite store: upload (FEVER, HoVer, CSV, JSON), progress (JSON and the event
stream), cancel, delete, the paged results and their filters, the three downloads, the metrics of
``garag evaluate``, and every error as one JSON line."""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import sqlite3
import time

import pytest

from .conftest import serving

httpx = pytest.importorskip("httpx")
pytest.importorskip("python_multipart", reason="python-multipart (the serve extra) is not installed")

from app.cli import main  # noqa: E402
from app.serve.app import create_app  # noqa: E402

FINISHED = ("done", "failed", "cancelled")
HEADLINE = ("n", "label_accuracy", "fever_score", "macro_f1", "evidence_precision", "evidence_recall",
            "evidence_f1", "per_class", "confusion")  # fmt: skip


@pytest.fixture(scope="module")
def jobs(service, tmp_path_factory):
    """The session's pipelines served with a state directory of this module's own."""
    svc = copy.copy(service)
    svc.settings = dataclasses.replace(service.settings, state_dir=tmp_path_factory.mktemp("jobs-state"))
    app = create_app(svc)
    with serving(svc, app) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        client.state = svc.settings.state  # type: ignore[attr-defined]
        yield client
    app.state.jobs.stop()


def upload(client, filename: str, data: bytes, **fields):
    return client.post(
        "/v1/jobs", files={"file": (filename, data)}, data={k: str(v) for k, v in fields.items()}
    )


def wait(client, job_id: str, until=lambda j: j["state"] in FINISHED, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"job {job_id} stuck: {job}"
        time.sleep(0.05)


def many_claims(world, n: int, start: int = 1000) -> bytes:
    """``n`` FEVER lines: the fixture claims over and over, each with an id of its own."""
    base = [json.loads(x) for x in world.claims.read_text(encoding="utf-8").splitlines()]
    lines = [json.dumps({**base[i % len(base)], "id": start + i}) for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


def lines(response) -> list[dict]:
    return [json.loads(x) for x in response.text.splitlines()]


def test_a_fever_file_scores_as_garag_evaluate_and_its_submission_scores_the_same(jobs, world, tmp_path):
    r = upload(jobs, "claims.jsonl", world.claims.read_bytes(), config="baseline")
    assert r.status_code == 201, r.text
    job = r.json()
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    assert (job["kind"], job["format"], job["total"], job["labelled"]) == ("claims", "fever", 7, 7)
    assert job["state"] in ("queued", "running", "done") and job["name"] == "claims.jsonl"
    job = wait(jobs, job["id"])
    assert job["state"] == "done" and job["done"] == 7 and job["progress"] == 1.0 and job["error"] is None
    assert job["claims_per_second"] > 0 and job["eta_seconds"] is None and job["starts"] == 1
    assert job["started"] <= job["finished"] and len(job["index_versions"]) == 1
    # garag evaluate on the same claims with the same config: the same metrics
    config = str(world.configs["baseline"])
    assert main(["evaluate", "--config", config, "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    evaluated = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    for key in (*HEADLINE, "retrieval", "macro_f1_ci", "missing_predictions"):
        assert job["metrics"][key] == evaluated[key], key
    timeless = [
        {k: v for k, v in m["garag"].items() if k != "response_time_s"} for m in (job["metrics"], evaluated)
    ]
    assert timeless[0] == timeless[1]
    # garag's records: those garag predict wrote for the same claims (ids and gold labels kept)
    records = lines(jobs.get(f"/v1/jobs/{job['id']}/results", params={"format": "jsonl"}))
    predicted = [json.loads(x) for x in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    keep = ("id", "label", "claim", "predicted_label", "predicted_evidence", "dataset_label", "evidence_read")
    assert [{k: r[k] for k in keep} for r in records] == [{k: p[k] for k in keep} for p in predicted]
    assert {r["index_version"] for r in records} == set(job["index_versions"])  # each result's version
    # the official submission format, scored by garag evaluate --predictions: the same numbers
    fever = jobs.get(f"/v1/jobs/{job['id']}/results", params={"format": "fever"})
    assert fever.headers["content-disposition"] == f'attachment; filename="garag-job-{job["id"]}.fever.jsonl"'
    assert all(set(x) == {"id", "predicted_label", "predicted_evidence"} for x in lines(fever))
    path = tmp_path / "sub" / "submission.jsonl"
    path.parent.mkdir()
    path.write_bytes(fever.content)
    assert main(["evaluate", "--config", config, "--predictions", str(path), "--no-progress"]) == 0
    scored = json.loads((tmp_path / "sub" / "metrics.json").read_text())
    for key in HEADLINE:  # not retrieval@k: the submission format lists 5 sentences, not the ranking
        assert scored[key] == job["metrics"][key], key


def test_a_csv_file_keeps_its_ids_and_downloads_as_csv(jobs):
    text = ('id,claim,label\n7,"The Beatles were formed in Liverpool, England.",SUPPORTS\n'
            'abc,Snowpiercer is a romantic comedy.,REFUTES\n\n,John Lennon was born in 1940.,\n')  # fmt: skip
    job = wait(jobs, upload(jobs, "mine.csv", text.encode(), config="graph", k=2).json()["id"])
    assert (job["state"], job["format"], job["total"], job["labelled"], job["k"]) == ("done", "csv", 3, 2, 2)
    assert job["metrics"]["n"] == 2  # the claims with a gold label
    records = lines(jobs.get(f"/v1/jobs/{job['id']}/results?format=jsonl"))
    assert [r["id"] for r in records] == [7, "abc", 3]  # a plain integer stays one; a missing id: the row
    assert records[0]["claim"] == "The Beatles were formed in Liverpool, England."
    assert all(len(r["evidence_read"]) == 2 for r in records)  # k
    download = jobs.get(f"/v1/jobs/{job['id']}/results?format=csv")
    assert download.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(download.text)))
    assert [r["id"] for r in rows] == ["7", "abc", "3"]
    assert [r["gold_label"] for r in rows] == ["SUPPORTS", "REFUTES", ""]
    assert [r["predicted_label"] for r in rows] == [r["predicted_label"] for r in records]
    assert rows[2]["correct"] == "" and {rows[0]["correct"], rows[1]["correct"]} <= {"true", "false"}


def test_a_hover_file_is_scored_with_hover_labels(jobs):
    hover = [{"id": 1, "claim": "The Beatles were formed in Liverpool.", "label": "SUPPORTED", "num_hops": 2,
              "evidence": [["The_Beatles", 0], ["Liverpool", 0]]},
             {"id": 2, "claim": "Snowpiercer is a romantic comedy.", "label": "NOT_SUPPORTED", "num_hops": 2,
              "evidence": [["Snowpiercer", 0], ["Bong_Joon-ho", 0]]}]  # fmt: skip
    data = "".join(json.dumps(x) + "\n" for x in hover).encode()
    job = wait(jobs, upload(jobs, "hover.jsonl", data).json()["id"])
    assert (job["state"], job["format"]) == ("done", "hover")
    assert (
        set(job["metrics"]["per_class"]) == {"SUPPORTED", "NOT_SUPPORTED"} and "2" in job["metrics"]["groups"]
    )
    page = jobs.get(f"/v1/jobs/{job['id']}/results").json()
    assert {r["dataset_label"] for r in page["results"]} <= {"SUPPORTED", "NOT_SUPPORTED"}
    assert [r["correct"] for r in page["results"]] == [
        r["dataset_label"] == r["gold_label"] for r in page["results"]
    ]


def test_a_json_job_pages_and_filters_its_results(jobs, world):
    base = [json.loads(x) for x in world.claims.read_text().splitlines()]
    claims = [{"id": c["id"], "claim": c["claim"], "label": c["label"]} for c in base] * 1
    claims += ["Paul McCartney was born in Liverpool.", "Liverpool is a city."]
    r = jobs.post("/v1/jobs", json={"claims": claims, "config": "baseline", "name": "mixed"})
    assert r.status_code == 201, r.text
    job = wait(jobs, r.json()["id"])
    assert (job["format"], job["name"], job["total"], job["labelled"]) == ("json", "mixed", 9, 7)
    url = f"/v1/jobs/{job['id']}/results"
    everything = jobs.get(url, params={"page_size": 500}).json()
    assert everything["total"] == 9 and [x["index"] for x in everything["results"]] == list(range(9))
    assert [x["id"] for x in everything["results"][-2:]] == [8, 9]  # positions, from 1
    pages = [jobs.get(url, params={"page_size": 4, "page": p}).json() for p in (1, 2, 3)]
    assert [p["pages"] for p in pages] == [3, 3, 3]
    assert [x["index"] for p in pages for x in p["results"]] == list(range(9))
    by_label = {lab: jobs.get(url, params={"label": lab}).json()["total"] for lab in
                ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")}  # fmt: skip
    assert by_label == {
        lab: sum(x["predicted_label"] == lab for x in everything["results"]) for lab in by_label
    }
    right = jobs.get(url, params={"correct": "true"}).json()["results"]
    wrong = jobs.get(url, params={"correct": "false"}).json()["results"]
    assert (
        len(right) + len(wrong) == 7
        and all(x["correct"] for x in right)
        and not any(x["correct"] for x in wrong)
    )
    assert all(x["gold_label"] == x["dataset_label"] for x in right)
    gold = jobs.get(url, params={"gold": "REFUTES"}).json()
    assert gold["total"] == 2 and {x["gold_label"] for x in gold["results"]} == {"REFUTES"}
    found = jobs.get(url, params={"q": "liverpool"}).json()  # case-insensitive
    assert found["total"] == 4 and all("Liverpool" in x["claim"] for x in found["results"])


def test_progress_streams_as_server_sent_events_until_the_end(jobs, world):
    job = upload(jobs, "many.jsonl", many_claims(world, 1500), config="baseline").json()
    events = []
    with jobs.stream("GET", f"/v1/jobs/{job['id']}/events") as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[6:])))
    kinds = [e for e, _ in events]
    assert kinds[-1] == "end" and set(kinds[:-1]) <= {"progress"}
    done = [d["done"] for _, d in events]
    assert done == sorted(done) and done[-1] == 1500 and events[-1][1]["state"] == "done"
    assert any(0 < d < 1500 for d in done)  # it moved while it ran
    # a finished job's stream says so at once
    with jobs.stream("GET", f"/v1/jobs/{job['id']}/events") as r:
        assert [x for x in r.iter_lines() if x.startswith("event:")] == ["event: end"]


def test_a_stream_closes_after_a_while_for_the_client_to_ask_again(jobs, world, monkeypatch):
    from app.serve import job_routes

    monkeypatch.setattr(job_routes, "SSE_MAX", 0.6)  # (30 s): a stopping server waits for open streams
    job = upload(jobs, "big.jsonl", many_claims(world, 3000), config="baseline").json()
    wait(jobs, job["id"], lambda j: j["done"] > 0)
    with jobs.stream("GET", f"/v1/jobs/{job['id']}/events") as r:
        got = list(r.iter_lines())
    assert got[0] == "retry: 1000" and "event: progress" in got and "event: end" not in got
    jobs.post(f"/v1/jobs/{job['id']}/cancel")
    wait(jobs, job["id"])


def test_cancel_stops_a_job_and_keeps_its_results_so_far(jobs, world):
    job = upload(jobs, "big.jsonl", many_claims(world, 3000), config="baseline").json()
    wait(jobs, job["id"], lambda j: j["done"] > 0)
    r = jobs.post(f"/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert jobs.post(f"/v1/jobs/{job['id']}/cancel").status_code == 200  # twice is no error
    time.sleep(1.5)  # the batch in flight ends
    settled = jobs.get(f"/v1/jobs/{job['id']}").json()
    time.sleep(1.0)
    after = jobs.get(f"/v1/jobs/{job['id']}").json()
    assert after["state"] == "cancelled" and after["done"] == settled["done"] < 3000
    assert after["metrics"] is None and after["eta_seconds"] is None
    kept = lines(jobs.get(f"/v1/jobs/{job['id']}/results?format=fever"))
    assert [x["id"] for x in kept] == list(range(1000, 1000 + after["done"]))
    # the runner goes on to the next job
    nxt = wait(jobs, jobs.post("/v1/jobs", json={"claims": ["Liverpool is a city."]}).json()["id"])
    assert nxt["state"] == "done"
    # resumed, it goes on from the first claim without a result: every claim once
    r = jobs.post(f"/v1/jobs/{job['id']}/resume")
    assert r.status_code == 200 and r.json()["state"] == "queued" and r.json()["done"] == after["done"]
    resumed = wait(jobs, job["id"])
    assert (resumed["state"], resumed["done"], resumed["starts"]) == ("done", 3000, 2)
    assert resumed["metrics"]["n"] == 3000 and resumed["error"] is None
    ids = [x["id"] for x in lines(jobs.get(f"/v1/jobs/{job['id']}/results?format=fever"))]
    assert ids == list(range(1000, 4000))
    r = jobs.post(f"/v1/jobs/{job['id']}/resume")
    assert r.status_code == 409 and r.json()["error"].endswith(
        "is done: only a cancelled or failed job resumes"
    )


def test_requests_are_answered_while_a_job_runs(jobs, world):
    job = upload(jobs, "big.jsonl", many_claims(world, 3000), config="baseline").json()
    wait(jobs, job["id"], lambda j: j["done"] > 0)
    started = time.monotonic()
    r = jobs.post("/v1/verify", json={"claim": "The Beatles were formed in Liverpool.", "config": "baseline"})
    assert r.status_code == 200 and r.json()["label"] in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
    took = time.monotonic() - started
    assert jobs.get(f"/v1/jobs/{job['id']}").json()["state"] == "running", (
        "the job ended first: no interleaving"
    )
    assert took < 30
    jobs.post(f"/v1/jobs/{job['id']}/cancel")
    wait(jobs, job["id"])


def test_list_delete_and_the_state_errors(jobs):
    job = wait(jobs, jobs.post("/v1/jobs", json={"claims": ["Liverpool is a city."]}).json()["id"])
    listed = jobs.get("/v1/jobs").json()["jobs"]
    assert listed[0]["id"] == job["id"]  # newest first
    assert [j["created"] for j in listed] == sorted((j["created"] for j in listed), reverse=True)
    assert all(j["state"] == "done" for j in jobs.get("/v1/jobs", params={"state": "done"}).json()["jobs"])
    r = jobs.post(f"/v1/jobs/{job['id']}/cancel")
    error = f"job {job['id']} is done: there is nothing to cancel"
    assert r.status_code == 409 and r.json() == {"error": error, "status": 409}
    upload_dir = jobs.state / "uploads"
    uploaded = wait(jobs, upload(jobs, "one.csv", b"claim\nLiverpool is a city.\n").json()["id"])
    assert (upload_dir / f"{uploaded['id']}.csv").read_bytes() == b"claim\nLiverpool is a city.\n"  # as sent
    for j in (job, uploaded):
        assert jobs.delete(f"/v1/jobs/{j['id']}").status_code == 204
        assert jobs.get(f"/v1/jobs/{j['id']}").status_code == 404
    assert not (upload_dir / f"{uploaded['id']}.csv").exists()
    db = sqlite3.connect(jobs.state / "jobs.sqlite")
    assert db.execute("SELECT COUNT(*) FROM job_results WHERE job = ?", (job["id"],)).fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM job_items WHERE job = ?", (job["id"],)).fetchone() == (0,)
    running = jobs.post("/v1/jobs", json={"claims": ["Liverpool is a city."] * 3000}).json()
    wait(jobs, running["id"], lambda j: j["done"] > 0)
    r = jobs.delete(f"/v1/jobs/{running['id']}")
    error = f"job {running['id']} is running: cancel it first (POST /v1/jobs/{running['id']}/cancel)"
    assert r.status_code == 409 and r.json()["error"] == error
    jobs.post(f"/v1/jobs/{running['id']}/cancel")
    assert wait(jobs, running["id"])["state"] == "cancelled"
    assert jobs.delete(f"/v1/jobs/{running['id']}").status_code == 204


@pytest.mark.parametrize(
    "path, method",
    [("/v1/jobs/nope", "GET"), ("/v1/jobs/nope/events", "GET"), ("/v1/jobs/nope/results", "GET"),
     ("/v1/jobs/nope/results?format=csv", "GET"), ("/v1/jobs/nope/cancel", "POST"),
     ("/v1/jobs/nope/resume", "POST"),
     ("/v1/jobs/nope", "DELETE")],
)  # fmt: skip
def test_an_unknown_job_is_404_everywhere(jobs, path, method):
    r = jobs.request(method, path)
    assert r.status_code == 404 and r.json() == {"error": "unknown job 'nope'", "status": 404}


ONE = b'{"id": 1, "claim": "A b."}\n'
BAD_FILES = [
    ("c.jsonl", ONE + b'{"id": 2, "claim": \n', {}, "c.jsonl:2: not valid JSON"),
    ("c.jsonl", b'{"id": 1, "claim": "A b.", "label": "T"}\n', {}, "c.jsonl:1: claim 1: unknown label 'T'"),
    ("c.jsonl", ONE + b'{"id": 1, "claim": "C d."}\n', {}, "c.jsonl:2: claim id 1 repeated"),
    ("c.jsonl", ONE + b'\n{"id": 2, "claim": " ?! "}\n', {}, "c.jsonl:3: claim 2 has no words"),
    ("c.jsonl", b'{"id": 1, "text": "A b."}\n', {}, "c.jsonl:1: claim 1: field 'claim' must be a string"),
    ("c.csv", b"text,label\nA b.,SUPPORTS\n", {}, "c.csv:1: no 'claim' column in the header"),
    ("c.csv", b"claim,label\nA b.,SUPPORTS\nC d.,SUPPORTED\n", {}, "c.csv:3: unknown label 'SUPPORTED'"),
    ("c.csv", b"claim,label\nA b.,SUPPORTS\nC d.\n", {}, "c.csv:3: 1 cells, the header has 2"),
    ("c.csv", b"id,claim\n1,A b.\n1,C d.\n", {}, "c.csv:3: claim id 1 repeated (first on line 2)"),
    ("c.csv", b"claim\nA b.\n\xff\xfe\n", {}, "c.csv:3: not UTF-8 text"),
    ("c.csv", b"claim\n", {}, "c.csv: no claim in the file"),
    ("c.jsonl", b"  \n", {}, "c.jsonl: the file is empty"),
    ("c.jsonl", b'{"id": 1, "claim": "A b."}\n', {"config": "nope"}, "config: unknown config 'nope'"),
    ("c.jsonl", b'{"id": 1, "claim": "A b."}\n', {"k": "0"}, "k: '0' is not a whole number from 1 to 20"),
    ("c.jsonl", b'{"id": 1, "claim": "A b."}\n', {"format": "xml"}, "format: 'xml' is not one of"),
    ("c.jsonl", b'{"id": 1, "claim": "A b."}\n', {"name": "n" * 201}, "name: 201 characters, at most 200"),
    ("c.txt", b"claim\nA b.\n", {"format": "fever"}, "c.txt:1: not valid JSON"),
]  # fmt: skip


@pytest.mark.parametrize("name, data, fields, error", BAD_FILES)
def test_a_bad_file_is_one_422_line_naming_its_line(jobs, name, data, fields, error):
    before = len(jobs.get("/v1/jobs").json()["jobs"])
    r = upload(jobs, name, data, **fields)
    assert r.status_code == 422 and set(r.json()) == {"error", "status"}, r.text
    assert r.json()["error"].startswith(error), r.json()["error"]
    assert "Traceback" not in r.text and "/tmp" not in r.text  # the name sent, not where it is kept
    assert len(jobs.get("/v1/jobs").json()["jobs"]) == before
    assert not [p for p in (jobs.state / "uploads").glob("tmp-*")]  # nothing left behind


@pytest.mark.parametrize(
    "body, error",
    [({"claims": []}, "claims: List should have at least 1 item"),
     ({"claims": ["A b."], "bogus": 1}, "bogus: Extra inputs are not permitted"),
     ({"claims": ["A b.", "?!"]}, "claims.1: claim 2 has no words"),
     ({"claims": [{"claim": "A b.", "id": 3}, {"claim": "C d.", "id": 3}]}, "claims.1: claim id 3 repeated"),
     ({"claims": [{"claim": "A b.", "label": "SUPPORTS"}, {"claim": "C d.", "label": "yes"}]},
      "claims.1: unknown label 'yes'"),
     ({"claims": ["A b."], "k": 99}, "k: Input should be less than or equal to 20"),
     ({"claims": ["A b."], "config": "nope"}, "config: unknown config 'nope'")],
)  # fmt: skip
def test_a_bad_json_job_is_one_422_line_naming_its_key(jobs, body, error):
    r = jobs.post("/v1/jobs", json=body)
    assert r.status_code == 422 and r.json()["error"].startswith(error), r.text
    assert set(r.json()) == {"error", "status"}


def test_the_other_request_errors(jobs):
    r = jobs.post("/v1/jobs", content=b"claim\nA b.\n", headers={"content-type": "text/plain"})
    assert r.status_code == 415 and r.json()["error"].startswith("send the claims as multipart/form-data")
    r = jobs.post("/v1/jobs", data={"config": "baseline"}, files={"other": ("x", b"y")})
    assert r.status_code == 422 and r.json()["error"].startswith("file: a claims file is required")
    r = jobs.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"].startswith("body: Invalid JSON")
    job = jobs.post("/v1/jobs", json={"claims": ["Liverpool is a city."]}).json()
    r = jobs.get(f"/v1/jobs/{job['id']}/results", params={"format": "xml"})
    assert r.status_code == 422 and r.json()["error"].startswith("query.format: Input should be")
    r = jobs.get(f"/v1/jobs/{job['id']}/results", params={"label": "TRUE"})
    assert r.status_code == 422 and r.json()["error"].startswith("query.label: Input should be")
    assert jobs.get("/v1/jobs", params={"state": "sleeping"}).status_code == 422
    wait(jobs, job["id"])


def test_job_states_are_a_prometheus_gauge_and_the_paths_are_documented(jobs):
    counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
    for j in jobs.get("/v1/jobs", params={"limit": 1000}).json()["jobs"]:
        counts[j["state"]] += 1
    text = jobs.get("/metrics").text
    for state, n in counts.items():
        assert f'garag_jobs{{state="{state}"}} {float(n)}' in text
    paths = jobs.get("/openapi.json").json()["paths"]
    for p in ("/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/events", "/v1/jobs/{job_id}/cancel",
              "/v1/jobs/{job_id}/resume",
              "/v1/jobs/{job_id}/results"):  # fmt: skip
        assert p in paths
    assert set(paths["/v1/jobs"]["post"]["requestBody"]["content"]) == {
        "application/json",
        "multipart/form-data",
    }


def test_jobs_need_the_api_key_when_one_is_set(keyed_server):
    r = httpx.post(keyed_server.url + "/v1/jobs", json={"claims": ["Liverpool is a city."]})
    assert r.status_code == 401
    assert httpx.get(keyed_server.url + "/v1/jobs").status_code == 401
