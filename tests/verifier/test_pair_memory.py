"""The memory of scored NLI pairs: bounded, per reader, and shared only between verifiers that read alike
(the real toy classifier trained in conftest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from garag.config import VerifierConfig
from verifier.nli import NLIVerifier
from verifier.pair_memory import PairMemories, checkpoint_identity

PREMISES = ["Oslo is a city in Norway .", "Rome is old .", "Bern is Swiss ."]
CLAIMS = ["Oslo is in Norway.", "Rome is new.", "Bern is Swiss."]


@pytest.fixture(scope="module")
def model_dir(trained) -> Path:
    return trained[0].model_dir


def _config(**kw) -> VerifierConfig:
    return VerifierConfig(mode="per_sentence", max_length=64, batch_size=2, **kw)


def test_a_pool_keeps_one_memory_per_reader_and_forgets_the_least_recent_reader() -> None:
    pool = PairMemories(capacity=10, readers=2)
    a = pool.for_reader(("a",))
    assert pool.for_reader(("a",)) is a and a.size == 10
    b = pool.for_reader(("b",))
    assert b is not a
    pool.for_reader(("a",))  # "a" asked for last: "b" is forgotten when a third reader comes
    pool.for_reader(("c",))
    assert len(pool) == 2 and pool.for_reader(("a",)) is a and pool.for_reader(("b",)) is not b


def test_a_checkpoints_identity_follows_its_weights_not_the_files_fitted_beside_them(
    model_dir: Path, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(model_dir, tmp_path / "model"))
    before = checkpoint_identity(str(copy))
    assert before[0] == "local" and before[1] == str(copy.resolve())
    (copy / "garag_decision.json").write_text("{}", encoding="utf-8")
    assert checkpoint_identity(str(copy)) == before
    weights = next(f for f in copy.iterdir() if f.suffix in (".safetensors", ".bin"))
    weights.write_bytes(weights.read_bytes() + b"\0")
    assert checkpoint_identity(str(copy)) != before
    assert checkpoint_identity("org/some-hub-model") == ("hub", "org/some-hub-model")


def test_verifiers_given_one_pool_answer_each_others_pairs_alike(model_dir: Path) -> None:
    pool = PairMemories()
    first = NLIVerifier(_config(), str(model_dir), pool).load()
    probs = first.predict_pairs(PREMISES, CLAIMS)
    # another mode and aggregation read the pairs the same way: the memory is the reader's
    second = NLIVerifier(_config(aggregation="rule", nei_bias=0.5), str(model_dir), pool).load()
    again = second.predict_pairs(PREMISES[::-1], CLAIMS[::-1])
    assert (second.pairs_scored, second.pairs_remembered) == (0, 3)
    assert again[::-1].tolist() == probs.tolist()
    # a verifier with its own pool scores them itself, and gets the same numbers closely
    alone = NLIVerifier(_config(), str(model_dir)).load()
    assert np.allclose(alone.predict_pairs(PREMISES, CLAIMS), probs, atol=1e-6)
    assert (alone.pairs_scored, alone.pairs_remembered) == (3, 0)


@pytest.mark.parametrize("other", [{"max_length": 16}, {"precision": "bfloat16"}])
def test_verifiers_that_read_differently_never_share_pairs(model_dir: Path, other: dict) -> None:
    pool = PairMemories()
    NLIVerifier(_config(), str(model_dir), pool).load().predict_pairs(PREMISES, CLAIMS)
    settings = {"max_length": 64, **other}
    different = NLIVerifier(
        VerifierConfig(mode="per_sentence", batch_size=2, **settings), str(model_dir), pool
    ).load()
    different.predict_pairs(PREMISES, CLAIMS)
    assert (different.pairs_scored, different.pairs_remembered) == (3, 0)
    assert len(pool) == 2


def test_a_pair_asked_twice_is_scored_once_and_forget_pairs_scores_it_again(model_dir: Path) -> None:
    verifier = NLIVerifier(_config(), str(model_dir)).load()
    twice = verifier.predict_pairs(PREMISES + PREMISES[:1], CLAIMS + CLAIMS[:1])
    assert twice[3].tolist() == twice[0].tolist()
    assert (verifier.pairs_scored, verifier.pairs_remembered) == (3, 1)
    verifier.predict_pairs(PREMISES, CLAIMS)
    assert (verifier.pairs_scored, verifier.pairs_remembered) == (3, 4)
    assert verifier.predict_pairs([], []).shape == (0, 3)
    verifier.forget_pairs()
    verifier.predict_pairs(PREMISES, CLAIMS)
    assert (verifier.pairs_scored, verifier.pairs_remembered) == (6, 4)
