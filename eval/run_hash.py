"""The settings hash that names a prediction run: the config, plus what the stages it uses add."""

from __future__ import annotations

from garag.artifacts import settings_hash
from garag.config import Config
from verifier.llm_judge import judge_hash_fields


def run_config_hash(config: Config, *, two_way: bool) -> str:
    """The settings hash that names a prediction run (``evaluate``, ``compare``).

    ``eval`` and ``paths`` never count.  Nor, on 3-way data (``two_way`` False: FEVER), do the
    settings that act on 2-way labels only (``verifier.two_way_threshold``, ``verifier.llm_judge_parts``
    and ``verifier.entity_check: two_way``, ``verifier.llm_judge: two_way``): tuning them on HoVer leaves
    saved FEVER predictions valid.
    """
    if not two_way:
        verifier = config.verifier
        update: dict = {"two_way_threshold": None}
        for switch in ("entity_check", "llm_judge"):
            if getattr(verifier, switch) == "two_way":
                update[switch] = "never"
        update["llm_judge_parts"] = 0.0  # parts mode acts on 2-way verdicts only
        config = config.model_copy(update={"verifier": verifier.replace(**update)})
    settings = config.hash_dict() | {"eval": None, "paths": None}
    settings["verifier"] = settings["verifier"] | judge_hash_fields(config.verifier.llm_judge)
    return settings_hash(settings)
