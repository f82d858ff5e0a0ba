"""Verifier components by name (verifier/registry.py) in real pipelines on the tiny fixtures.

A component registered here is named by a config and decides what it reads; unknown names are
refused in one line; the mix and the LLM verifier come out of the registry; the LLM judge wraps
whatever the config names and asks about what the 2-way threshold and the entity check leave
SUPPORTED, as when it ran after them.  The judge's chat model is a fake (``ScriptedJudgeClient``,
like tests/llm/test_llm_judge.py's), so that which claims it doubts is set; everything else is real:
BM25 over the fixture corpus and a tiny classifier trained on the fixture premises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from garag.config import Config, ConfigError, load_config
from garag.llm import LLMStats
from garag.llm.client import Structured
from garag.types import Evidence, Label, SentenceId, Verdict
from pipeline.verification import VerificationPipeline, hits_to_evidence
from verifier.base import read_evidence
from verifier.judged import JudgedVerifier
from verifier.llm import LLMVerifier
from verifier.llm_judge import SAID_NO
from verifier.mixed import MixedVerifier
from verifier.nli import NLIVerifier
from verifier.registry import VerifierContext, available, build_verifier, register_verifier


def _config(
    tiny_corpus: Path, claims: Path, cache: Path, model: str = "", extra: Sequence[str] = ()
) -> Config:
    return load_config(overrides=[
        "data.dataset=custom", f"data.claims={claims}", f"data.corpus={tiny_corpus}",
        f"paths.cache_dir={cache}", "retrieval.retrievers=[bm25]", "retrieval.k=20", "fusion.depth=20",
        "verifier.top_k=3", "verifier.mode=concat", "verifier.max_length=64", "verifier.nei_bias=0.0",
        f"verifier.model={model}", *extra,
    ])  # fmt: skip


@pytest.fixture(scope="module")
def trained(
    tiny_corpus: Path, tiny_claims: Path, train_on_fixture_premises, tmp_path_factory
) -> tuple[Path, str]:
    """The cache (BM25 index built) and the tiny classifier trained on the fixture premises."""
    cache = tmp_path_factory.mktemp("cache")
    pipe = VerificationPipeline(_config(tiny_corpus, tiny_claims, cache), progress=False)
    pipe.retrieval.build()
    return cache, str(train_on_fixture_premises(pipe, tmp_path_factory.mktemp("model"), epochs=40))


def _no_llm():
    raise AssertionError("no component here asks for the LLM client")


class ScriptedJudgeClient:
    """A fake LLMClient for the judge: answers No about every claim naming ``doubted``, Yes about
    the rest, and records the claims it was asked about."""

    def __init__(self, doubted: str) -> None:
        self.doubted = doubted
        self.asked: list[str] = []
        self.stats = LLMStats()

    def load(self) -> ScriptedJudgeClient:
        return self

    def chat_text_many(self, stage, requests, prompt_sha="", max_tokens=None, max_lines=None):
        assert stage == "judge" and prompt_sha
        claims = [m[-1].content.split("Claim: ", 1)[1].split("\n", 1)[0] for m in requests]
        self.asked.extend(claims)
        return [Structured("No", "No") if self.doubted in c else Structured("Yes", "Yes") for c in claims]


class WordOverlapVerifier:
    """A component of this test's own: SUPPORTS where every word of the claim is in the two best
    sentences, else NOT ENOUGH INFO.  It reads (sentence id, lower-cased text) pairs, not Evidence."""

    name = "word-overlap"

    def __init__(self, ctx: VerifierContext) -> None:
        self.ctx = ctx
        self.loaded = False

    def load(self) -> WordOverlapVerifier:
        self.loaded = True
        return self

    def inputs(self, evidence: Sequence[Evidence], ranking, top_k: int):
        shown = list(evidence[:2])
        return shown, [(e.sentence, e.text.lower()) for e in shown]

    def verify(self, claim: str, evidence: Sequence[tuple[SentenceId, str]]) -> Verdict:
        read = {w for _, text in evidence for w in re.findall(r"\w+", text)}
        label = Label.SUPPORTS if set(re.findall(r"\w+", claim.lower())) <= read else Label.NOT_ENOUGH_INFO
        return Verdict(label, f"{label.value}: the words read.", tuple(s for s, _ in evidence), {label: 1.0})

    def verify_batch(self, claims, evidence) -> list[Verdict]:
        return [self.verify(c, ev) for c, ev in zip(claims, evidence, strict=True)]


def _overlap(claim: str, evidence: Sequence[Evidence]) -> Label:
    read = {w for e in evidence for w in re.findall(r"\w+", e.text.lower())}
    return Label.SUPPORTS if set(re.findall(r"\w+", claim.lower())) <= read else Label.NOT_ENOUGH_INFO


def test_a_registered_component_is_named_by_a_config_and_decides_what_it_reads(
    trained, tiny_corpus: Path, tiny_claims: Path
):
    cache, model = trained
    with pytest.raises(ConfigError, match=r"^pipeline\.verifier: unknown verifier .* got 'word-overlap'$"):
        _config(tiny_corpus, tiny_claims, cache, model, ["pipeline.verifier=word-overlap"])
    register_verifier("word-overlap", WordOverlapVerifier)
    assert {"nli", "llm", "word-overlap"} <= set(available())
    config = _config(tiny_corpus, tiny_claims, cache, model, ["pipeline.verifier=word-overlap"])
    pipe = VerificationPipeline(config, progress=False).build()
    component = pipe.verifier
    assert isinstance(component, WordOverlapVerifier) and component.loaded
    assert component.ctx.config is config and component.ctx.model_path == model
    assert component.ctx.two_way_data is False and component.ctx.mix_model_path == ""
    assert pipe.llm_client is None  # nothing asked for one: no LLM is made
    claims = list(pipe.dataset.claims())
    results = pipe.run(claims)
    for r in results:
        best = hits_to_evidence(r.retrieval.fused, pipe.store, config.verifier.top_k)
        assert list(r.evidence) == best[:2]  # its own reading, not verifier.top_k's three
        assert r.verdict.label is _overlap(r.claim.text, r.evidence)
        assert r.verdict.evidence == tuple(e.sentence for e in r.evidence)
    assert {r.verdict.label for r in results} == {Label.SUPPORTS, Label.NOT_ENOUGH_INFO}

    # the judge wraps it like any component, and it still reads its own way
    judged = _config(
        tiny_corpus,
        tiny_claims,
        cache,
        model,
        ["pipeline.verifier=word-overlap", "verifier.llm_judge=always"],
    )
    pipe = VerificationPipeline(judged, progress=False)
    pipe.llm_client = client = ScriptedJudgeClient(doubted="Beatles")
    pipe.build()
    assert isinstance(pipe.verifier, JudgedVerifier) and isinstance(pipe.verifier.inner, WordOverlapVerifier)
    again = pipe.run(claims)
    assert client.asked == [r.claim.text for r in results if r.verdict.label is Label.SUPPORTS]
    for a, b in zip(results, again, strict=True):
        assert b.evidence == a.evidence
        doubted = a.verdict.label is Label.SUPPORTS and "Beatles" in a.claim.text
        assert b.verdict.label is (Label.NOT_ENOUGH_INFO if doubted else a.verdict.label)


def test_unknown_names_are_refused_in_one_line_and_garags_own_are_taken():
    one_line = r"pipeline\.verifier: unknown verifier \(known: nli, llm[^)\n]*\), got 'nope'"
    with pytest.raises(ConfigError) as refused:
        load_config(overrides=["pipeline.verifier=nope"])
    assert re.fullmatch(one_line, str(refused.value))
    ctx = VerifierContext(load_config(), "", "", _no_llm, two_way_data=False)
    with pytest.raises(ConfigError) as refused:  # a name no config check saw (a Config built in code)
        build_verifier("nope", ctx)
    assert re.fullmatch(one_line, str(refused.value))
    with pytest.raises(ValueError, match="'nli' is one of garag's own"):
        register_verifier("nli", WordOverlapVerifier)
    with pytest.raises(ValueError, match="use letters, digits"):
        register_verifier("my verifier", WordOverlapVerifier)


def test_the_mix_and_the_llm_verifier_come_out_of_the_registry(trained, tiny_corpus: Path, tiny_claims: Path):
    cache, model = trained
    plain = _config(tiny_corpus, tiny_claims, cache, model)
    single = build_verifier("nli", VerifierContext(plain, model, "", _no_llm, two_way_data=False))
    assert isinstance(single, NLIVerifier) and single.model_path == model
    mixed = _config(
        tiny_corpus, tiny_claims, cache, model, ["verifier.mix_weight=0.3", f"verifier.mix_model={model}"]
    )
    mix = build_verifier("nli", VerifierContext(mixed, model, model, _no_llm, two_way_data=False))
    assert isinstance(mix, MixedVerifier) and mix.weight == 0.3
    assert [v.model_path for v in (mix.first, mix.second)] == [model, model]
    assert mix.first.config is mixed.verifier and mix.second.config.mix_weight == 0.0
    claim = "The Beatles were formed in Liverpool."
    ev = [Evidence(SentenceId("The_Beatles", 0), "The Beatles were formed in Liverpool in 1960 .", 1.0)]
    assert "two verifiers mixed 0.70 / 0.30" in mix.verify(claim, ev).explanation

    class ChatModel:
        """A fake LLM client: only which object the LLM verifier holds is checked (nothing is asked)."""

        def load(self) -> ChatModel:
            return self

    chat = ChatModel()
    llm_config = _config(
        tiny_corpus, tiny_claims, cache, model,
        ["verifier.mix_weight=0.3", f"verifier.mix_model={model}", "linearize.max_facts=4",
         "linearize.triplets_per_fact=1"],
    )  # fmt: skip
    llm = build_verifier("llm", VerifierContext(llm_config, model, model, lambda: chat, two_way_data=False))
    assert isinstance(llm, LLMVerifier) and llm.client is chat and isinstance(llm.fallback, MixedVerifier)

    # what each reads of six ranked sentences: the NLI verifier verifier.top_k (3) as they are, the
    # LLM verifier linearize.max_facts (4) numbered for its prompt, with the graph's triplet lines
    ranked = [Evidence(SentenceId("Page", i), f"Sentence {i} .", 1.0 - i / 10) for i in range(6)]

    class Ranking:
        """Stands in for the graph ranking: two triplet lines for the best sentence."""

        def triplet_lines(self, per_fact: int = 3) -> dict[SentenceId, list[str]]:
            return {
                ranked[0].sentence: ["Page | has | sentence 0 (0.90)", "Page | is | a page (0.50)"][:per_fact]
            }

    assert read_evidence(single, ranked, Ranking(), 3) == (ranked[:3], ranked[:3])
    shown, given = read_evidence(llm, ranked, Ranking(), 3)
    assert shown == ranked[:4] and [p.ref for p in given] == ["[1]", "[2]", "[3]", "[4]"]
    assert given[0].triplets == ("Page | has | sentence 0 (0.90)",) and given[1].triplets == ()
    assert [p.to_evidence() for p in given] == shown
    assert read_evidence(llm, ranked, None, 3)[1][0].triplets == ()


def test_the_judge_wraps_the_verifier_and_asks_about_its_supports_verdicts(
    trained, tiny_corpus: Path, tiny_claims: Path, tmp_path: Path, as_hover
):
    """On HoVer the judge is a component around the NLI verifier: it is asked about the verdicts the
    verifier calls SUPPORTED and no other, and where it says No the verdict is withheld with its
    SUPPORTS score at 0; every other verdict is the verifier's own."""
    cache, model = trained
    fever = VerificationPipeline(_config(tiny_corpus, tiny_claims, cache, model), progress=False)
    # one more claim names a city no page names
    unread = {"id": 7, "claim": "The Beatles were formed in Manchester.", "label": "NOT_SUPPORTED"}
    hover = as_hover(
        list(fever.dataset.claims()),
        tmp_path / "hover.jsonl",
        ({**unread, "evidence": [["The_Beatles", 0]]},),
    )
    on_hover = ["data.claim_format=hover"]
    plain = VerificationPipeline(_config(tiny_corpus, hover, cache, model, on_hover), progress=False).build()
    assert isinstance(plain.verifier, NLIVerifier) and plain.llm_judge is None
    claims = list(plain.dataset.claims())
    before = plain.run(claims)
    pipe = VerificationPipeline(
        _config(tiny_corpus, hover, cache, model, [*on_hover, "verifier.llm_judge=two_way"]), progress=False
    )
    pipe.llm_client = client = ScriptedJudgeClient(doubted="Beatles")
    pipe.build()
    assert isinstance(pipe.verifier, JudgedVerifier) and isinstance(pipe.verifier.inner, NLIVerifier)
    assert pipe.verifier.judge is pipe.llm_judge
    after = pipe.run(claims)
    left = [r.claim.text for r in before if r.verdict.label is Label.SUPPORTS]
    assert client.asked == left and any("Beatles" in c for c in left)
    for a, b in zip(before, after, strict=True):
        if a.verdict.label is Label.SUPPORTS and "Beatles" in a.claim.text:
            assert b.verdict.label is not Label.SUPPORTS and b.verdict.explanation.endswith(SAID_NO)
            assert b.verdict.scores[Label.SUPPORTS] == 0.0
            assert b.verdict.explanation.startswith(a.verdict.explanation)
        else:
            assert b.verdict == a.verdict
    doubted = sum("Beatles" in c for c in left)
    assert pipe.llm_judge.counts == {"yes": len(left) - doubted, "no": doubted, "unusable": 0}
