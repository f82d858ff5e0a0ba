"""A prediction run checks its claims before it makes (and, in the app, trains) a pipeline: a bad
claims file costs nothing, never a verifier's training."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.verification_eval import evaluate, run_predictions
from garag.config import load_config
from garag.errors import InputError


def _refuse(config, progress):  # noqa: ANN001 - stands in for the app's training factory
    raise AssertionError("the pipeline factory ran before the claims were checked")


@pytest.mark.parametrize("run", [run_predictions, evaluate])
def test_bad_claims_stop_before_the_pipeline_factory(run, tmp_path: Path, tiny_corpus: Path) -> None:
    claims = tmp_path / "claims.jsonl"
    claims.write_text('{"id": 1, "label": "SUPPORTS", "claim": "", "evidence": []}\n', encoding="utf-8")
    config = load_config(
        overrides=["data.dataset=custom", f"data.claims={claims}", f"data.corpus={tiny_corpus}"]
    )
    with pytest.raises(InputError, match="claim 1 .* has no words"):
        run(config, tmp_path / "run", pipeline_factory=_refuse, progress=False)
