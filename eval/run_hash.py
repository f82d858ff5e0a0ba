"""The settings hash that names a prediction run: the config, plus what the stages it uses add."""

from __future__ import annotations

from garag.artifacts import settings_hash
from garag.config import Config
from verifier.decision import DECISION_VERSION
from verifier.llm_judge import judge_hash_fields


def run_config_hash(config: Config, *, two_way: bool) -> str:
    """The settings hash that names a prediction run (``evaluate``, ``compare``).

    ``eval`` and ``paths`` never count.  Nor, on 3-way data (``two_way`` False: FEVER), do the
    judge's settings that act on 2-way labels only (``verifier.llm_judge: two_way``,
    ``verifier.llm_judge_parts``): setting them for HoVer leaves saved FEVER predictions valid.
    The decision model's version counts wherever it may decide.
    """
    if not two_way:
        verifier = config.verifier
        update: dict = {"llm_judge_parts": 0.0}  # parts mode acts on 2-way verdicts only
        if verifier.llm_judge == "two_way":
            update["llm_judge"] = "never"
        config = config.model_copy(update={"verifier": verifier.replace(**update)})
    settings = config.hash_dict() | {"eval": None, "paths": None}
    settings["verifier"] = settings["verifier"] | judge_hash_fields(config.verifier.llm_judge)
    if config.verifier.decision != "verifier":
        settings["verifier"]["decision_version"] = DECISION_VERSION
    return settings_hash(settings)
