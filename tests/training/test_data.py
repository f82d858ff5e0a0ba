from __future__ import annotations

import json
from pathlib import Path

import pytest

from garag.errors import InputError
from garag.store import SentenceStore
from garag.types import Label, SentenceId
from training.data import (
    TrainClaim,
    aggregator_instances,
    build_examples,
    drop_eval_claims,
    read_train_pairs,
    split_by_page,
)


def _pairs(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _row(claim: str, label: str, page: str, line: int) -> dict:
    return {"claim": claim, "label": label, "page": page, "line": line, "sentence": "..."}


def test_rows_of_one_claim_are_grouped(tmp_path: Path):
    f = _pairs(
        tmp_path / "p.jsonl",
        [
            _row("A is B.", "SUPPORTS", "A", 0),
            _row("C.", "REFUTES", "C", 1),
            _row("A is B.", "SUPPORTS", "B", 2),
            _row("A is B.", "SUPPORTS", "A", 0),
        ],
    )
    claims = read_train_pairs(f)
    assert [(c.text, c.label, c.evidence) for c in claims] == [
        ("A is B.", Label.SUPPORTS, (SentenceId("A", 0), SentenceId("B", 2))),
        ("C.", Label.REFUTES, (SentenceId("C", 1),)),
    ]


def test_bad_rows_name_file_and_line(tmp_path: Path):
    f = _pairs(tmp_path / "p.jsonl", [_row("A.", "SUPPORTS", "A", 0), _row("A.", "NOT ENOUGH INFO", "A", 1)])
    with pytest.raises(InputError, match=r"p\.jsonl:2: unknown label 'NOT ENOUGH INFO'"):
        read_train_pairs(f)
    f = _pairs(tmp_path / "q.jsonl", [_row("A.", "SUPPORTS", "A", 0), _row("A.", "REFUTES", "A", 1)])
    with pytest.raises(InputError, match=r"q\.jsonl:2: claim 'A.' has two labels"):
        read_train_pairs(f)
    f = _pairs(tmp_path / "r.jsonl", [{"claim": "A.", "label": "SUPPORTS", "page": "A"}])
    with pytest.raises(InputError, match=r"r\.jsonl:1: field 'line' missing"):
        read_train_pairs(f)


def test_eval_claims_are_dropped_ignoring_case_and_spacing():
    claims = [
        TrainClaim(0, "Paris is  in France.", Label.SUPPORTS, (SentenceId("P", 0),)),
        TrainClaim(1, "Rome is in Spain.", Label.REFUTES, (SentenceId("R", 0),)),
    ]
    kept, dropped = drop_eval_claims(claims, ["paris is in france."])
    assert [c.id for c in kept] == [1] and dropped == 1


def test_split_keeps_claims_of_one_page_together():
    claims = [TrainClaim(i, f"c{i}", Label.SUPPORTS, (SentenceId(f"P{i % 7}", 0),)) for i in range(70)]
    train, val = split_by_page(claims, 0.2, seed=1)
    assert len(train) + len(val) == 70 and 10 <= len(val) <= 20
    assert not {c.evidence[0].page for c in train} & {c.evidence[0].page for c in val}
    assert split_by_page(claims, 0.2, seed=1) == (train, val)


def test_examples_follow_the_recipe(tiny_store: SentenceStore):
    beatles = TrainClaim(
        0,
        "The Beatles were formed in England.",
        Label.SUPPORTS,
        (SentenceId("The_Beatles", 0), SentenceId("Liverpool", 0)),
    )
    snow = TrainClaim(1, "Snowpiercer is a comedy.", Label.REFUTES, (SentenceId("Snowpiercer", 0),))
    retrieved = [
        [
            SentenceId("The_Beatles", 0),
            SentenceId("The_Beatles", 3),
            SentenceId("Liverpool_F.C.", 0),
            SentenceId("England", 0),
        ],  # Liverpool 0 (gold) was missed by the retriever
        [SentenceId("Tilda_Swinton", 1), SentenceId("Snowpiercer", 0)],
    ]
    examples, counts = build_examples(
        [beatles, snow],
        retrieved,
        tiny_store,
        top_k=5,
        distractors=2,
        nei_per_claim=1.0,
        hard_negative_share=1.0,
        seed=3,
    )
    by = {(e.claim_id, e.label): e for e in examples}
    sup = [e.sentence for e in by[(0, Label.SUPPORTS)].evidence]
    assert set(sup) >= {SentenceId("The_Beatles", 0), SentenceId("Liverpool", 0)} and len(sup) == 4
    assert sup.index(SentenceId("The_Beatles", 0)) < sup.index(SentenceId("The_Beatles", 3))
    nei = [e.sentence for e in by[(0, Label.NOT_ENOUGH_INFO)].evidence]
    assert nei and not set(nei) & set(beatles.evidence)  # hard negatives never hold the claim's evidence
    ref = [e.sentence for e in by[(1, Label.REFUTES)].evidence]
    assert ref[0] == SentenceId("Tilda_Swinton", 1) and SentenceId("Snowpiercer", 0) in ref
    assert counts["SUPPORTS"] == 1 and counts["REFUTES"] == 1 and counts["nei_hard_negative"] == 2
    assert all(e.evidence and all(ev.text for ev in e.evidence) for e in examples)


def test_aggregator_instances_pair_each_claim_with_and_without_its_evidence(tiny_store: SentenceStore):
    beatles = TrainClaim(
        0, "The Beatles were formed in England.", Label.SUPPORTS, (SentenceId("The_Beatles", 0),)
    )
    ranked = [
        SentenceId("The_Beatles", 3),
        SentenceId("The_Beatles", 0),
        SentenceId("No_Such_Page", 0),  # not in the store: skipped
        SentenceId("Liverpool", 0),
        SentenceId("England", 0),
    ]
    (claim, asis, label), (claim2, without, nei) = aggregator_instances(
        [beatles], [ranked], tiny_store, top_k=2
    )
    assert claim == claim2 == beatles.text and (label, nei) == (Label.SUPPORTS, Label.NOT_ENOUGH_INFO)
    assert [e.sentence for e in asis] == [SentenceId("The_Beatles", 3), SentenceId("The_Beatles", 0)]
    assert [e.sentence for e in without] == [SentenceId("The_Beatles", 3), SentenceId("Liverpool", 0)]
    assert all(e.text for e in asis + without)
    with pytest.raises(ValueError, match="1 claims but 0 retrieved"):
        aggregator_instances([beatles], [], tiny_store, top_k=2)


def test_a_damaged_trained_verifier_is_refused_with_a_retrain_hint(tmp_path: Path, tiny_base: Path) -> None:
    """ensure_verifier checks the model files against the checksums its training recorded."""
    import shutil

    from garag.artifacts import ArtifactError, file_checksums, write_json_atomic
    from garag.config import load_config
    from training.verifier import ensure_verifier
    from verifier.trained import trained_verifier_path, verifier_artifact_dir

    config = load_config(
        overrides=[f"paths.cache_dir={tmp_path}", "verifier.aggregation=rule", "verifier.decision=verifier"]
    )
    out_dir = verifier_artifact_dir(config)
    shutil.copytree(tiny_base, out_dir / "model")  # stands in for a trained model: only its bytes matter here
    meta = {"kind": "verifier", "model_files": file_checksums(out_dir / "model")}
    write_json_atomic(out_dir / "meta.json", meta)
    assert ensure_verifier(config, progress=False) == str(out_dir / "model")
    assert trained_verifier_path(config) == str(out_dir / "model")
    weights = max((out_dir / "model").iterdir(), key=lambda p: p.stat().st_size)
    data = weights.read_bytes()
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ArtifactError) as err:
        ensure_verifier(config, progress=False)
    with pytest.raises(ArtifactError, match="damaged"):
        trained_verifier_path(config)  # what a pipeline loads is checked the same way
    assert str(err.value) == (
        f"{weights}: cached artifact does not match its checksum from the build (damaged); "
        f"retrain it with `garag train-verifier --force` or delete {out_dir}"
    )


def test_a_verifier_that_continues_from_the_default_one_keeps_its_split() -> None:
    """The joint recipe (train.base_model: garag, max_claims 3,000) on the embedded train pairs: it
    validates on claims the default verifier did not train on, and trains on ones it did."""
    from garag.config import load_config
    from training.verifier import split_train_claims
    from verifier.trained import base_verifier_config

    joint = load_config("configs/baseline.yaml+configs/joint.yaml")
    base_train, base_val, _ = split_train_claims(base_verifier_config(joint))
    train, val, _ = split_train_claims(joint)
    assert (len(base_train), len(base_val)) == (7965, 887)
    assert (len(train), len(val)) == (2700, 300)
    assert {c.id for c in val} <= {c.id for c in base_val}
    assert {c.id for c in train} <= {c.id for c in base_train}
    # the same draw every time (the verifier folder is named from the config, not from the claims)
    assert split_train_claims(joint) == (train, val, 0)
    # without max_claims, the default verifier's split itself
    whole = load_config("configs/baseline.yaml+configs/joint.yaml", ["train.max_claims=0"])
    assert split_train_claims(whole)[:2] == (base_train, base_val)


def test_a_verifier_missing_its_aggregator_and_decision_retrieves_its_validation_claims_once(
    tmp_path: Path, tiny_base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older cache lacks both fitted models: ensure_verifier fits both on one retrieval. The
    retrieval and the two fits are fakes here (they record what they are given); their real runs are
    `garag train-verifier`'s, too slow for a unit test."""
    import shutil

    import training.verifier as tv
    from garag.artifacts import file_checksums, write_json_atomic
    from garag.config import load_config
    from verifier.trained import verifier_artifact_dir

    config = load_config(overrides=[f"paths.cache_dir={tmp_path}"])
    out_dir = verifier_artifact_dir(config)
    shutil.copytree(tiny_base, out_dir / "model")  # stands in for a trained model: only its bytes matter here
    write_json_atomic(
        out_dir / "meta.json", {"kind": "verifier", "model_files": file_checksums(out_dir / "model")}
    )
    readings: list[object] = []
    given: list[tuple[str, object]] = []
    monkeypatch.setattr(
        tv, "validation_reading", lambda cfg, progress=True: readings.append(object()) or readings[-1]
    )
    monkeypatch.setattr(
        tv,
        "fit_claim_aggregator",
        lambda cfg, d, reading, memories=None: given.append(("a", reading)),
    )
    monkeypatch.setattr(
        tv,
        "fit_verifier_decision",
        lambda cfg, d, progress, reading=None, memories=None: given.append(("d", reading)),
    )
    assert tv.ensure_verifier(config, progress=False) == str(out_dir / "model")
    assert len(readings) == 1 and given == [("a", readings[0]), ("d", readings[0])]
    # with neither needed, nothing is retrieved
    readings.clear()
    given.clear()
    tv.ensure_verifier(
        load_config(
            overrides=[
                f"paths.cache_dir={tmp_path}",
                "verifier.aggregation=rule",
                "verifier.decision=verifier",
            ]
        ),
        progress=False,
    )
    assert readings == [] and given == []
