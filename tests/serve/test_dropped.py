"""Work nobody waits for is dropped: a request whose client disconnects (a real uvicorn and a real
socket that goes away) or that passes its timeout has its queued claims cancelled, and the real
pipeline never runs them.  The pipeline's ``run`` is wrapped to count the claims it runs and to hold
one batch open, so that the request's claims are still queued when its client leaves."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from app.serve.app import create_app  # noqa: E402

from .conftest import serving  # noqa: E402
from .test_api import LOCAL, with_settings  # noqa: E402

HOLD = "The Beatles were formed in Liverpool."
DROPPED = [
    "Snowpiercer is a romantic comedy.",
    "John Lennon was born in 1940.",
    "Sandra Bullock is an actress.",
]
AFTER = "Liverpool is a city in England."


@contextmanager
def held_pipeline(service) -> Iterator[list[str]]:
    """The baseline pipeline counting the claims it runs (the list yielded), with a batch of HOLD
    running and held until the block ends."""
    served = service.served["baseline"]
    real_run = served.pipe.run
    ran: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def counted(claims, *args, **kwargs):  # the real pipeline, counted; HOLD's batch waits for release
        texts = [c.text for c in claims]
        ran.extend(texts)
        if HOLD in texts:
            entered.set()
            release.wait(60)
        return real_run(claims, *args, **kwargs)

    served.pipe.run = counted
    try:
        holder = service.submit("baseline", [HOLD], None)
        assert entered.wait(60), "the held batch did not start"
        yield ran
        release.set()
        holder[0].result(60)
        assert service.submit("baseline", [AFTER], None)[0].result(60)["claim"] == AFTER
    finally:
        release.set()
        served.pipe.run = real_run


def wait_until(predicate, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


@pytest.mark.parametrize("path", ["/v1/verify/batch", "/v1/verify/passage"])
def test_a_client_that_disconnects_has_its_queued_claims_dropped(service, tmp_path, path):
    import httpx

    body = {"claims": DROPPED} if path.endswith("batch") else {"passage": " ".join(DROPPED)}
    payload = json.dumps(body).encode()
    with serving(with_settings(service, state_dir=tmp_path)) as server, held_pipeline(service) as ran:
        host, port = server.url.removeprefix("http://").split(":")
        sock = socket.create_connection((host, int(port)))
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        wait_until(lambda: service.waiting("baseline") == len(DROPPED))  # queued behind the held batch
        sock.close()  # the client goes away

        def noticed() -> bool:
            text = httpx.get(f"{server.url}/metrics").text
            return bool(
                re.search(rf'garag_requests_total\{{method="POST",path="{path}",status="499"\}} 1', text)
            )

        wait_until(noticed)
        history = httpx.get(f"{server.url}/v1/history").json()
    assert ran == [HOLD, AFTER]  # the three claims of the client that left never ran
    assert history["total"] == 0  # and nothing was kept for them


def test_a_request_past_its_timeout_has_its_queued_claims_dropped(service, tmp_path):
    client = TestClient(create_app(with_settings(service, timeout=0.5, state_dir=tmp_path)), base_url=LOCAL)
    with held_pipeline(service) as ran:
        r = client.post("/v1/verify/batch", json={"claims": DROPPED})
        assert r.status_code == 504 and r.json()["error"] == "no verdict within 0.5 s"
        p = client.post("/v1/verify/passage", json={"passage": " ".join(DROPPED)})
        assert p.status_code == 504
    assert ran == [HOLD, AFTER]


def test_a_client_that_stays_gets_its_verdicts(service, tmp_path):
    """The disconnect check does not drop a request whose client is still there, however long it waits."""
    import httpx

    got: dict = {}
    with serving(with_settings(service, state_dir=tmp_path)) as server, held_pipeline(service) as ran:
        url = f"{server.url}/v1/verify/batch"
        t = threading.Thread(
            target=lambda: got.update(httpx.post(url, json={"claims": DROPPED}, timeout=60).json())
        )
        t.start()
        wait_until(lambda: service.waiting("baseline") == len(DROPPED))
        time.sleep(1.0)  # several disconnect polls pass while the claims wait
    t.join(60)
    assert [r["claim"] for r in got["results"]] == DROPPED
    assert sorted(ran) == sorted([HOLD, *DROPPED, AFTER])
