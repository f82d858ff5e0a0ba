"""A real tiny comparison: two configs (BM25 only vs BM25 + dense + pages) over the fixture claims,
with a real tiny trained classifier; then resume after a kill, re-score, report and figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from app.cli import main
from eval.compare import (
    compare,
    default_pipeline,
    faithfulness_judge,
    load_systems,
    rescore,
    stratified_sample,
)
from eval.compare_metrics import label_correct, strict_correct
from eval.fever_score import macro_f1
from eval.figures import evidence_graph
from eval.significance import mcnemar
from garag.config import load_config
from garag.types import Claim, Label
from pipeline.verification import VerificationPipeline

pytestmark = pytest.mark.slow

VOLATILE = ("seconds", "retriever_seconds")  # wall-clock timings differ between runs


def _write_config(
    path: Path, retrievers: list[str], corpus: Path, claims: Path, cache: Path, model: str
) -> Path:
    cfg = {
        "data": {"dataset": "custom", "claims": str(claims), "corpus": str(corpus)},
        "paths": {"cache_dir": str(cache)},
        "retrieval": {"retrievers": retrievers, "k": 20},
        "fusion": {"depth": 20},
        "verifier": {"model": model, "top_k": 3, "max_length": 64, "nei_bias": 0.0},
    }
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def setup(tiny_corpus: Path, tiny_claims: Path, train_on_fixture_premises, tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    cache = root / "cache"
    probe = _write_config(
        root / "probe.yaml", ["bm25", "dense", "pages"], tiny_corpus, tiny_claims, cache, "x"
    )
    pipe = VerificationPipeline(load_config(probe), progress=False)
    pipe.retrieval.build()
    claims = list(pipe.dataset.claims())
    model = train_on_fixture_premises(pipe, root / "model", epochs=3)
    configs = [
        _write_config(root / "baseline.yaml", ["bm25"], tiny_corpus, tiny_claims, cache, str(model)),
        _write_config(
            root / "hybrid.yaml", ["bm25", "dense", "pages"], tiny_corpus, tiny_claims, cache, str(model)
        ),
    ]
    pipelines = {s.name: default_pipeline(s.config, False).build() for s in load_systems(configs)}
    results_dir = root / "results"
    outcome = compare(
        configs, run_id="tiny", results_dir=results_dir, progress=False, batch_size=4,
        pipelines=pipelines, n_resamples=500,
    )  # fmt: skip
    return configs, claims, pipelines, outcome, results_dir


def _records(path: Path) -> list[dict]:
    out = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for r in out:
        for key in VOLATILE:
            r.pop(key)
        # a resumed run scores its claims in other batches: padding moves probabilities by ~1e-6
        r["scores"] = {label: round(p, 4) for label, p in r["scores"].items()}
    return out


def test_run_writes_every_file(setup):
    _, claims, _, outcome, _ = setup
    run = outcome.run_dir
    assert outcome.written == {"baseline": 6, "hybrid": 6} and outcome.resumed == {"baseline": 0, "hybrid": 0}
    for name in ("run.json", "env.json", "metrics.json", "metrics.csv", "report.md", "configs/hybrid.yaml"):
        assert (run / name).is_file(), name
    figures = sorted(p.name for p in (run / "figures").glob("*.png"))
    assert figures == [
        "comparison.png",
        "confusion.png",
        "hit_rate_vs_retrieved.png",
        "latency.png",
        "pipeline.png",
    ]
    recs = _records(run / "predictions" / "hybrid.jsonl")
    assert [r["id"] for r in recs] == [c.id for c in claims]
    assert set(recs[0]["per_retriever"]) == {"bm25", "dense", "pages"}
    assert set(_records(run / "predictions" / "baseline.jsonl")[0]["per_retriever"]) == {"bm25"}
    for r in recs:
        assert r["predicted_label"] in {lab.value for lab in Label} and len(r["predicted_evidence"]) <= 5
        assert len(r["evidence_text"]) == len(r["evidence_read"])
    env = json.loads((run / "env.json").read_text(encoding="utf-8"))
    assert env["dataset"]["claims_sha256"] and env["packages"]["torch"]
    assert "model.safetensors" in env["models"]["hybrid"]["verifier_files"]
    assert set(env["models"]["hybrid"]["artifacts"]) == {"store", "bm25", "dense", "pages"}
    resolved = yaml.safe_load((run / "configs" / "baseline.yaml").read_text(encoding="utf-8"))
    assert resolved["retrieval"]["retrievers"] == ["bm25"]
    faithful = (run / "predictions" / "hybrid.faithful.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(faithful) == 6


def test_metrics_follow_the_saved_records(setup):
    _, claims, _, outcome, _ = setup
    m = outcome.metrics
    run = outcome.run_dir
    recs = {n: json.loads("[" + ",".join((run / "predictions" / f"{n}.jsonl").read_text().splitlines()) + "]")
            for n in ("baseline", "hybrid")}  # fmt: skip
    correct = {n: [label_correct(c, r) for c, r in zip(claims, recs[n], strict=True)] for n in recs}
    strict = {n: [strict_correct(c, r) for c, r in zip(claims, recs[n], strict=True)] for n in recs}
    for n in recs:
        assert m["per_system"][n]["label_accuracy"] == pytest.approx(sum(correct[n]) / 6)
        assert m["per_system"][n]["fever_score"] == pytest.approx(sum(strict[n]) / 6)
        assert m["per_system"][n]["ci"]["accuracy"][0] == pytest.approx(sum(correct[n]) / 6)
    pair = m["paired"][0]
    expected = mcnemar(strict["baseline"], strict["hybrid"])
    assert (pair["a"], pair["b"]) == ("baseline", "hybrid")
    assert (
        pair["fever_score"]["mcnemar"]["b"] == expected.b
        and pair["fever_score"]["mcnemar"]["c"] == expected.c
    )
    assert pair["fever_score"]["bootstrap"]["difference"] == pytest.approx(
        (sum(strict["hybrid"]) - sum(strict["baseline"])) / 6
    )
    # macro-F1 and its paired difference are recomputed from the same saved labels
    labels = ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    gold = [c.label for c in claims]
    f1 = {n: macro_f1(gold, [r["predicted_label"] for r in recs[n]], labels) for n in recs}
    for n in recs:
        value, low, high = m["per_system"][n]["macro_f1_ci"]
        assert value == pytest.approx(f1[n]) == pytest.approx(m["per_system"][n]["macro_f1"])
        assert low <= value <= high
    assert pair["macro_f1"]["a"] == pytest.approx(f1["baseline"])
    assert pair["macro_f1"]["bootstrap"]["difference"] == pytest.approx(f1["hybrid"] - f1["baseline"])
    # the two-page claim (id 2) needs both sentences: slice "evidence on several pages" holds exactly it
    rows = {r["slice"]: r for r in m["slices"]}
    assert rows["evidence on several pages"]["n"] == 1
    assert m["per_system"]["baseline"]["attribution"]["found_by"].keys() <= {"bm25"}
    assert m["per_system"]["hybrid"]["explanations"]["existence_checked"] is True
    assert m["per_system"]["hybrid"]["explanations"]["cited_exist"] == 1.0
    csv_lines = (run / "metrics.csv").read_text(encoding="utf-8").splitlines()
    assert len(csv_lines) == 3 and csv_lines[2].startswith("hybrid,6,")
    assert csv_lines[0].endswith(",macro_f1_diff,macro_f1_diff_low,macro_f1_diff_high")
    assert float(csv_lines[2].split(",")[-3]) == pytest.approx(f1["hybrid"] - f1["baseline"])
    report = (run / "report.md").read_text(encoding="utf-8")
    for heading in ("## Headline", "## Paired significance", "## Slices", "## Worked examples", "## Cost"):
        assert heading in report
    assert "`retrieval.retrievers`" in report  # the setting that differs is listed
    assert "| macro-F1 | 6 |" in report and "has no McNemar test" in report


def test_reports_of_runs_scored_before_macro_f1_intervals_still_render(setup):
    import copy

    from eval.compare_metrics import metrics_csv
    from eval.report import headline_table, significance_table

    old = copy.deepcopy(setup[3].metrics)
    for m in old["per_system"].values():
        del m["macro_f1_ci"]
    for pair in old["paired"]:
        del pair["macro_f1"]
    assert "macro-F1 [95% CI]" not in headline_table(old) and "| macro-F1 |" not in significance_table(old)
    assert metrics_csv(old).splitlines()[2].endswith(",,,,,")  # the interval columns stay empty


def test_rescore_gives_identical_metrics(setup):
    _, _, _, outcome, results_dir = setup
    before = json.loads((outcome.run_dir / "metrics.json").read_text(encoding="utf-8"))
    again = rescore("tiny", results_dir=results_dir, n_resamples=500)
    assert json.loads(json.dumps(again)) == before
    assert main(["evaluate", "--run", str(outcome.run_dir)]) == 0
    assert (
        json.loads((outcome.run_dir / "metrics.json").read_text(encoding="utf-8"))["paired"][0]["a"]
        == "baseline"
    )


def test_killed_run_resumes_to_the_same_predictions(setup):
    configs, _, _, outcome, results_dir = setup
    killed = results_dir / "killed"
    shutil.copytree(outcome.run_dir, killed)
    for f in ("metrics.json", "report.md"):
        (killed / f).unlink()
    base = killed / "predictions" / "baseline.jsonl"
    lines = base.read_text(encoding="utf-8").splitlines(keepends=True)
    base.write_text("".join(lines[:3]), encoding="utf-8")
    hybrid = killed / "predictions" / "hybrid.jsonl"
    lines = hybrid.read_text(encoding="utf-8").splitlines(keepends=True)
    hybrid.write_text("".join(lines[:2]) + lines[2][:20], encoding="utf-8")  # killed mid-write
    # a restarted process: pipelines are built again from the config files
    again = compare(
        configs, run_id="killed", results_dir=results_dir, progress=False, batch_size=4, n_resamples=500
    )
    assert again.resumed == {"baseline": 3, "hybrid": 2} and again.written == {"baseline": 3, "hybrid": 4}
    for name in ("baseline", "hybrid"):
        assert _records(killed / "predictions" / f"{name}.jsonl") == _records(
            outcome.run_dir / "predictions" / f"{name}.jsonl"
        )
    assert (killed / "report.md").is_file()


def test_other_settings_are_refused(setup):
    configs, _, pipelines, _, results_dir = setup
    with pytest.raises(ValueError, match="other settings"):
        compare(
            configs, run_id="tiny", sample=3, results_dir=results_dir, progress=False, pipelines=pipelines
        )
    with pytest.raises(ValueError, match="at least two"):
        compare(configs[:1], run_id="x", results_dir=results_dir)


def test_force_new_sets_a_stale_run_aside_whole_and_it_still_rescores(setup):
    configs, _, pipelines, outcome, results_dir = setup
    copy = results_dir / "changed"
    shutil.copytree(outcome.run_dir, copy)
    # the same settings with force_new: resumed, nothing set aside
    same = compare(
        configs, run_id="changed", results_dir=results_dir, progress=False, pipelines=pipelines,
        n_resamples=500, force_new=True,
    )  # fmt: skip
    assert same.written == {"baseline": 0, "hybrid": 0} and not list(copy.glob("stale-*"))
    # (metrics and report are written again, with their timings: the files as they are now)
    old = {
        p.relative_to(copy): p.read_bytes()
        for p in copy.rglob("*")
        if p.is_file() and p.name != ".garag.lock"
    }
    # other settings (a sample of 3 claims): the old run moves into stale-<time>/ whole, names kept
    again = compare(
        configs, run_id="changed", sample=3, results_dir=results_dir, progress=False, pipelines=pipelines,
        n_resamples=500, force_new=True,
    )  # fmt: skip
    assert again.written == {"baseline": 3, "hybrid": 3}
    (stale,) = copy.glob("stale-*")
    kept = {p.relative_to(stale): p.read_bytes() for p in stale.rglob("*") if p.is_file()}
    assert kept == old
    assert (copy / "configs" / "baseline.yaml").is_file() and (copy / "report.md").is_file()
    before = json.loads((stale / "metrics.json").read_text(encoding="utf-8"))
    rescored = json.loads(json.dumps(rescore(str(stale), results_dir=results_dir, n_resamples=500)))
    assert rescored.pop("run_id") == stale.name and before.pop("run_id") == "changed"
    assert rescored == before  # the old run re-scored from its own configs and predictions


def test_stratified_sample_keeps_label_shares():
    claims = [Claim(i, f"c{i}", lab) for i, lab in enumerate(["S"] * 6 + ["R"] * 3 + ["N"] * 3)]
    picked = stratified_sample(claims, 4, seed=1)
    # quotas: S 4*6/12 = 2, R 1, N 1 (no remainders)
    assert [c.label for c in picked].count("S") == 2 and len(picked) == 4
    assert [c.id for c in picked] == sorted(c.id for c in picked)  # file order
    assert stratified_sample(claims, 4, seed=1) == picked
    assert stratified_sample(claims, 50, seed=1) == claims
    # 5 of 12: S 2.5 -> 2, R 1.25 -> 1, N 1.25 -> 1, the last goes to the largest remainder (S)
    assert [c.label for c in stratified_sample(claims, 5, seed=2)].count("S") == 3


def test_evidence_graph_png(tmp_path: Path):
    graph = {
        "claim": "The Beatles were formed in England.",
        "label": "SUPPORTS",
        "vertices": [
            {"id": "The_Beatles", "role": "claim-entity"},
            {"id": "England", "role": "claim-entity"},
            {"id": "Liverpool", "role": "between"},
        ],
        "edges": [
            {
                "source": "The_Beatles",
                "target": "Liverpool",
                "sentence": ["The_Beatles", 0],
                "decisive": True,
            },
            {"source": "Liverpool", "target": "England", "sentence": ["Liverpool", 0], "decisive": True},
            {"source": "The_Beatles", "target": "England", "sentence": ["The_Beatles", 3]},
        ],
    }
    path = evidence_graph(graph, tmp_path / "g.png")
    assert path.stat().st_size > 10_000
    bad = dict(graph, edges=[{"source": "X", "target": "England", "sentence": ["X", 0]}])
    with pytest.raises(ValueError, match="vertex not in"):
        evidence_graph(bad, tmp_path / "bad.png")


def test_llm_faithfulness_is_judged_by_its_nli_fallback_not_by_another_llm_call():
    from verifier.judged import JudgedVerifier
    from verifier.llm import LLMVerifier

    nli = object()  # stands in for the NLI fallback: only which object judges is checked
    llm = LLMVerifier(client=None, fallback=nli)  # type: ignore[arg-type]  (never called here)
    assert faithfulness_judge(llm) is nli
    # the LLM judge's wrap is read through: asking the judge again would cost LLM calls too
    judged = JudgedVerifier(llm, judge=None, two_way_data=True)  # type: ignore[arg-type]
    assert faithfulness_judge(judged) is nli
    alone = LLMVerifier(client=None)  # type: ignore[arg-type]
    assert faithfulness_judge(alone) is alone
    plain = object()
    assert faithfulness_judge(plain) is plain


def test_two_way_settings_leave_a_three_way_run_resumable(setup):
    """The fixture's claims are 3-way: the HoVer-only LLM judge names no other run, so it resumes
    whole; the verifier's own label instead of the decision model's does."""
    configs, _, pipelines, outcome, results_dir = setup
    shutil.copytree(outcome.run_dir, results_dir / "two-way")
    original = {c: c.read_text(encoding="utf-8") for c in configs}

    def tune(**verifier: object) -> None:  # the same files (a system is named by its config's path)
        for c, text in original.items():
            cfg = yaml.safe_load(text)
            cfg["verifier"].update(verifier)
            c.write_text(yaml.safe_dump(cfg), encoding="utf-8")

    try:
        tune(llm_judge="two_way")
        again = compare(
            configs, run_id="two-way", results_dir=results_dir, progress=False, pipelines=pipelines,
            n_resamples=500,
        )  # fmt: skip
        assert again.written == {"baseline": 0, "hybrid": 0}
        assert again.resumed == {"baseline": 6, "hybrid": 6}
        tune(decision="verifier")
        with pytest.raises(ValueError, match="other settings"):
            compare(configs, run_id="two-way", results_dir=results_dir, progress=False, pipelines=pipelines)
    finally:
        for c, text in original.items():
            c.write_text(text, encoding="utf-8")


def test_a_mixed_run_records_its_second_verifier(tmp_path) -> None:
    from types import SimpleNamespace

    from eval.compare import _model_hashes

    first, second = tmp_path / "first", tmp_path / "second"
    for d, text in ((first, "a"), (second, "b")):
        d.mkdir()
        (d / "model.safetensors").write_text(text, encoding="utf-8")
    plain = _model_hashes(SimpleNamespace(model_path=str(first), retrieval=None))
    assert "mix_verifier" not in plain  # a run without a mix records what it always did
    mixed = _model_hashes(SimpleNamespace(model_path=str(first), mix_model_path=str(second), retrieval=None))
    assert mixed["mix_verifier"] == str(second)
    assert mixed["mix_verifier_files"] != mixed["verifier_files"]
    (second / "model.safetensors").write_text("retrained", encoding="utf-8")
    again = _model_hashes(SimpleNamespace(model_path=str(first), mix_model_path=str(second), retrieval=None))
    assert again["mix_verifier_files"] != mixed["mix_verifier_files"]  # a resume can see the change


def test_the_systems_of_a_comparison_answer_each_others_pairs_and_predict_the_same(setup):
    """Built by compare itself, the two systems share one memory of scored NLI pairs: the second
    answers the claims' sentences the first read from it, and predicts what it predicts alone."""
    configs, _, _, outcome, results_dir = setup
    made: list[VerificationPipeline] = []

    def factory(config, progress):  # noqa: ANN001, ANN202 - compare's pipeline factory, recording
        made.append(default_pipeline(config, progress))
        return made[-1]

    shared = compare(
        configs, run_id="shared-pairs", results_dir=results_dir, progress=False, batch_size=4,
        pipeline_factory=factory, faithfulness=False, n_resamples=500,
    )  # fmt: skip
    baseline, hybrid = (p.verifier for p in made)
    assert baseline._memory is hybrid._memory
    assert baseline.pairs_remembered == 0 < hybrid.pairs_remembered
    for name in ("baseline", "hybrid"):
        alone = _records(outcome.run_dir / "predictions" / f"{name}.jsonl")
        together = _records(shared.run_dir / "predictions" / f"{name}.jsonl")
        assert [r["predicted_label"] for r in together] == [r["predicted_label"] for r in alone]
        for a, b in zip(alone, together, strict=True):
            assert b["scores"] == pytest.approx(a["scores"], abs=2e-4)  # rounded to 4 places


def test_the_report_names_the_cpu_its_timings_ran_on_not_the_one_rescoring(setup, tmp_path):
    from garag.cpu import CPU, describe_cpu

    _, _, _, outcome, _ = setup
    env = json.loads((outcome.run_dir / "env.json").read_text(encoding="utf-8"))
    here = describe_cpu()
    assert CPU.from_dict(env["machine"]["cpu"]) == here
    report = (outcome.run_dir / "report.md").read_text(encoding="utf-8")
    assert f"- timed on {here.line()} (env.json)" in report

    elsewhere = tmp_path / "tiny"
    shutil.copytree(outcome.run_dir, elsewhere)
    env["machine"]["cpu"] = CPU(
        model="Test CPU 9000", cpus=64, vector="avx512", flags=("avx2", "avx512f"),
        torch_kernels="AVX512", limits={"ATEN_CPU_CAPABILITY": "avx2"},
    ).to_dict()  # fmt: skip
    (elsewhere / "env.json").write_text(json.dumps(env), encoding="utf-8")
    assert rescore(elsewhere, n_resamples=500)["cpu"]["model"] == "Test CPU 9000"
    report = (elsewhere / "report.md").read_text(encoding="utf-8")
    assert (
        "- timed on Test CPU 9000, 64 CPUs, AVX-512 (torch kernels AVX512), "
        "held by ATEN_CPU_CAPABILITY=avx2 (env.json)" in report
    )
    del env["machine"]["cpu"]  # a run written before garag recorded it
    (elsewhere / "env.json").write_text(json.dumps(env), encoding="utf-8")
    assert "cpu" not in rescore(elsewhere, n_resamples=500)
    assert "timed on" not in (elsewhere / "report.md").read_text(encoding="utf-8")


def test_a_broken_env_json_is_named_in_one_line(setup, tmp_path, capsys):
    _, _, _, outcome, _ = setup
    broken = tmp_path / "broken"
    shutil.copytree(outcome.run_dir, broken)
    for text, why in (("{not json", "not readable as JSON"), ("[1, 2]", "expected a JSON object")):
        (broken / "env.json").write_text(text, encoding="utf-8")
        with pytest.raises(ValueError) as e:
            rescore(broken, n_resamples=200)
        assert str(e.value).startswith(f"{broken / 'env.json'}: {why}") and "\n" not in str(e.value)
        assert main(["evaluate", "--run", str(broken)]) != 0
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(broken / "env.json") in err and "Traceback" not in err
    (broken / "env.json").unlink()  # no env.json: scored, without the store check or the CPU line
    metrics = rescore(broken, n_resamples=200)
    assert "cpu" not in metrics
    assert not any(m["explanations"]["existence_checked"] for m in metrics["per_system"].values())
