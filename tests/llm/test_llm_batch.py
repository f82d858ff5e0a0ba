"""Batched greedy decoding (garag.llm.llama_batch) on the real SmolLM2-135M model in-process."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'garag[llm]')")

from garag.config import LLMConfig  # noqa: E402
from garag.llm import ChatMessage, LLMClient, LLMStats  # noqa: E402
from garag.llm.base import lines_begun  # noqa: E402
from garag.llm.llama_batch import BatchDecoder  # noqa: E402

pytestmark = pytest.mark.llm

SYSTEM = "You answer in short lines."
QUESTIONS = [
    "Name three colours, one a line.",
    "What is the capital of France?",
    "Name two planets, one a line.",
    "Who wrote Hamlet?",
    "Count from one to five in words, one a line.",
]


def _chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def _config(**kw) -> LLMConfig:
    base = dict(model="smollm2-135m", n_ctx=2048, max_tokens=40, timeout_s=60, retries=0, batch=4)
    return LLMConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """The real llama.cpp backend over SmolLM2 with batch 4, loaded once for the module."""
    from garag.llm.backends import llama_cpp_chat

    chat = llama_cpp_chat(_config(), tmp_path_factory.mktemp("models"))
    chat.model.load()
    return chat


def test_a_chat_decoded_alone_is_create_chat_completions_greedy_reply(backend):
    llama = backend.model._llama
    llama.reset()  # both read the first prompt whole (how a prompt is split into reads changes rounding)
    alone = BatchDecoder(llama, 1, 2048, 2)
    try:
        for q in QUESTIONS[:3]:
            want = llama.create_chat_completion(messages=_chat(q), temperature=0, max_tokens=40)
            got = alone.generate([_chat(q)], 40)[0]
            assert got.text == want["choices"][0]["message"]["content"]
            assert got.prompt_tokens == want["usage"]["prompt_tokens"]
            assert got.completion_tokens == want["usage"]["completion_tokens"]
    finally:
        alone.close()


def test_batched_replies_come_in_order_within_their_limits(backend):
    llama = backend.model._llama
    replies = backend.model.generate_many([_chat(q) for q in QUESTIONS], max_tokens=24, max_lines=2)
    assert len(replies) == len(QUESTIONS)  # 5 chats: a group of 4, then one
    for q, r in zip(QUESTIONS, replies, strict=True):
        prompt = BatchDecoder.tokens(backend.model._batched, _chat(q))[0]
        assert r.prompt_tokens == len(prompt)
        assert r.finish in ("stop", "length", "lines") and 0 < r.completion_tokens <= 24
        if r.finish == "lines":
            assert lines_begun(r.text) == 3  # stopped at the first line past 2
        else:
            assert lines_begun(r.text) <= 2
        if r.finish == "length":
            assert r.completion_tokens == 24
    assert {r.finish for r in replies} >= {"lines"}  # the list questions ran past 2 lines
    # the same chats decoded alone: the batched replies part from them, if at all, only where the
    # batched product rounds differently, so nearly all agree on their whole first line
    alone = BatchDecoder(llama, 1, 2048, 2)
    try:
        ones = [alone.generate([_chat(q)], 24, max_lines=2)[0] for q in QUESTIONS]
    finally:
        alone.close()
    agree = [o.text.splitlines()[:1] == r.text.splitlines()[:1] for o, r in zip(ones, replies, strict=True)]
    assert sum(agree) >= 4, [(o.text, r.text) for o, r in zip(ones, replies, strict=True)]


def test_a_failed_decode_leaves_the_decoder_usable(backend, monkeypatch):
    decoder = BatchDecoder(backend.model._llama, 2, 2048, 2)
    try:
        chats = [_chat(q) for q in QUESTIONS[:2]]
        before = decoder.generate(chats, 16)
        real = decoder._decode
        calls = {"n": 0}

        def failing(entries):  # a fake failure of llama_decode, mid-prompt
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("llama_decode returned -1")
            return real(entries)

        monkeypatch.setattr(decoder, "_decode", failing)
        with pytest.raises(RuntimeError, match="llama_decode"):
            decoder.generate([_chat(QUESTIONS[2]), _chat(QUESTIONS[3])], 16)
        assert decoder._held == []  # the cache was cleared, nothing stale is trusted
        assert calls["n"] == 1
        # from a cleared cache the same chats are read the same way: the same replies
        assert decoder.generate(chats, 16) == before
    finally:
        decoder.close()


def test_a_group_past_its_deadline_times_out_and_a_prompt_too_long_is_refused(backend):
    replies = backend.model.generate_many([_chat(q) for q in QUESTIONS[:2]], max_tokens=24, timeout_s=0.0)
    assert [r.finish for r in replies] == ["timeout", "timeout"]
    tiny = BatchDecoder(backend.model._llama, 2, 64, 2)
    try:
        with pytest.raises(ValueError, match="do not fit llm.n_ctx 64"):
            tiny.generate([_chat(QUESTIONS[0])], 40)
    finally:
        tiny.close()


def test_client_decodes_what_its_cache_lacks_together(backend, tmp_path):
    client = LLMClient(_config(), tmp_path, chat=backend, stats=LLMStats()).load()
    msgs = [[ChatMessage("system", SYSTEM), ChatMessage("user", q)] for q in QUESTIONS]
    first = client.chat_text("t", msgs[1], max_tokens=24, max_lines=2)  # one asked alone first
    many = client.chat_text_many("t", msgs, max_tokens=24, max_lines=2)
    st = client.stats.stage("t")
    assert st.requests == 6 and st.calls == 5 and st.cache_hits == 1
    assert many[1] == first
    cut = [m for m in many if m.reason == "lines"]
    assert cut and all(m.value is None and lines_begun(m.raw) == 3 for m in cut)
    assert all(m.value is not None or m.reason in ("lines", "length") for m in many)
    again = client.chat_text_many("t", msgs, max_tokens=24, max_lines=2)  # all from the cache
    assert again == many and client.stats.stage("t").calls == 5
    # a reply within its limit was cached as the whole reply: asked for without a limit, no call
    whole = [i for i, m in enumerate(many) if m.value is not None]
    assert whole and client.chat_text("t", msgs[whole[0]], max_tokens=24).value == many[whole[0]].value
    assert client.stats.stage("t").calls == 5


class _GroupDeadlineZero:
    """The real backend, except that a batched group gets no time at all (its deadline 0 s): a
    stand-in for a slow machine where a group of long prompts outruns ``llm.timeout_s``
    together; prompts asked alone get the configured timeout."""

    def __init__(self, real):
        self.real = real
        self.groups = 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def complete_many(self, requests, timeout_s, max_tokens=None, max_lines=None):
        self.groups += 1
        return self.real.complete_many(requests, 0.0, max_tokens, max_lines)


def test_prompts_a_group_deadline_cut_off_are_asked_again_alone(backend, tmp_path):
    slow = _GroupDeadlineZero(backend)
    client = LLMClient(_config(), tmp_path / "a", chat=slow, stats=LLMStats()).load()
    msgs = [[ChatMessage("system", SYSTEM), ChatMessage("user", q)] for q in QUESTIONS[1:4]]
    got = client.chat_text_many("t", msgs, max_tokens=40)
    assert slow.groups == 1  # one group of 3, every reply cut off by its deadline
    st = client.stats.stage("t")
    assert st.timeouts == 3 and st.requests == 3 and st.calls == 6  # 3 in the group, then 3 alone
    # each prompt got a reply of its own, not a timeout's empty fallback (exact text is not
    # compared with another client's: how llama.cpp's cache splits a prompt changes rounding)
    assert all(g.reason != "timeout" and g.raw.strip() for g in got) and any(g.value for g in got)
    assert st.fallbacks == sum(g.value is None for g in got)  # only replies cut at max_tokens
    # the replies asked again alone were cached: a second ask makes no call
    assert client.chat_text_many("t", msgs, max_tokens=40) == got and client.stats.stage("t").calls == 6


def test_batching_is_off_for_sampling_and_for_batch_1(tmp_path):
    from garag.llm.backends import llama_cpp_chat

    assert not llama_cpp_chat(_config(temperature=0.7), tmp_path).batches
    assert not llama_cpp_chat(_config(batch=1), tmp_path).batches
    assert llama_cpp_chat(_config(), tmp_path).batches


YES_NO = [
    "Is Paris the capital of France? Answer Yes or No.",
    "Is Paris the capital of Spain? Answer Yes or No.",
    "Is two more than one? Answer Yes or No.",
]


def _p_yes(logits: list[float]) -> float:
    import math

    return 1 / (1 + math.exp(logits[1] - logits[0]))


def test_first_token_logits_read_together_are_those_of_each_prompt_read_alone(backend):
    import numpy as np
    from llama_cpp import llama_get_logits_ith

    llama = backend.model._llama
    ids = [llama.tokenize(w.encode(), add_bos=False)[0] for w in ("Yes", "No")]
    chats = [_chat(q) for q in YES_NO]
    together = backend.model.first_token_logits(chats, ["Yes", "No"])  # one group: batch 4
    for chat, got in zip(chats, together, strict=True):
        # llama.cpp's own Llama reading the prompt alone
        llama.reset()
        llama.eval(BatchDecoder.tokens(backend.model._batched, chat)[0])
        row = np.ctypeslib.as_array(llama_get_logits_ith(llama.ctx, -1), shape=(llama.n_vocab(),))
        want = [float(row[i]) for i in ids]
        # a batched product rounds differently: P(Yes) moves by up to 0.023 here (SmolLM2)
        assert _p_yes(got) == pytest.approx(_p_yes(want), abs=0.05)


def test_client_yes_probability_is_the_softmax_over_yes_and_no_words_and_is_cached(backend, tmp_path):
    import math

    client = LLMClient(_config(), tmp_path, chat=backend, stats=LLMStats()).load()
    msgs = [[ChatMessage("system", SYSTEM), ChatMessage("user", q)] for q in YES_NO]
    got = client.yes_probability_many("judge", msgs, "sha")
    logits = backend.model.first_token_logits(
        [[m.to_json() for m in ms] for ms in msgs], ["Yes", "yes", "No", "no"]
    )
    for p, row in zip(got, logits, strict=True):
        e = [math.exp(x - max(row)) for x in row]
        assert 0 < p < 1 and p == pytest.approx((e[0] + e[1]) / sum(e), abs=0.02)
    assert client.stats.stage("judge").calls == 3
    again = client.yes_probability_many("judge", msgs, "sha")
    st = client.stats.stage("judge")
    assert again == got and st.calls == 3 and st.cache_hits == 3  # read from the cache, no model call
    # a reply's cache key is not a probability's: the same prompt asked for text is a miss
    client.chat_text("judge", msgs[0], "sha", max_tokens=1)
    assert client.stats.stage("judge").calls == 4


def test_yes_probability_needs_the_in_process_backend(tmp_path):
    from garag.llm.backends import LangChainChat
    from garag.llm.base import LLMUnavailableError

    class TextOnly:  # a named fake: a LangChain chat model that returns text only (as ChatOpenAI)
        def invoke(self, messages, **kwargs):
            raise AssertionError("not asked for text")

    chat = LangChainChat(TextOnly(), "openai", "text-only", lambda schema, timeout_s: {})
    client = LLMClient(_config(), tmp_path, chat=chat, stats=LLMStats()).load()
    with pytest.raises(LLMUnavailableError, match="llm.backend openai: reading the reply's first-token"):
        client.yes_probability_many("judge", [[ChatMessage("user", "Yes?")]], "sha")
    assert client.stats.stage("judge").errors == 1
