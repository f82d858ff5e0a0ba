"""The README's promises, run: its length and opening commands, and its "Extending garag" examples
(a registered retriever fused by a real pipeline on the tiny corpus, a registered verifier named by
a config of one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from garag.config import ConfigError, load_config
from garag.types import Claim, Label, SentenceId
from retrievers.registry import available, register_retriever

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section_code(title: str) -> list[str]:
    """The ```python blocks of the README section headed ``## title``."""
    section = README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 300
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1)
    assert [line.split()[:2] for line in first_block.splitlines()] == [["make", "run"], ["make", "test"]]


def test_the_readme_retriever_is_registered_and_fused(tiny_corpus: Path, tiny_claims: Path, tmp_path: Path):
    from pipeline.retrieval import RetrievalPipeline

    retriever_code, _ = _section_code("Extending garag")
    namespace: dict = {}
    exec(compile(retriever_code, "README.md (retriever example)", "exec"), namespace)
    assert "lead" in available()
    config = load_config(
        overrides=[
            "data.dataset=custom",
            f"data.claims={tiny_claims}",
            f"data.corpus={tiny_corpus}",
            f"paths.cache_dir={tmp_path}",
            "retrieval.retrievers=[bm25, lead]",
            "fusion.weights.lead=2",
        ]
    )
    pipe = RetrievalPipeline(config, progress=False)
    pipe.build()
    result = pipe.retrieve("The Beatles were formed in Liverpool.")
    lead = [h.sentence for h in result.per_retriever["lead"]]
    assert lead == [SentenceId("The_Beatles", 0), SentenceId("Liverpool", 0)]
    assert set(lead) <= {h.sentence for h in result.fused[:5]}


def test_a_retriever_name_must_be_registered_and_new() -> None:
    with pytest.raises(ConfigError, match="unknown retriever 'nope'"):
        load_config(overrides=["retrieval.retrievers=[bm25, nope]"])
    with pytest.raises(ValueError, match="'bm25' is one of garag's own"):
        register_retriever("bm25", lambda config, ctx: None)
    with pytest.raises(ValueError, match="use letters, digits"):
        register_retriever("my retriever", lambda config, ctx: None)


def test_the_readme_verifier_is_registered_and_named_by_a_config(
    tiny_corpus: Path, tiny_claims: Path, predict_config, tmp_path: Path
) -> None:
    import garag

    _, verifier_code = _section_code("Extending garag")
    namespace: dict = {}
    exec(compile(verifier_code, "README.md (verifier example)", "exec"), namespace)
    checker = garag.load(
        predict_config(tmp_path, tiny_claims, tiny_corpus), ["pipeline.verifier=always-supports"]
    )
    assert isinstance(checker.pipeline.verifier, namespace["AlwaysSupports"])
    claim = "Snowpiercer is a romantic comedy."
    verdict = checker.verify(claim)
    assert verdict.label is Label.SUPPORTS and verdict.evidence
    retrieved = checker.pipeline.run([Claim(id=1, text=claim)])[0]
    assert [(e.page, e.line) for e in verdict.evidence] == [
        (s.page, s.line) for s in retrieved.verdict.evidence
    ]
