"""The LLM path against the real SmolLM2-135M model run in-process by llama.cpp.

Covers a reply that is not JSON (repair or fallback, no crash), an invented evidence id
(flagged and dropped), a timeout (counted, falls back) and a cache hit (no model call).
"""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'garag[llm]')")

from garag.config import LLMConfig  # noqa: E402
from garag.llm import ChatMessage, LLMClient, LLMStats  # noqa: E402
from garag.llm.base import lines_begun  # noqa: E402
from garag.types import Evidence, Label, SentenceId  # noqa: E402
from pipeline.llm_stages import LLMDecomposer, LLMTripletExtractor, Subquestions  # noqa: E402
from prompts import load_prompt  # noqa: E402
from verifier.llm import LLMVerifier, prompt_evidence  # noqa: E402

pytestmark = pytest.mark.llm

EVIDENCE = [
    Evidence(
        SentenceId("Abbey_Road", 0),
        "Abbey Road is the eleventh studio album by the Beatles , released in 1969 .",
        0.9,
    ),
    Evidence(
        SentenceId("The_Beatles", 0),
        "The Beatles were an English rock band formed in Liverpool in 1960 .",
        0.8,
    ),
    Evidence(SentenceId("Liverpool", 0), "Liverpool is a city in North West England .", 0.5),
    Evidence(
        SentenceId("Paul_McCartney", 1), "He gained worldwide fame as co-lead vocalist of the Beatles .", 0.4
    ),
]


def _config(**kw) -> LLMConfig:
    # 300 s: a 64-token reply takes ~2 s alone, but once took over 60 s on 2 cores shared with a
    # training run; the timeout tests set their own (0.001 s)
    base = dict(model="smollm2-135m", n_ctx=2048, max_tokens=64, timeout_s=300, retries=0, concurrency=2)
    return LLMConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    """The real llama.cpp backend over SmolLM2, loaded once for the module."""
    from garag.llm.backends import llama_cpp_chat

    backend = llama_cpp_chat(_config(), tmp_path_factory.mktemp("models"))
    backend.model.load()
    return backend


def _client(chat, tmp_path, **kw) -> LLMClient:
    return LLMClient(_config(**kw), tmp_path, chat=chat, stats=LLMStats()).load()


def test_fingerprint_holds_the_gguf_sha256(chat):
    assert (
        chat.fingerprint.startswith("llama_cpp:smollm2-135m:sha256=")
        and len(chat.fingerprint.split("=")[1]) == 64
    )


def test_reply_that_is_not_json_is_repaired_or_falls_back(chat, tmp_path):
    client = _client(chat, tmp_path, cache=False)
    messages = [
        ChatMessage("system", "You are a poet. Never write JSON, brackets or braces."),
        ChatMessage("user", "Write two lines about the sea."),
    ]
    out = client.chat_json("poem", messages, Subquestions, constrain=False)  # no grammar: free text
    st = client.stats.stage("poem")
    assert st.invalid >= 1 and st.repairs == 1 and st.calls == 2
    assert st.repaired + st.fallbacks == 1
    assert out.ok == out.repaired and (out.ok or out.reason == "invalid")
    # with the schema grammar the reply is JSON from its first character (it may still be cut
    # by max_tokens, which the repair / fallback path handles)
    constrained = client.chat_json("poem-json", messages, Subquestions)
    assert constrained.raw.lstrip().startswith("{")
    st = client.stats.stage("poem-json")
    assert constrained.ok or (st.fallbacks == 1 and constrained.reason == "invalid")


def test_invented_evidence_id_is_flagged_and_dropped(chat, tmp_path):
    # A real prompt file whose few-shot turns always cite "[42]" and whose user turn does not show the
    # evidence: every id the model cites is invented.
    (tmp_path / "verdict.yaml").write_text(
        "name: verdict\nversion: 1\n"
        "system: 'Answer with JSON. Always cite the evidence id [42] in the explanation and evidence.'\n"
        "examples:\n"
        + "".join(
            f"  - user: 'Claim: {c}'\n"
            '    assistant: \'{"label": "SUPPORTS", "explanation": "As [42] says.", "evidence": ["[42]"]}\'\n'
            for c in ("A is B.", "C won D.", "E was born in 1900.")
        )
        + 'user: "Claim: {claim}"\n'
    )
    client = _client(chat, tmp_path, cache=False)
    verifier = LLMVerifier(client, prompt=load_prompt("verdict", tmp_path)).load()
    items = prompt_evidence(EVIDENCE)
    out = verifier.verify_detailed("Abbey Road was released in 1969.", items)
    assert not out.fallback
    assert out.flagged and not out.cited
    assert not any(ref in out.verdict.explanation for ref in out.flagged)
    assert client.stats.stage("verdict").invalid_citations == len(out.flagged)
    given = {e.sentence for e in EVIDENCE}
    assert set(out.verdict.evidence) <= given and 1 <= len(out.verdict.evidence) <= 5


def test_timeout_is_counted_and_falls_back(chat, tmp_path):
    fallback = LLMVerifier(_client(chat, tmp_path / "ok", cache=False), max_evidence=2)
    slow = _client(chat, tmp_path / "slow", timeout_s=0.001, cache=False)
    out = (
        LLMVerifier(slow, fallback=fallback)
        .load()
        .verify_detailed("Abbey Road was released in 1969.", EVIDENCE)
    )
    st = slow.stats.stage("verdict")
    assert st.timeouts == 1 and st.fallbacks == 1 and st.verifier_fallbacks == 1 and st.calls == 1
    assert out.fallback and out.reason == "timeout"
    assert isinstance(out.verdict.label, Label) and out.verdict.explanation.startswith(
        "[LLM verdict unavailable (timeout)"
    )
    assert fallback.client.stats.stage("verdict").requests == 1  # the fallback verifier really ran
    # without a fallback verifier: NOT ENOUGH INFO with the ranked evidence, no crash
    alone = LLMVerifier(slow).verify_detailed("Abbey Road was released in 1969.", EVIDENCE)
    assert alone.verdict.label is Label.NOT_ENOUGH_INFO and alone.verdict.evidence[0] == EVIDENCE[0].sentence


def test_cache_hit_makes_no_call(chat, tmp_path):
    claim = "Paul McCartney was a member of the Beatles."
    first = _client(chat, tmp_path)
    q1 = LLMDecomposer(first, max_questions=3).decompose(claim)
    calls = first.stats.stage("decompose").calls
    assert calls >= 1
    assert len(q1) <= 3 and all(q.endswith("?") and q.strip() == q for q in q1)
    assert len({q.casefold() for q in q1}) == len(q1)
    q2 = LLMDecomposer(first, max_questions=3).decompose(claim)
    st = first.stats.stage("decompose")
    assert q2 == q1 and st.calls == calls and st.cache_hits == 1
    first.close()
    # a new client over the same cache file (a second run) makes no call either
    second = _client(chat, tmp_path)
    assert LLMDecomposer(second, max_questions=3).decompose(claim) == q1
    assert second.stats.stage("decompose").calls == 0 and second.stats.stage("decompose").cache_hits >= 1
    # a different seed is a different key: the model is called
    third = _client(chat, tmp_path, seed=99)
    LLMDecomposer(third, max_questions=3).decompose(claim)
    assert third.stats.stage("decompose").calls >= 1


def test_triplets_batched_in_parallel(chat, tmp_path):
    client = _client(chat, tmp_path, cache=False, triplet_batch=2, max_tokens=96)
    triplets = LLMTripletExtractor(client).extract(EVIDENCE[:3])
    st = client.stats.stage("triplets")
    assert st.requests == 2  # 3 sentences, 2 per call
    given = {e.sentence for e in EVIDENCE[:3]}
    assert all(t.source in given and t.extractor == "llm" and t.subject and t.object for t in triplets)


@pytest.mark.parametrize("prompt", ["program", "program_json"])
def test_llm_programmer_gives_a_valid_program_or_the_counted_rule_fallback(chat, tmp_path, prompt):
    """SmolLM2 writes a program as step lines (the default prompt) or schema-constrained JSON; whatever
    it writes, the result is a usable program."""
    from pipeline.decompose import RuleDecomposer
    from pipeline.llm_stages import LLMProgrammer
    from pipeline.programs import RuleProgrammer

    rule = RuleProgrammer(RuleDecomposer().load().subclaims, max_steps=4)
    client = _client(chat, tmp_path, max_tokens=160)
    programmer = LLMProgrammer(client, rule, max_steps=4, prompt=load_prompt(prompt))
    claim = "Dum Dum Motijheel College is located in Kolkata, the capital of West Bengal."
    program = programmer.program(claim)
    assert sum(programmer.counts.values()) == 1
    assert program.source in ("llm", "rule-fallback") and any(s.kind == "verify" for s in program.steps)
    if program.source == "rule-fallback":
        assert programmer.counts == {"fallback": 1} and program.notes
    assert client.stats.stage("program").calls == 1
    # a rerun is served from the cache: the same program, no model call
    again = LLMProgrammer(client, rule, max_steps=4, prompt=load_prompt(prompt)).program(claim)
    assert again.steps == program.steps and client.stats.stage("program").calls == 1
    # a model that cannot answer in time gives the rule program, counted
    slow_client = _client(chat, tmp_path / "slow", timeout_s=0.001, cache=False)
    slow = LLMProgrammer(slow_client, rule, max_steps=4, prompt=load_prompt(prompt))
    fallback = slow.program(claim)
    assert fallback.source == "rule-fallback" and slow.counts == {"fallback": 1}
    assert [s.text for s in fallback.steps] == [s.text for s in rule.program(claim).steps]


def test_a_reply_cut_at_its_token_budget_is_a_counted_fallback(chat, tmp_path):
    """A per-call token budget (the program stage's ``reasoning.program_tokens``): a reply cut there
    cannot be told from a whole one, so it is the fallback marker; budgets are cached apart."""
    client = _client(chat, tmp_path)
    msgs = [ChatMessage("user", "What is the capital of France? Reply with one word.")]
    cut = client.chat_text("program", msgs, max_tokens=1)
    assert cut.value is None and cut.reason == "length" and cut.raw
    st = client.stats.stage("program")
    assert st.fallbacks == 1 and st.completion_tokens == 1 and st.calls == 1
    whole = client.chat_text("program", msgs, max_tokens=48)
    assert whole.value is not None and client.stats.stage("program").calls == 2  # another cache key
    assert whole.value.startswith(cut.raw)  # greedy decoding: the cut reply is the whole one's start
    again = client.chat_text("program", msgs, max_tokens=1)  # from the cache, and still cut
    assert again.reason == "length" and client.stats.stage("program").calls == 2


def test_a_reply_past_its_line_limit_stops_there_and_is_a_counted_fallback(chat, tmp_path):
    """A per-call line limit (the program stage's ``accept_steps``): generation stops at the first
    line too many, the reply is the fallback marker (reason "lines"), a cut reply is cached under its
    limit and a reply within it under the whole reply's key."""
    client = _client(chat, tmp_path)
    msgs = [ChatMessage("user", "Name three colours, one a line.")]
    cut = client.chat_text("program", msgs, max_tokens=48, max_lines=1)
    assert cut.value is None and cut.reason == "lines" and lines_begun(cut.raw) == 2
    st = client.stats.stage("program")
    assert st.fallbacks == 1 and st.calls == 1
    cut_tokens = st.completion_tokens
    whole = client.chat_text("program", msgs, max_tokens=48)
    assert (
        whole.value is not None and lines_begun(whole.value) > 2 and client.stats.stage("program").calls == 2
    )
    assert whole.value.startswith(cut.raw)  # greedy decoding: the cut reply is the whole one's start
    assert client.stats.stage("program").completion_tokens - cut_tokens > cut_tokens  # it stopped early
    again = client.chat_text("program", msgs, max_tokens=48, max_lines=1)  # cached, still cut
    assert again.reason == "lines" and client.stats.stage("program").calls == 2
    roomy = client.chat_text("program", msgs, max_tokens=48, max_lines=8)  # the whole reply's key
    assert roomy.value == whole.value and client.stats.stage("program").calls == 2
    # a reply within its limit is the whole reply: asked for without a limit, it comes from the cache
    fresh = _client(chat, tmp_path / "fresh")
    assert fresh.chat_text("program", msgs, max_tokens=48, max_lines=8).value == whole.value
    assert fresh.chat_text("program", msgs, max_tokens=48).value == whole.value
    assert fresh.stats.stage("program").calls == 1
