"""Shared fixtures for the verifier tests: a tiny BERT encoder and a toy NLI task it learns in seconds.

The encoder is a real (randomly initialised) BertModel with 1 layer and hidden size 64,
paired with the real all-MiniLM-L6-v2 tokenizer; it goes through exactly the code
paths a hub checkpoint takes (save_pretrained / from_pretrained).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from garag.config import TrainConfig
from garag.types import Evidence, Label, SentenceId
from verifier.base import TrainExample

SUBJECTS = [
    "Paris",
    "Berlin",
    "the river",
    "Alice",
    "the band",
    "Mount Fuji",
    "the novel",
    "Bob",
    "the film",
    "Rome",
]
TOY_LABELS = (Label.SUPPORTS, Label.REFUTES, Label.NOT_ENOUGH_INFO)


def toy_sentence(subject: str, label: Label) -> str:
    """Evidence text: "yes" means SUPPORTS, "no" means REFUTES, a history sentence means NEI."""
    if label is Label.SUPPORTS:
        return f"About {subject} the answer is yes ."
    if label is Label.REFUTES:
        return f"About {subject} the answer is no ."
    return f"{subject} has a long history ."


def toy_example(i: int, label: Label) -> TrainExample:
    subject = SUBJECTS[i % len(SUBJECTS)]
    ev = Evidence(SentenceId(f"Page_{i}", i % 4), toy_sentence(subject, label))
    return TrainExample(claim=f"{subject} is famous.", evidence=(ev,), label=label, claim_id=i)


def _toy_data() -> tuple[list[TrainExample], list[TrainExample]]:
    train = [toy_example(i, TOY_LABELS[i % 3]) for i in range(30)]
    val = [toy_example(100 + i, TOY_LABELS[(i + 1) % 3]) for i in range(12)]
    return train, val


def _toy_config(**changes: object) -> TrainConfig:
    """32 steps (8 epochs of 4 batches), validation every 16 steps."""
    settings: dict = dict(
        epochs=8, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, max_length=48, eval_every=16, patience=0
    )
    settings.update(changes)
    return TrainConfig(**settings)


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one thread, then restore the previous count.

    The toy model is so small that a second intra-op thread only adds
    synchronisation; on a busy 2-core machine that made training ~5x slower.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _one_thread_per_test() -> Iterator[None]:
    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def toy_data() -> tuple[list[TrainExample], list[TrainExample]]:
    """30 training and 12 validation examples, balanced over the three labels."""
    return _toy_data()


@pytest.fixture(scope="session")
def toy_config() -> Callable[..., TrainConfig]:
    """Factory for the toy TrainConfig; keyword arguments change fields."""
    return _toy_config


@pytest.fixture(scope="session")
def make_evidence() -> Callable[[str, int, str, Label], Evidence]:
    """Evidence(SentenceId(page, line), toy sentence about ``subject`` for ``label``)."""
    return lambda page, line, subject, label: Evidence(SentenceId(page, line), toy_sentence(subject, label))


@pytest.fixture(scope="session")
def trained(tiny_base: Path, tmp_path_factory: pytest.TempPathFactory):
    """The toy classifier, trained once per session: (TrainResult, out_dir)."""
    from verifier.train import train_verifier

    train, val = _toy_data()
    out_dir = tmp_path_factory.mktemp("trained")
    with one_torch_thread():
        result = train_verifier(train, val, _toy_config(), str(tiny_base), out_dir, progress=False)
    return result, out_dir
