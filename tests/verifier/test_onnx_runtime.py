"""``verifier.runtime: onnx``: the toy classifier of conftest exported with torch.onnx and run by a real
ONNX Runtime session, against the same checkpoint run by PyTorch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from garag.config import ConfigError, VerifierConfig
from garag.types import Label
from verifier.nli import NLIVerifier
from verifier.pair_memory import PairMemories

pytest.importorskip("onnxruntime", reason="the onnx extra (make test installs it)")

S, N, R = Label.SUPPORTS, Label.NOT_ENOUGH_INFO, Label.REFUTES


@pytest.fixture(scope="module")
def model_dir(trained) -> Path:
    return trained[0].model_dir


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


def _config(mode: str, runtime: str) -> VerifierConfig:
    return VerifierConfig(mode=mode, max_length=64, batch_size=3, min_confidence=0.5, runtime=runtime)


def _cases(make_evidence) -> tuple[list[str], list[list]]:  # noqa: ANN001
    claims = ["Madrid is famous.", "Oslo is famous.", "Lima is famous.", "Quito is famous, they say."]
    evidence = [
        [make_evidence("Yes_Page", 3, "Madrid", S), make_evidence("Other", 1, "Madrid", N)],
        [make_evidence("No_Page", 2, "Oslo", R)],
        [make_evidence("History", 0, "Lima", N), make_evidence("More", 5, "Lisbon", N)],
        [make_evidence("Yes_Page", 7, "Quito", S), make_evidence("No_Page", 8, "Quito", R)],
    ]
    return claims, evidence


@pytest.mark.parametrize("mode", ["concat", "per_sentence"])
def test_onnx_gives_pytorchs_probabilities_and_verdicts(
    model_dir: Path, exports: Path, make_evidence, mode: str
) -> None:
    torch_run = NLIVerifier(_config(mode, "torch"), str(model_dir)).load()
    onnx_run = NLIVerifier(_config(mode, "onnx"), str(model_dir), export_dir=exports).load()
    assert onnx_run._onnx is not None and torch_run._onnx is None
    claims, evidence = _cases(make_evidence)
    a, b = torch_run.verify_batch(claims, evidence), onnx_run.verify_batch(claims, evidence)
    assert [v.label for v in b] == [v.label for v in a]
    assert [v.evidence for v in b] == [v.evidence for v in a]
    assert {v.label for v in a} >= {S, R}  # the toy model reads the evidence, so the check means something
    for x, y in zip(a, b, strict=True):
        assert y.scores == pytest.approx(x.scores, abs=1e-5)
    # pairs of other lengths and batch sizes than the export's sample (dynamic batch and length)
    premises = ["Yes, Bern is famous.", "No.", "Bern is a city of many words " * 6]
    hypotheses = ["Bern is famous.", "Bern is famous and old, a city that many visit each year.", "Bern"]
    p, q = torch_run.predict_pairs(premises, hypotheses), onnx_run.predict_pairs(premises, hypotheses)
    assert np.abs(p - q).max() < 1e-5
    assert not np.allclose(p[0], p[1])  # different pairs, different probabilities


def test_the_export_is_kept_and_reused_and_pairs_are_remembered_per_runtime(
    model_dir: Path, tmp_path: Path, make_evidence, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config("per_sentence", "onnx")
    first = NLIVerifier(config, str(model_dir), export_dir=tmp_path / "x").load()
    files = list((tmp_path / "x").iterdir())
    assert len(files) == 1 and files[0].suffix == ".onnx" and files[0].stat().st_size > 0
    written = files[0].stat().st_mtime_ns
    caplog.clear()
    with caplog.at_level("INFO", logger="verifier.onnx_runtime"):
        second = NLIVerifier(config, str(model_dir), export_dir=tmp_path / "x").load()
    assert not [r for r in caplog.records if "exported" in r.getMessage()]  # read, not exported again
    assert files[0].stat().st_mtime_ns == written and list((tmp_path / "x").iterdir()) == files
    claims, evidence = _cases(make_evidence)
    assert [v.scores for v in second.verify_batch(claims, evidence)] == [
        v.scores for v in first.verify_batch(claims, evidence)
    ]
    # one pool: the PyTorch reader and the ONNX reader never answer each other's pairs
    pool = PairMemories()
    torch_run = NLIVerifier(_config("per_sentence", "torch"), str(model_dir), pool).load()
    onnx_run = NLIVerifier(config, str(model_dir), pool, export_dir=tmp_path / "x").load()
    assert torch_run.reader() != onnx_run.reader()
    torch_run.score_sentences(claims, evidence)
    onnx_run.score_sentences(claims, evidence)
    assert onnx_run.pairs_remembered == 0 and onnx_run.pairs_scored == torch_run.pairs_scored > 0
    # no folder: exported in memory, nothing written
    assert NLIVerifier(config, str(model_dir)).load()._onnx is not None


def test_onnx_is_refused_with_a_gpu_or_bfloat16_in_one_line() -> None:
    for key, value in (("device", "cuda"), ("device", "mps"), ("precision", "bfloat16")):
        with pytest.raises(ConfigError) as e:
            VerifierConfig(runtime="onnx", **{key: value})
        assert "runtime onnx" in str(e.value) and value in str(e.value) and "\n" not in str(e.value)
    assert VerifierConfig(runtime="onnx", device="auto").runtime == "onnx"  # auto: the CPU
    with pytest.raises(ConfigError, match="runtime"):
        VerifierConfig(runtime="tensorrt")


def test_runtime_onnx_without_the_extra_names_it(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'garag\[onnx\]'"):
        NLIVerifier(_config("concat", "onnx"), str(model_dir)).load()


def test_the_runtime_changes_the_run_hash_only_when_set() -> None:
    assert "runtime" not in VerifierConfig().hash_dump()  # runs made before the setting keep their hash
    assert VerifierConfig(runtime="onnx").hash_dump()["runtime"] == "onnx"
