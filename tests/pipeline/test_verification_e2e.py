"""End to end on the tiny fixtures: retrieval -> premise -> a real tiny trained classifier -> scores.

The classifier is trained in the test on the very premises the pipeline builds for the fixture
claims, so a correct pipeline must reproduce every gold label; the FEVER score must then equal
the share of claims whose gold evidence set is among the five predicted sentences.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from eval.fever_score import FeverPrediction, score_claims
from eval.verification_eval import records_from_file, run_predictions, score_records
from garag.config import Config, load_config
from garag.types import Label, SentenceId
from pipeline.programs import parse_step_lines
from pipeline.verification import VerificationPipeline, hits_to_evidence


def _config(tiny_corpus: Path, tiny_claims: Path, cache: Path, model: str = "", extra=()) -> Config:
    return load_config(overrides=[*extra,
        "data.dataset=custom", f"data.claims={tiny_claims}", f"data.corpus={tiny_corpus}",
        f"paths.cache_dir={cache}", "retrieval.retrievers=[bm25, dense, pages]", "retrieval.k=20",
        "fusion.depth=20", "verifier.top_k=3", "verifier.mode=concat", "verifier.max_length=64",
        "verifier.nei_bias=0.0", f"verifier.model={model}",
    ])  # fmt: skip


@pytest.fixture(scope="module")
def run(tiny_corpus: Path, tiny_claims: Path, train_on_fixture_premises, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    config = _config(tiny_corpus, tiny_claims, cache)
    pipe = VerificationPipeline(config, progress=False)
    pipe.retrieval.build()
    claims = list(pipe.dataset.claims())
    model_dir = train_on_fixture_premises(pipe, tmp_path_factory.mktemp("model"), epochs=40)
    config = _config(tiny_corpus, tiny_claims, cache, str(model_dir))
    pipe = VerificationPipeline(config, progress=False).build()
    run_dir = tmp_path_factory.mktemp("run")
    outcome = run_predictions(config, run_dir, pipeline=pipe, progress=False, batch_size=4)
    return config, pipe, claims, outcome, run_dir


def test_pipeline_reproduces_the_labels_it_learned(run):
    config, pipe, claims, outcome, _ = run
    records = records_from_file(outcome.predictions)
    assert outcome.written == len(claims) == 6 and outcome.resumed == 0
    assert [r["id"] for r in records] == [c.id for c in claims]
    assert [r["predicted_label"] for r in records] == [c.label for c in claims]
    for r in records:
        assert 1 <= len(r["predicted_evidence"]) <= 5
        assert sum(r["scores"].values()) == pytest.approx(1.0, abs=1e-4)
        cited = r["predicted_evidence"][0]
        assert f"({cited[0]}, {cited[1]})" in r["explanation"]


def test_scores_follow_the_official_definition(run):
    config, pipe, claims, outcome, _ = run
    records = records_from_file(outcome.predictions)
    metrics = score_records(pipe.dataset, records)
    preds = [
        FeverPrediction(r["predicted_label"], tuple(SentenceId(p, n) for p, n in r["predicted_evidence"]))
        for r in records
    ]
    expected = score_claims(claims, preds)
    assert metrics["label_accuracy"] == 1.0
    found = [any(set(g) <= set(p.evidence) for g in c.evidence) for c, p in zip(claims, preds, strict=True)]
    assert metrics["fever_score"] == pytest.approx(expected.strict)
    assert expected.strict == pytest.approx(
        sum(f or not c.verifiable for f, c in zip(found, claims, strict=True)) / 6
    )
    assert metrics["confusion"]["matrix"][0][0] == 3  # three SUPPORTS claims, all right


def test_killed_run_resumes_to_the_same_file(run, tmp_path: Path):
    config, pipe, claims, outcome, _ = run
    full = outcome.predictions.read_text(encoding="utf-8")
    lines = full.splitlines(keepends=True)
    partial = tmp_path / "predictions.jsonl"
    partial.write_text("".join(lines[:2]) + lines[2][:15], encoding="utf-8")  # killed mid-write
    resumed = run_predictions(config, tmp_path, pipeline=pipe, progress=False, batch_size=4)
    assert resumed.resumed == 2 and resumed.written == 4
    strip = [json.loads(x) for x in partial.read_text(encoding="utf-8").splitlines()]
    again = [json.loads(x) for x in full.splitlines()]
    for a, b in zip(strip, again, strict=True):
        a.pop("seconds"), b.pop("seconds")
        assert a == b


def test_run_with_other_settings_is_refused(run, tmp_path: Path):
    config, pipe, claims, outcome, run_dir = run
    other = load_config(
        overrides=[
            f"data.{k}={v}"
            for k, v in (
                ("dataset", "custom"),
                ("claims", config.data.claims),
                ("corpus", config.data.corpus),
            )
        ]
        + [
            f"paths.cache_dir={config.paths.cache_dir}",
            "verifier.top_k=2",
            f"verifier.model={config.verifier.model}",
            "verifier.max_length=64",
        ]
    )
    with pytest.raises(ValueError, match="other settings"):
        run_predictions(other, run_dir, pipeline=pipe, progress=False)


def test_oracle_reads_the_gold_evidence(run, tmp_path: Path):
    config, pipe, claims, _, _ = run
    outcome = run_predictions(config, tmp_path, pipeline=pipe, oracle=True, progress=False)
    records = {r["id"]: r for r in records_from_file(outcome.predictions)}
    two_page = records[2]
    assert two_page["evidence_read"] == [["The_Beatles", 0], ["Liverpool", 0]]
    nei = records[5]
    assert nei["evidence_read"]  # NEI claims keep retrieved evidence


def test_graph_mode_reranks_the_pool_over_the_fact_graph(run, tiny_corpus: Path, tiny_claims: Path):
    config, pipe, claims, _, _ = run
    extra = ("pipeline.mode=graph", "decomposition.method=rule", "pipeline.evidence_pool=8")
    graph_cfg = _config(tiny_corpus, tiny_claims, Path(config.paths.cache_dir), config.verifier.model, extra)
    gpipe = VerificationPipeline(graph_cfg, progress=False).build()
    results = gpipe.run(claims)
    assert any(r.subquestions for r in results)  # the fixtures have conjunction claims
    for r in results:
        pool = hits_to_evidence(r.retrieval.fused, gpipe.store, 8)
        assert r.graph is not None and len(r.graph.facts) == len(pool)
        # the verifier read the graph's top-3, a re-ranking of the retrieved pool
        assert [e.sentence for e in r.evidence] == [f.sentence for f in r.graph.facts[:3]]
        assert {f.sentence for f in r.graph.facts} == {e.sentence for e in pool}
        scores = [f.score for f in r.graph.facts]
        assert scores == sorted(scores, reverse=True)
        assert {"decomposition", "retrieval", "triplets", "graph", "verification"} <= set(r.seconds)
        assert any(f.triplets for f in r.graph.facts)
        assert r.verdict.label in Label


class FixedProgrammer:
    """A fake programmer (stands in for the LLM one): each claim's program is written here."""

    def __init__(self, programs: dict[str, str]) -> None:
        self.written = {claim: parse_step_lines(text) for claim, text in programs.items()}

    def programs(self, claims: list[str]):
        return [self.written[c] for c in claims]


@pytest.mark.parametrize("answer_from", ["title", "entity"])
def test_question_answers_fill_their_own_programs_slots_in_batched_rounds(run, monkeypatch, answer_from):
    """Programs with bridging questions in one batch: each round's questions are retrieved in one
    call, each answer (the best sentence's page title the question does not name) fills only its
    own program's later slots, and the batch gives what each claim gives alone."""
    from pipeline.reasoning import EntityAnswerer, run_programs, title_answer

    _, pipe, claims, _, _ = run
    beatles, lennon = claims[0], claims[5]
    programmer = FixedProgrammer({
        beatles.text: "Question: Which city were The Beatles formed in?\n"
                      "Question: Which country is {answer_1} in?\n"
                      "Verify: The Beatles were formed in {answer_2}.",
        lennon.text: "Question: Which band did John Lennon belong to?\n"
                     "Verify: {answer_1} were formed in Liverpool.",
    })  # fmt: skip
    batch = [beatles, lennon]
    first = pipe.run(batch)  # the whole claims' verdicts, before any program
    verdicts, evidence = [r.verdict for r in first], [r.evidence for r in first]
    monkeypatch.setattr(pipe, "programmer", programmer)
    monkeypatch.setattr(pipe.config.reasoning, "answer_from", answer_from)
    entity = EntityAnswerer(pipe.config.decomposition.spacy_model, pipe.store.has_page)

    def answer(question: str, evidence) -> str | None:
        return (
            entity.answers([question], [evidence])[0]
            if answer_from == "entity"
            else title_answer(question, evidence)
        )

    calls: list[list[str]] = []
    step_evidence = pipe.step_evidence

    def counted(texts):
        calls.append(list(texts))
        return step_evidence(texts)

    monkeypatch.setattr(pipe, "step_evidence", counted)
    _, records, own, checked = run_programs(pipe, batch, verdicts, evidence)
    # with combine: and, the entity check reads the claim's evidence and every Verify step's, once each
    for record, mine, seen in zip(records, own, checked, strict=True):
        ids = [e.sentence.to_json() for e in seen]
        steps_read = [x for step in record["steps"] if step["kind"] == "verify" for x in step["read"]]
        assert len(ids) == len(set(map(tuple, ids)))
        assert ids[: len(mine)] == [e.sentence.to_json() for e in mine]
        assert steps_read and set(map(tuple, ids)) == set(map(tuple, ids[: len(mine)] + steps_read))
    # round 1: both first questions together; round 2: the Beatles' second question; then the Verify steps
    assert calls[0] == ["Which city were The Beatles formed in?", "Which band did John Lennon belong to?"]
    (a1, a2, v1), (b1, w1) = records[0]["steps"], records[1]["steps"]
    for q in (a1, a2, b1):
        assert q["answer"] == answer(q["text"], step_evidence([q["text"]])[0])
    assert a1["answer"] and b1["answer"]
    assert a2["text"] == f"Which country is {a1['answer']} in?" and calls[1] == [a2["text"]]
    assert v1["text"] == f"The Beatles were formed in {a2['answer'] or '{answer_2}'}."
    assert w1["text"] == f"{b1['answer']} were formed in Liverpool."
    assert calls[2] == [v1["text"], w1["text"]] and len(calls) == 3
    alone = [
        run_programs(pipe, [c], [v], [e])[1][0] for c, v, e in zip(batch, verdicts, evidence, strict=True)
    ]
    assert alone == records
    # with combine: union the explanation shows the steps as run: answers, and slots filled
    monkeypatch.setattr(pipe.config.reasoning, "combine", "union")
    union, _, read, checked = run_programs(pipe, batch, verdicts, evidence)
    assert checked == read
    assert f"answer_1: {a1['text']!r} -> {a1['answer']}" in union[0].explanation
    assert f"fact_1: {w1['text']!r}" in union[1].explanation and "{answer_1}" not in union[1].explanation
    if answer_from == "entity":  # the city the first question asks for (the title answer: "John Lennon")
        assert a1["answer"] == "Liverpool"


def test_the_decision_models_label_is_final_on_every_path(
    run, tiny_corpus: Path, tmp_path: Path, monkeypatch, as_hover
):
    """A decision model fitted beside the verifier (here on the fixture claims themselves) decides
    every label: what the pipeline returns and what ``predict`` writes are the decider's verdicts,
    on 3-way and on 2-way data, with reasoning programs too; nothing after it changes them."""
    import shutil

    from pipeline.decompose import RuleDecomposer
    from verifier.decision import (
        FEATURES,
        Decider,
        DecisionCase,
        DecisionFeatures,
        fit_decision,
        read_decision,
    )

    config, _, claims, _, _ = run
    cache = Path(config.paths.cache_dir)
    model_dir = tmp_path / "model"
    shutil.copytree(config.verifier.model, model_dir)
    own = VerificationPipeline(
        _config(
            tiny_corpus, Path(config.data.claims), cache, str(model_dir), ("verifier.decision=verifier",)
        ),
        progress=False,
    ).build()
    assert own.decider is None
    results = own.run(claims)
    parts = RuleDecomposer(config.decomposition).load().subclaims
    cases = [DecisionCase(r.claim.text, r.evidence, r.verdict, tuple(parts(r.claim.text))) for r in results]
    features, notes = DecisionFeatures(own.verifier.score_sentences, config.decomposition.spacy_model, 3)(
        cases
    )
    assert features.shape == (len(claims), len(FEATURES)) and np.isfinite(features).all()
    # claim 3 ("Sandra Bullock was never a producer.") is negated: its positive form was read
    assert notes[2]["positive_form"] == "Sandra Bullock was a producer."
    fit_decision(features, [Label(c.label) for c in claims], top_k=3, l2=1.0).save(model_dir)
    assert read_decision(model_dir) is not None

    decided: list = []
    original = Decider.decide

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN202 - records what the decider returned
        out = original(self, *args, **kwargs)
        decided.extend(out)
        return out

    monkeypatch.setattr(Decider, "decide", spy)
    hover = as_hover(claims, tmp_path / "hover.jsonl")
    for claims_file, extra in (
        (Path(config.data.claims), ("verifier.decision=learned",)),
        (Path(config.data.claims), ("verifier.decision=learned", "reasoning.programs=rule")),
        (hover, ("verifier.decision=learned", "data.claim_format=hover")),
    ):
        decided.clear()
        cfg = _config(tiny_corpus, claims_file, cache, str(model_dir), extra)
        pipe = VerificationPipeline(cfg, progress=False).build()
        assert pipe.decider is not None
        got = pipe.run(list(pipe.dataset.claims()))
        assert [r.verdict for r in got] == decided
        assert all("Decision: " in v.explanation for v in decided)
        decided.clear()
        outcome = run_predictions(cfg, tmp_path / f"run-{len(extra)}-{claims_file.stem}", pipeline=pipe,
                                  progress=False, batch_size=4)  # fmt: skip
        written = [r["predicted_label"] for r in records_from_file(outcome.predictions)]
        assert written == [v.label.value for v in decided]


def test_a_mixed_verifier_runs_in_the_pipeline_and_names_its_second_model(
    run, tiny_corpus, tiny_claims, tmp_path
):
    from verifier.mixed import MixedVerifier

    config, _, claims, _, _ = run
    model = config.verifier.model
    extra = ["verifier.mix_weight=0.5", f"verifier.mix_model={model}"]
    mixed = _config(tiny_corpus, tiny_claims, Path(config.paths.cache_dir), model, extra)
    pipe = VerificationPipeline(mixed, progress=False).build()
    assert isinstance(pipe.verifier, MixedVerifier) and pipe.mix_model_path == model
    out = run_predictions(mixed, tmp_path / "mixed", pipeline=pipe, progress=False, batch_size=4)
    records = records_from_file(out.predictions)
    # the model mixed with itself: the same labels, the mix stated in every explanation with evidence
    assert [r["predicted_label"] for r in records] == [c.label for c in claims]
    assert all(
        "two verifiers mixed 0.50 / 0.50" in r["explanation"] for r in records if r["predicted_evidence"]
    )
    identity = json.loads((tmp_path / "mixed" / "run.json").read_text(encoding="utf-8"))
    assert identity["mix_model"] == model and identity["mix_model_files"] == identity["model_files"]


@pytest.mark.llm
def test_the_llm_judge_runs_in_the_pipeline_where_its_setting_applies(
    run, tiny_corpus, tiny_claims, tmp_path, as_hover
):
    """The LLM judge with the real SmolLM2-135M: ``two_way`` builds it for HoVer's 2-way labels only,
    ``always`` for FEVER's 3-way ones too; it is asked about every SUPPORTS verdict (on HoVer the
    threshold 0 and no entity check leave all of them SUPPORTS), and a run's outcome counts its
    answers."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'garag[llm]')")
    pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'garag[llm]')")
    config, _, claims, _, _ = run
    cache, model = Path(config.paths.cache_dir), config.verifier.model
    llm = ["llm.model=smollm2-135m", "llm.n_ctx=2048"]
    extra = ["verifier.llm_judge=two_way", *llm]
    fever = VerificationPipeline(
        _config(tiny_corpus, tiny_claims, cache, model, extra), progress=False
    ).build()
    assert fever.llm_judge is None and fever.llm_client is None  # 3-way data: no model is even loaded
    plain = _config(tiny_corpus, tiny_claims, cache, model, [])
    unjudged = records_from_file(run_predictions(plain, tmp_path / "plain", progress=False).predictions)
    supports = sum(r["predicted_label"] == "SUPPORTS" for r in unjudged)
    assert supports >= 1
    always = _config(tiny_corpus, tiny_claims, cache, model, ["verifier.llm_judge=always", *llm])
    pipe = VerificationPipeline(always, progress=False).build()
    assert pipe.llm_judge is not None  # "always": FEVER's 3-way verdicts are judged too
    outcome = run_predictions(always, tmp_path / "fever", pipeline=pipe, progress=False, batch_size=4)
    records = records_from_file(outcome.predictions)
    counts = pipe.llm_judge.counts
    assert sum(counts.values()) == supports  # every SUPPORTS verdict asked, no other
    said_no = [r for r in records if "the model said No" in r["explanation"]]
    assert len(said_no) == counts["no"]
    assert all(r["predicted_label"] in ("REFUTES", "NOT ENOUGH INFO") for r in said_no)
    assert sum(r["predicted_label"] == "SUPPORTS" for r in records) == counts["yes"] + counts["unusable"]
    assert {k: outcome.llm[f"judge_{k}"] for k in counts} == counts
    hover = as_hover(claims, tmp_path / "hover.jsonl")
    extra += ["data.claim_format=hover"]
    judged = _config(tiny_corpus, hover, cache, model, extra)
    pipe = VerificationPipeline(judged, progress=False).build()
    assert pipe.llm_judge is not None and pipe.llm_client is not None
    outcome = run_predictions(judged, tmp_path / "judged", pipeline=pipe, progress=False, batch_size=4)
    records = records_from_file(outcome.predictions)
    counts = pipe.llm_judge.counts
    # the same verifier on the same claims: the same SUPPORTS verdicts asked about
    assert sum(counts.values()) == supports and len(records) == len(claims)
    said_no = [r for r in records if "the model said No" in r["explanation"]]
    assert len(said_no) == counts["no"] and all(r["predicted_label"] != "SUPPORTS" for r in said_no)
    assert sum(r["predicted_label"] == "SUPPORTS" for r in records) == counts["yes"] + counts["unusable"]
    assert {k: outcome.llm[f"judge_{k}"] for k in counts} == counts
