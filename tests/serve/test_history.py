"""The verification history with the real app, the real pipelines and a real SQLite file: every
/v1/verify, /v1/verify/batch and passage claim is kept with its config and corpus version; the list
searches, filters and pages; one entry, JSONL and CSV exports, deletes, every error, --no-history."""

from __future__ import annotations

import csv
import io
import json

import pytest

from .conftest import XSS_CLAIM

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from app.serve import passage_models as pm  # noqa: E402
from app.serve.app import create_app  # noqa: E402

from .test_api import LOCAL, with_settings  # noqa: E402

ONE = "The Beatles were formed in Liverpool."
FORMULA = '=HYPERLINK("http://example.com/x", "Liverpool") was formed in 1960.'  # CSV injection
BATCH = ["Snowpiercer is a romantic comedy.", XSS_CLAIM]
PASSAGE = "John Lennon was born in 1940. I liked him. Sandra Bullock was never a producer."


@pytest.fixture(scope="module")
def filled(service, tmp_path_factory):
    """An app with its own history, after one verify, one batch and one passage; and what they gave."""
    state = tmp_path_factory.mktemp("history")
    client = TestClient(create_app(with_settings(service, state_dir=state)), base_url=LOCAL)
    one = client.post("/v1/verify", json={"claim": ONE, "config": "graph"}).json()
    batch = client.post("/v1/verify/batch", json={"claims": BATCH, "config": "baseline", "k": 2}).json()
    passage = client.post("/v1/verify/passage", json={"passage": PASSAGE, "config": "baseline"}).json()
    assert len(passage["claims"]) == 2
    return client, state, [one, *batch["results"], *(c["result"] for c in passage["claims"])]


def test_every_verification_is_kept_newest_first_with_config_and_corpus_version(filled, service):
    client, _, responses = filled
    page = client.get("/v1/history").json()
    pm.HistoryPage.model_validate(page)
    assert page["total"] == 5 and page["pages"] == 1 and page["configs"] == ["baseline", "graph"]
    items = page["items"][::-1]  # oldest first, as they were made
    assert [i["claim"] for i in items] == [r["claim"] for r in responses]
    assert [i["source"] for i in items] == ["verify", "batch", "batch", "passage", "passage"]
    assert [i["config"] for i in items] == ["graph", "baseline", "baseline", "baseline", "baseline"]
    assert [i["k"] for i in items] == [None, 2, 2, None, None]
    assert [i["label"] for i in items] == [r["label"] for r in responses]
    assert all(i["scores"] == r["scores"] for i, r in zip(items, responses, strict=True))
    assert {i["index_version"] for i in items} == {service.index_version("baseline")}
    assert items[1]["request"] == items[2]["request"] != items[0]["request"]  # one batch, one request id
    assert items[0]["created"].endswith("Z") and items[0]["created"] <= items[4]["created"]
    for item, response in zip(items, responses, strict=True):
        entry = client.get(f"/v1/history/{item['id']}").json()
        assert entry["response"] == response  # the whole response, as it was answered
        pm.HistoryEntry.model_validate(entry)


@pytest.mark.parametrize(
    ("params", "claims"),
    [
        ({"q": "liverpool"}, [XSS_CLAIM, ONE]),  # newest first
        ({"q": "SNOWPIERCER IS"}, [BATCH[0]]),
        ({"q": "<script>"}, [XSS_CLAIM]),
        ({"q": "%"}, []),  # a LIKE wildcard is a character like any other
        ({"q": "_"}, [XSS_CLAIM]),  # "window.__xss", not any one character
        ({"config": "graph"}, [ONE]),
        ({"source": "passage"}, ["Sandra Bullock was never a producer.", "John Lennon was born in 1940."]),
        ({"config": "nope"}, []),
    ],
)
def test_the_list_searches_and_filters(filled, params, claims):
    client, _, _ = filled
    got = client.get("/v1/history", params=params).json()
    assert [i["claim"] for i in got["items"]] == claims and got["total"] == len(claims)


def test_label_filter_and_pages(filled):
    client, _, responses = filled
    for label in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"):
        got = client.get("/v1/history", params={"label": label}).json()
        assert got["total"] == sum(r["label"] == label for r in responses)
    pages = [client.get("/v1/history", params={"page_size": 2, "page": p}).json() for p in (1, 2, 3)]
    assert [p["pages"] for p in pages] == [3, 3, 3] and [len(p["items"]) for p in pages] == [2, 2, 1]
    everything = client.get("/v1/history").json()["items"]
    assert [i["id"] for p in pages for i in p["items"]] == [i["id"] for i in everything]


def test_jsonl_export_has_every_whole_response(filled):
    client, _, responses = filled
    r = client.get("/v1/history/export", params={"format": "jsonl"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    assert r.headers["content-disposition"].startswith('attachment; filename="garag-history-')
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert [x["response"] for x in lines] == responses
    graph = client.get("/v1/history/export", params={"config": "graph"}).text.splitlines()
    assert [json.loads(x)["claim"] for x in graph] == [ONE]


def test_csv_export_round_trips_claims_with_quotes_and_markup(filled):
    client, _, responses = filled
    r = client.get("/v1/history/export", params={"format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [x["claim"] for x in rows] == [x["claim"] for x in responses]  # XSS_CLAIM's quotes too
    for row, resp in zip(rows, responses, strict=True):
        assert row["label"] == resp["label"]
        assert float(row["score_SUPPORTS"]) == resp["scores"]["SUPPORTS"]
        cited = [f"{e['page']} ({e['line']})" for e in resp["evidence"] if e["cited"]]
        assert row["cited"] == "; ".join(cited)


def test_a_claim_a_spreadsheet_would_compute_exports_as_text(service, tmp_path):
    client = TestClient(create_app(with_settings(service, state_dir=tmp_path)), base_url=LOCAL)
    assert client.post("/v1/verify", json={"claim": FORMULA, "config": "baseline"}).status_code == 200
    rows = list(csv.DictReader(io.StringIO(client.get("/v1/history/export?format=csv").text)))
    assert [r["claim"] for r in rows] == ["'" + FORMULA]
    kept = json.loads(client.get("/v1/history/export?format=jsonl").text)
    assert kept["claim"] == kept["response"]["claim"] == FORMULA  # the JSONL keeps it as written


def test_history_survives_a_restart_and_entries_delete(filled, service):
    _, state, _ = filled
    again = TestClient(create_app(with_settings(service, state_dir=state)), base_url=LOCAL)
    items = again.get("/v1/history").json()["items"]
    assert len(items) == 5  # a new app over the same state directory
    first = items[-1]["id"]
    assert again.delete(f"/v1/history/{first}").json() == {"deleted": 1}
    assert again.get(f"/v1/history/{first}").status_code == 404
    assert again.delete(f"/v1/history/{first}").status_code == 404
    assert again.get("/v1/history").json()["total"] == 4
    refused = again.delete("/v1/history")
    assert refused.status_code == 422 and refused.json()["error"].startswith("query.all: set all=true")
    assert again.delete("/v1/history", params={"all": "true"}).json() == {"deleted": 4}
    assert again.get("/v1/history").json()["total"] == 0


@pytest.mark.parametrize(
    ("method", "path", "status", "where"),
    [
        ("get", "/v1/history/abc", 422, "path.entry"),
        ("get", "/v1/history/987654", 404, "no history entry 987654"),
        ("get", "/v1/history?label=MAYBE", 422, "query.label"),
        ("get", "/v1/history?source=cli", 422, "query.source"),
        ("get", "/v1/history?page=0", 422, "query.page"),
        ("get", "/v1/history?page_size=1000", 422, "query.page_size"),
        ("get", "/v1/history?q=" + "x" * 201, 422, "query.q"),
        ("get", "/v1/history/export?format=xml", 422, "query.format"),
        ("delete", "/v1/history/abc", 422, "path.entry"),
        ("delete", "/v1/history?all=maybe", 422, "query.all"),
    ],
)
def test_history_errors_are_json_naming_the_key(filled, method, path, status, where):
    client, _, _ = filled
    r = client.request(method.upper(), path)
    assert r.status_code == status
    assert r.json()["status"] == status and r.json()["error"].startswith(where) and "Traceback" not in r.text


def test_no_history_keeps_nothing(service, tmp_path):
    client = TestClient(create_app(with_settings(service, state_dir=tmp_path, history=False)), base_url=LOCAL)
    assert client.post("/v1/verify", json={"claim": ONE}).status_code == 200
    body = client.post("/v1/verify/passage", json={"passage": PASSAGE}).json()
    assert [c["history_id"] for c in body["claims"]] == [None, None]
    for path in ("/v1/history", "/v1/history/1", "/v1/history/export"):
        r = client.get(path)
        assert r.status_code == 404 and r.json()["error"] == "history is off (garag serve --no-history)"
    assert not (tmp_path / "history.sqlite").exists()


def test_the_serve_command_has_a_no_history_flag():
    from app.cli import build_parser

    assert build_parser().parse_args(["serve", "--no-history"]).no_history is True
    assert build_parser().parse_args(["serve"]).no_history is False


def test_history_needs_the_key_when_one_is_set(service, tmp_path):
    keyed = TestClient(
        create_app(with_settings(service, api_key="s3cret", state_dir=tmp_path)), base_url=LOCAL
    )
    for path in ("/v1/history", "/v1/history/export"):
        assert keyed.get(path).status_code == 401
        assert keyed.get(path, headers={"X-API-Key": "s3cret"}).status_code == 200


def test_an_app_that_verifies_nothing_writes_nothing(service, tmp_path):
    state = tmp_path / "state"
    client = TestClient(create_app(with_settings(service, state_dir=state)), base_url=LOCAL)
    assert client.get("/v1/configs").status_code == 200 and not state.exists()
    assert client.post("/v1/verify", json={"claim": ONE}).status_code == 200
    assert (state / "history.sqlite").is_file()
