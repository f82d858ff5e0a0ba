"""The OpenAI-compatible backend (langchain-openai ChatOpenAI with base_url) against a real
llama.cpp server (``python -m llama_cpp.server``) serving SmolLM2 on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
pytest.importorskip("langchain_openai", reason="langchain-openai is not installed (pip install 'garag[llm]')")
pytest.importorskip("uvicorn", reason="llama.cpp's server extra is not installed (llama-cpp-python[server])")
pytest.importorskip("fastapi", reason="llama.cpp's server extra is not installed (llama-cpp-python[server])")
pytest.importorskip(
    "sse_starlette", reason="llama.cpp's server extra is not installed (llama-cpp-python[server])"
)

from app.serve.launch import free_port  # noqa: E402
from garag.config import LLMConfig  # noqa: E402
from garag.llm import ChatMessage, LLMClient, LLMStats  # noqa: E402
from garag.llm.base import lines_begun  # noqa: E402
from garag.llm.models import smollm2_file  # noqa: E402
from pipeline.llm_stages import LLMDecomposer  # noqa: E402

pytestmark = pytest.mark.llm

STARTUP_S = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A llama.cpp OpenAI-compatible server on loopback; stopped after the module."""
    port = free_port()
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_file().path)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--model_alias", "smollm2"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + STARTUP_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within {STARTUP_S}s; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _client(url: str, tmp_path, **kw) -> LLMClient:
    cfg = dict(backend="openai", model="smollm2", base_url=url, api_key_env="GARAG_TEST_NO_KEY")
    cfg.update(response_format="json_object", max_tokens=96, timeout_s=60, retries=0)
    cfg.update(kw)
    return LLMClient(LLMConfig(**cfg), tmp_path, stats=LLMStats()).load()


def test_openai_backend_structured_reply_and_cache(server, tmp_path):
    client = _client(server, tmp_path)
    assert client.fingerprint == f"openai:{server}:smollm2"
    claim = "The Beatles, who formed in Liverpool, released Abbey Road."
    qs = LLMDecomposer(client, max_questions=3).decompose(claim)
    st = client.stats.stage("decompose")
    assert st.calls >= 1 and st.prompt_tokens > 0 and st.completion_tokens > 0
    assert st.fallbacks == 0  # the server applied the schema grammar: a valid reply
    assert len(qs) <= 3 and all(q.endswith("?") for q in qs)
    # second time: served from the cache, no HTTP call
    assert LLMDecomposer(client, max_questions=3).decompose(claim) == qs
    assert client.stats.stage("decompose").calls == st.calls


def test_openai_backend_unreachable_server_falls_back(tmp_path):
    client = _client(f"http://127.0.0.1:{free_port()}/v1", tmp_path, retries=1, backoff_s=0.01, cache=False)
    qs = LLMDecomposer(client, max_questions=3).decompose("Abbey Road was released in 1969.")
    st = client.stats.stage("decompose")
    assert qs == [] and st.errors == 2 and st.retries == 1 and st.fallbacks == 1


def test_openai_backend_timeout_is_counted(server, tmp_path):
    client = _client(server, tmp_path, timeout_s=0.001, cache=False)
    out = LLMDecomposer(client, max_questions=3).decompose("Paul McCartney was a member of the Beatles.")
    st = client.stats.stage("decompose")
    assert out == [] and st.timeouts == 1 and st.fallbacks == 1
    assert json.dumps(client.metadata()["stats"]["total"])  # run metadata is JSON-serialisable


def test_openai_backend_stops_reading_at_the_line_limit(server, tmp_path):
    """Over HTTP the reply is streamed and the stream closed at the first line too many."""
    client = _client(server, tmp_path)
    msgs = [ChatMessage("user", "Name three colours, one a line.")]
    cut = client.chat_text("program", msgs, max_tokens=48, max_lines=1)
    assert cut.value is None and cut.reason == "lines" and lines_begun(cut.raw) == 2
    cut_tokens = client.stats.stage("program").completion_tokens
    whole = client.chat_text("program", msgs, max_tokens=48)
    assert lines_begun(whole.raw) > 2  # whole, or cut at max_tokens (the server's greedy replies may differ)
    assert client.stats.stage("program").completion_tokens - cut_tokens > cut_tokens
    assert client.stats.stage("program").calls == 2
