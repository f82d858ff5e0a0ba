"""The LLM judge (verifier/llm_judge.py, as a component: verifier/judged.py): reply parsing, what it
withholds, and a real model's run.

The semantics tests use ``ScriptedClient``, a fake that returns set replies, so that each reply
shape ("Yes", "No", a cut "No, ...", nonsense, a timeout) is exercised for sure; the last tests
ask the real SmolLM2-135M through llama.cpp and its cache.
"""

from __future__ import annotations

import pytest

from eval.run_hash import run_config_hash
from garag.config import load_config
from garag.config.base import ConfigError
from garag.llm.client import Structured
from garag.types import Evidence, Label, SentenceId, Verdict
from verifier.judged import JudgedVerifier
from verifier.llm_judge import (
    LLM_JUDGE_VERSION,
    LLMJudge,
    answer,
    evidence_lines,
    judge_hash_fields,
    withheld,
)

JOINT = "configs/baseline.yaml+configs/joint.yaml"  # the joint-evidence verifier
EVIDENCE = [
    Evidence(SentenceId("Abbey_Road", 0), "Abbey Road is an album by the Beatles , released in 1969 .", 0.9),
    Evidence(SentenceId("The_Beatles", 0), "The Beatles were an English rock band -LRB- 1960 -RRB- .", 0.8),
]
SCORES = {Label.SUPPORTS: 0.6, Label.REFUTES: 0.3, Label.NOT_ENOUGH_INFO: 0.1}


def _verdict(label: Label = Label.SUPPORTS, scores: dict | None = None) -> Verdict:
    return Verdict(label, f"{label.value}.", (SentenceId("Abbey_Road", 0),), dict(scores or SCORES))


class ScriptedClient:
    """A fake LLMClient: ``chat_text_many`` returns the scripted replies in order and records the
    prompts it was given (a timeout in the script is one the real client's re-ask alone also hit)."""

    def __init__(self, replies: list[Structured[str]]) -> None:
        self.replies = list(replies)
        self.asked: list[list] = []

    def chat_text(self, stage, messages, prompt_sha="", max_tokens=None, max_lines=None):
        raise AssertionError("the judge asks through chat_text_many only")

    def chat_text_many(self, stage, requests, prompt_sha="", max_tokens=None, max_lines=None):
        assert stage == "judge" and prompt_sha and max_lines == 1
        self.asked.extend(requests)
        out, self.replies = self.replies[: len(requests)], self.replies[len(requests) :]
        return out


class FixedVerifier:
    """A fake verifier (stands in for the NLI classifier): the set verdicts, one per claim, in order."""

    name = "fixed"

    def __init__(self, verdicts: list[Verdict]) -> None:
        self.verdicts = list(verdicts)

    def load(self) -> FixedVerifier:
        return self

    def verify(self, claim, evidence) -> Verdict:
        return self.verify_batch([claim], [evidence])[0]

    def verify_batch(self, claims, evidence) -> list[Verdict]:
        out, self.verdicts = self.verdicts[: len(claims)], self.verdicts[len(claims) :]
        return out


def test_answer_reads_the_first_word_in_any_case():
    assert answer("Yes") is True and answer("yes.") is True and answer(" YES, every part") is True
    assert answer("No") is False and answer("no, the evidence says 1969") is False and answer('"No"') is False
    assert answer("Maybe") is None and answer("") is None and answer("Not sure") is None
    assert answer("42") is None


def _needs_langchain() -> None:
    pytest.importorskip(
        "langchain_core", reason="prompt templates need langchain-core (pip install 'garag[llm]')"
    )


def test_the_prompt_shows_each_sentence_read_with_its_title_detokenised():
    _needs_langchain()
    assert evidence_lines(EVIDENCE) == (
        "- Abbey Road: Abbey Road is an album by the Beatles, released in 1969.\n"
        "- The Beatles: The Beatles were an English rock band (1960)."
    )
    client = ScriptedClient([Structured("Yes", "Yes")])
    LLMJudge(client).apply(["Abbey Road is a  Beatles album."], [EVIDENCE], [_verdict()])
    user = client.asked[0][-1].content
    assert "Claim: Abbey Road is a Beatles album." in user and "- Abbey Road: Abbey Road is an album" in user


def test_no_withholds_support_yes_and_unusable_keep_it_and_other_verdicts_are_not_asked():
    _needs_langchain()
    replies = [
        Structured("No", "No"),
        Structured("Yes", "Yes"),
        Structured(None, "No, the evidence", "length"),  # cut at max_tokens: its first word still counts
        Structured("Perhaps", "Perhaps"),
        Structured(None, "", "timeout"),  # timed out in its group and again alone (the client)
        Structured("No", "No"),
    ]
    client = ScriptedClient(replies)
    judge = LLMJudge(client)
    verdicts = [
        _verdict(),
        _verdict(),
        _verdict(Label.REFUTES),
        _verdict(),
        _verdict(),
        _verdict(),
        _verdict(),
    ]
    claims = [f"claim {i}" for i in range(len(verdicts))]
    out = judge.apply(claims, [EVIDENCE] * len(verdicts), verdicts)
    assert len(client.asked) == 6  # the REFUTES verdict is not asked
    assert [v.label for v in out] == [
        Label.REFUTES,  # No: the likelier of REFUTES (0.3) and NEI (0.1)
        Label.SUPPORTS,
        Label.REFUTES,  # not asked
        Label.REFUTES,  # "No, the evidence" cut short
        Label.SUPPORTS,  # unusable: stands
        Label.SUPPORTS,  # timeout: stands
        Label.REFUTES,  # No
    ]
    assert "the model said No" in out[0].explanation
    # the SUPPORTS score moved to the label the No gives: the decision model reads the doubt
    assert out[0].scores == {
        Label.SUPPORTS: 0.0,
        Label.REFUTES: pytest.approx(0.9),
        Label.NOT_ENOUGH_INFO: 0.1,
    }
    assert out[1] == verdicts[1] and out[2] == verdicts[2]
    assert "no usable answer" in out[4].explanation and "no usable answer" in out[5].explanation
    assert judge.counts == {"yes": 1, "no": 3, "unusable": 2}
    # what a saved run's explanation tells of the judge: withheld for a No, not for an unusable answer
    assert [withheld(v.explanation) for v in out] == [True, False, False, True, False, False, True]


def test_the_judged_verifier_asks_about_its_inner_supports_verdicts_only():
    """As a component the judge reads the inner verifier's verdicts: it asks about those called
    SUPPORTS, on the sentences each read, and a No leaves the SUPPORTS score at 0."""
    _needs_langchain()
    lifted = _verdict(
        Label.NOT_ENOUGH_INFO, {Label.SUPPORTS: 0.45, Label.REFUTES: 0.05, Label.NOT_ENOUGH_INFO: 0.5}
    )
    client = ScriptedClient([Structured("No", "No"), Structured("Yes", "Yes")])
    judged = JudgedVerifier(
        FixedVerifier([lifted, _verdict(), _verdict()]), LLMJudge(client), two_way_data=True
    )
    out = judged.verify_batch(["a", "b", "c"], [EVIDENCE] * 3)
    assert len(client.asked) == 2 and out[0] == lifted  # NOT ENOUGH INFO: not asked
    assert (
        out[1].label is Label.REFUTES
        and out[1].scores[Label.SUPPORTS] == 0.0
        and withheld(out[1].explanation)
    )
    assert out[2] == _verdict()
    assert judged.judge.counts == {"yes": 1, "no": 1, "unusable": 0}


def test_the_judge_on_three_way_verdicts_withholds_support_for_the_likelier_other_label():
    _needs_langchain()
    client = ScriptedClient([Structured("No", "No"), Structured("Yes", "Yes")])
    nei_likelier = _verdict(scores={Label.SUPPORTS: 0.5, Label.REFUTES: 0.1, Label.NOT_ENOUGH_INFO: 0.4})
    judged = JudgedVerifier(FixedVerifier([nei_likelier, _verdict()]), LLMJudge(client), two_way_data=False)
    fever = judged.verify_batch(["c", "d"], [EVIDENCE] * 2)
    assert [v.label for v in fever] == [Label.NOT_ENOUGH_INFO, Label.SUPPORTS] and len(client.asked) == 2
    assert "the model said No" in fever[0].explanation
    assert judged.name == "fixed+judge"


def test_another_judge_prompt_names_another_run(monkeypatch):
    import verifier.llm_judge as judge_module

    judged = load_config("configs/baseline.yaml+configs/joint.yaml", ["verifier.llm_judge=two_way"])
    before = run_config_hash(judged, two_way=True)
    real = judge_module.load_prompt

    class _Edited:
        sha256 = "0" * 64

    monkeypatch.setattr(
        judge_module, "load_prompt", lambda name: _Edited() if name == "judge" else real(name)
    )
    assert run_config_hash(judged, two_way=True) != before
    assert run_config_hash(judged, two_way=False) == run_config_hash(
        load_config("configs/baseline.yaml+configs/joint.yaml"), two_way=False
    )


def test_the_judge_names_hover_runs_only_unless_always_and_its_prompt_is_in_the_hash():
    plain = load_config(JOINT)
    judged = load_config(JOINT, ["verifier.llm_judge=two_way"])
    assert run_config_hash(judged, two_way=False) == run_config_hash(plain, two_way=False)
    assert run_config_hash(judged, two_way=True) != run_config_hash(plain, two_way=True)
    fields = judge_hash_fields(judged.verifier.llm_judge)
    assert len(fields["llm_judge_prompt"]) == 64 and fields["llm_judge_version"] == LLM_JUDGE_VERSION
    assert judge_hash_fields(plain.verifier.llm_judge) == {}
    assert not {"llm_judge", "llm_judge_prompt"} & plain.verifier.hash_dump().keys()
    always = load_config(JOINT, ["verifier.llm_judge=always"])
    assert run_config_hash(always, two_way=False) != run_config_hash(plain, two_way=False)  # FEVER too
    assert run_config_hash(always, two_way=True) != run_config_hash(judged, two_way=True)
    assert load_config(overrides=["verifier.llm_judge=off"]).verifier.llm_judge == "never"
    with pytest.raises(ConfigError, match=r"verifier\.llm_judge: say two_way .* or always"):
        load_config(overrides=["verifier.llm_judge=on"])


@pytest.mark.llm
def test_a_real_model_judges_and_a_rerun_asks_nothing(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
    pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'garag[llm]')")
    from garag.config import LLMConfig
    from garag.llm import LLMClient, LLMStats

    config = LLMConfig(model="smollm2-135m", n_ctx=2048, max_tokens=64, timeout_s=60, retries=0)
    claims = ["Abbey Road is a Beatles album.", "Abbey Road was released in 1975.", "The Beatles were Welsh."]
    verdicts = [_verdict(), _verdict(), _verdict(Label.NOT_ENOUGH_INFO)]
    client = LLMClient(config, tmp_path, stats=LLMStats()).load()
    judge = LLMJudge(client)
    said = judge.ask(claims[:2], [EVIDENCE] * 2)
    out = judge.apply(claims, [EVIDENCE] * 3, verdicts)
    for yes, v in zip(said, out[:2], strict=True):  # the verdict follows what the model said
        assert v.label is (Label.REFUTES if yes is False else Label.SUPPORTS)
    assert out[2] == verdicts[2]
    assert sum(judge.counts.values()) == 4  # two asked twice; the NEI verdict never
    calls = client.stats.stage("judge").calls
    again = LLMJudge(LLMClient(config, tmp_path, stats=LLMStats()).load())
    assert again.apply(claims, [EVIDENCE] * 3, verdicts) == out
    assert again.client.stats.stage("judge").calls == 0 and calls >= 1  # every reply came from the cache


class ScriptedProbabilities:
    """A fake LLMClient for the judge's parts mode: ``yes_probability_many`` returns the set
    probability of each claim text asked (and records the claim texts of each call)."""

    def __init__(self, p_yes: dict[str, float]) -> None:
        self.p_yes = p_yes
        self.calls: list[list[str]] = []

    def chat_text_many(self, *args, **kwargs):
        raise AssertionError("the parts mode reads probabilities, not replies")

    def yes_probability_many(self, stage, requests, prompt_sha=""):
        assert stage == "judge" and prompt_sha
        asked = [m[-1].content.split("Claim: ", 1)[1].split("\n", 1)[0] for m in requests]
        self.calls.append(asked)
        return [self.p_yes[c] for c in asked]


def _split(claim: str) -> list[str]:
    return [p.strip() + "." for p in claim.rstrip(".").split(" and ")]


def test_parts_withhold_support_where_the_claim_or_one_part_is_unlikely():
    _needs_langchain()
    p = {
        "A and B.": 0.9,
        "A.": 0.8,
        "B.": 0.2,  # one part below 0.3: withheld
        "C and D.": 0.4,
        "C.": 0.9,
        "D.": 0.9,  # the whole claim below 0.5: withheld
        "E and F.": 0.6,
        "E.": 0.3,
        "F.": 0.35,  # every part at or above 0.3: stands
        "G.": 0.55,  # one fact: asked as a whole only
    }
    client = ScriptedProbabilities(p)
    judge = LLMJudge(client, parts=_split, parts_threshold=0.3)
    claims = ["A and B.", "C and D.", "E and F.", "G.", "H and I."]
    verdicts = [_verdict(), _verdict(), _verdict(), _verdict(), _verdict(Label.NOT_ENOUGH_INFO)]
    out = judge.apply(claims, [EVIDENCE] * 5, verdicts)
    assert [v.label for v in out] == [
        Label.REFUTES,
        Label.REFUTES,
        Label.SUPPORTS,
        Label.SUPPORTS,
        Label.NOT_ENOUGH_INFO,
    ]
    assert 'gave "B." P(Yes) 0.20 < 0.3' in out[0].explanation
    assert "the model gave P(Yes) 0.40 < 0.5" in out[1].explanation
    assert out[2] == verdicts[2] and out[3] == verdicts[3]
    # each claim with its parts in one call (the sentences read once); a claim of one fact alone;
    # the NEI verdict not asked
    assert client.calls == [
        ["A and B.", "A.", "B."],
        ["C and D.", "C.", "D."],
        ["E and F.", "E.", "F."],
        ["G."],
    ]
    assert judge.counts == {"yes": 3, "no": 1, "unusable": 0, "no_part": 1}
    assert [withheld(v.explanation) for v in out] == [True, True, False, False, False]


def test_parts_need_the_judge_and_enter_the_hash_only_when_set():
    plain = load_config(JOINT, ["verifier.llm_judge=two_way"])
    parts = load_config(JOINT, ["verifier.llm_judge=two_way", "verifier.llm_judge_parts=0.3"])
    assert "llm_judge_parts" not in plain.verifier.hash_dump()
    assert run_config_hash(parts, two_way=True) != run_config_hash(plain, two_way=True)
    # on 3-way data a two_way judge is off, and its parts setting with it
    assert run_config_hash(parts, two_way=False) == run_config_hash(plain, two_way=False)
    with pytest.raises(ConfigError, match="llm_judge_parts is set but llm_judge is never"):
        load_config(overrides=["verifier.llm_judge_parts=0.3"])
    with pytest.raises(ConfigError, match="llm_judge_parts"):
        load_config(overrides=["verifier.llm_judge=two_way", "verifier.llm_judge_parts=1"])


@pytest.mark.llm
def test_a_real_model_judges_each_part_from_its_probability_and_a_rerun_reads_nothing(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
    pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'garag[llm]')")
    from garag.config import LLMConfig
    from garag.llm import LLMClient, LLMStats

    config = LLMConfig(model="smollm2-135m", n_ctx=2048, max_tokens=64, timeout_s=60, retries=0)
    claims = ["Abbey Road is a Beatles album and it was released in 1975.", "The Beatles were Welsh."]
    client = LLMClient(config, tmp_path, stats=LLMStats()).load()
    judge = LLMJudge(client, parts=_split, parts_threshold=0.5)
    whole, parts = judge.ask_parts(claims[0], EVIDENCE)
    assert [c for c, _ in parts] == ["Abbey Road is a Beatles album.", "it was released in 1975."]
    out = judge.apply(claims, [EVIDENCE] * 2, [_verdict(), _verdict()])
    withheld = whole < 0.5 or min(p for _, p in parts) < 0.5
    assert out[0].label is (Label.REFUTES if withheld else Label.SUPPORTS)
    assert client.stats.stage("judge").calls == 4  # 3 for the first claim, 1 for the second
    again = LLMJudge(LLMClient(config, tmp_path, stats=LLMStats()).load(), parts=_split, parts_threshold=0.5)
    assert again.apply(claims, [EVIDENCE] * 2, [_verdict(), _verdict()]) == out
    assert again.client.stats.stage("judge").calls == 0  # every probability came from the cache


def test_parts_a_claim_the_model_cannot_read_stands_and_a_backend_without_probabilities_stops():
    _needs_langchain()
    from garag.llm.base import LLMUnavailableError

    class Failing(ScriptedProbabilities):
        """The fake above, failing as the backend does on a prompt past llm.n_ctx, or on any
        prompt of a backend that gives no probabilities."""

        def __init__(self, error: Exception) -> None:
            super().__init__({"A.": 0.9})
            self.error = error

        def yes_probability_many(self, stage, requests, prompt_sha=""):
            if len(requests) > 1:
                raise self.error
            return super().yes_probability_many(stage, requests, prompt_sha)

    judge = LLMJudge(
        Failing(ValueError("a prompt of 5000 tokens does not fit")), parts=_split, parts_threshold=0.3
    )
    out = judge.apply(["A and B.", "A."], [EVIDENCE] * 2, [_verdict(), _verdict()])
    assert [v.label for v in out] == [Label.SUPPORTS, Label.SUPPORTS]
    assert "no usable answer" in out[0].explanation and out[1] == _verdict()
    assert judge.counts == {"yes": 1, "no": 0, "unusable": 1, "no_part": 0}
    judge = LLMJudge(Failing(LLMUnavailableError("no probabilities")), parts=_split, parts_threshold=0.3)
    with pytest.raises(LLMUnavailableError):
        judge.apply(["A and B."], [EVIDENCE], [_verdict()])


def test_parts_act_on_two_way_data_only_fever_keeps_the_greedy_answer():
    _needs_langchain()
    settings = load_config(overrides=["verifier.llm_judge=always", "verifier.llm_judge_parts=0.3"]).verifier

    class Both(ScriptedClient):
        """The greedy-reply fake above that fails if asked for probabilities."""

        def yes_probability_many(self, *args, **kwargs):
            raise AssertionError("FEVER's 3-way verdicts are not judged in parts")

    client = Both([Structured("No", "No")])
    judge = LLMJudge(client, parts=_split, parts_threshold=settings.llm_judge_parts)
    judged = JudgedVerifier(FixedVerifier([_verdict()]), judge, two_way_data=False)
    fever = judged.verify_batch(["A and B."], [EVIDENCE])
    assert fever[0].label is Label.REFUTES and "the model said No" in fever[0].explanation
    always = load_config(JOINT, ["verifier.llm_judge=always"])
    parts = load_config(JOINT, ["verifier.llm_judge=always", "verifier.llm_judge_parts=0.3"])
    assert run_config_hash(parts, two_way=False) == run_config_hash(always, two_way=False)
    assert run_config_hash(parts, two_way=True) != run_config_hash(always, two_way=True)
