"""Static sentence encoders (retrievers/static_encoder.py) through SentenceEncoder: model2vec distilled
from the real bundled MiniLM (once per module, ~20-40 s on 2 cores) and the WordLlama table of the
real wordllama wheel, in a real FAISS index over the tiny fixture corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("model2vec", reason="static encoders need the scale extra (pip install 'garag[scale]')")
pytestmark = pytest.mark.slow  # the module distils MiniLM once: ~40-75 s of CPU on this 2-core machine

from app.cli import main  # noqa: E402
from garag.config import DenseConfig  # noqa: E402
from garag.types import SentenceId  # noqa: E402
from garag.wiki import corpus_fingerprint  # noqa: E402
from retrievers.base import IndexContext  # noqa: E402
from retrievers.dense import FaissDenseRetriever  # noqa: E402
from retrievers.embeddings import EmbeddingCache, SentenceEncoder  # noqa: E402
from retrievers.static_encoder import is_model2vec_dir, parse_static, pca_sif  # noqa: E402

from .test_embeddings import TEXTS  # noqa: E402


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("static-cache")


@pytest.fixture(scope="module")
def m2v(cache: Path) -> SentenceEncoder:
    """model2vec-minilm, distilled into the module's cache dir."""
    return SentenceEncoder("model2vec-minilm", device="cpu", cache_dir=cache).load()


def test_distilled_model_encodes_unit_vectors_that_rank_by_meaning(m2v: SentenceEncoder, cache: Path):
    vecs = m2v.encode(TEXTS)
    assert vecs.shape == (4, 256) and vecs.dtype == np.float32 and m2v.dim == 256
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    query = m2v.encode(["Which band was formed in Liverpool?"])[0]
    assert int(np.argmax(vecs @ query)) == 0
    assert float(vecs[2] @ query) < float(vecs[0] @ query) - 0.2
    # kept in the cache dir under the source model's identity, as a model2vec directory
    model_dir = Path(m2v.model)
    assert model_dir.parent == cache / "static-models" and is_model2vec_dir(model_dir)
    assert json.loads((model_dir / "config.json").read_text())["hidden_dim"] == 256
    assert m2v.encode([]).shape == (0, 256)


def test_encoding_is_deterministic_and_the_stored_model_gives_the_same_vectors(m2v: SentenceEncoder):
    first = m2v.encode(TEXTS)
    assert np.array_equal(first, m2v.encode(TEXTS))
    assert np.array_equal(first[1:2], m2v.encode(TEXTS[1:2]))  # a row does not depend on its batch
    again = SentenceEncoder(m2v.model, device="cpu").load()  # the directory, as a local model2vec model
    assert again.static is not None and again.static.kind == "model2vec_dir"
    assert again.identity == m2v.identity
    assert np.array_equal(first, again.encode(TEXTS))


def test_an_encoder_worker_uses_the_drivers_static_model_and_refuses_another(m2v: SentenceEncoder):
    from retrievers.embeddings import EncoderWorker

    # what `garag index --engine ray` hands its encoder actors: the resolved model and its identity
    worker = EncoderWorker(m2v.model, "cpu", 128, m2v.identity)
    assert np.array_equal(worker.encode(TEXTS), m2v.encode(TEXTS))
    with pytest.raises(ValueError, match="identity"):
        EncoderWorker("wordllama", "cpu", 128, m2v.identity).encode(TEXTS)


def test_pca_sif_is_a_pure_deterministic_projection():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 32)).astype(np.float32)
    a, b = pca_sif(x, 8), pca_sif(x.copy(), 8)
    assert a.shape == (500, 8) and np.array_equal(a, b)
    # all components: an orthogonal rotation of the centred rows, each row scaled by its SIF weight
    zipf = 1.0 / np.arange(2, 502)
    weights = 1e-4 / (1e-4 + zipf / zipf.sum())
    rotated = pca_sif(x, 32) / weights[:, None]
    centred = x - x.mean(axis=0)
    assert np.allclose(np.linalg.norm(rotated, axis=1), np.linalg.norm(centred, axis=1), rtol=1e-4)
    assert weights[0] < 0.01 and weights[-1] > 0.2  # frequent (low-rank) tokens weigh least


def test_each_encoder_has_its_own_identity_and_cache(m2v: SentenceEncoder, cache: Path):
    minilm = SentenceEncoder("minilm", device="cpu")
    wordllama = SentenceEncoder("wordllama")
    identities = {m2v.identity, minilm.identity, wordllama.identity}
    assert len(identities) == 3 and all(len(i) == 16 for i in identities)
    paths = {EmbeddingCache(e, cache).path for e in (m2v, minilm, wordllama)}
    assert len(paths) == 3


def test_wordllama_is_the_wheels_table_mean_pooled():
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from retrievers.static_encoder import wordllama_files

    enc = SentenceEncoder("wordllama").load()
    vecs = enc.encode(TEXTS)
    assert vecs.shape == (4, 256) and enc.model == "wordllama"
    weights, tokenizer_file = wordllama_files()
    table = load_file(str(weights))["embedding.weight"].astype(np.float32)
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    for text, vec in zip(TEXTS, vecs, strict=True):
        ref = table[tokenizer.encode(text, add_special_tokens=False).ids].mean(axis=0)
        assert np.allclose(vec, ref / np.linalg.norm(ref), atol=1e-5)


def test_dense_index_built_from_the_config_name_retrieves_the_right_sentence(
    m2v: SentenceEncoder, cache: Path, tiny_store, tiny_corpus: Path
):
    # no encoder passed: the retriever makes its own from dense.model, and its embedding cache tells it
    # where the distilled model is (the module's cache dir, where the fixture distilled it)
    ctx = IndexContext(tiny_store, cache, corpus_fingerprint(tiny_corpus), progress=False)
    r = FaissDenseRetriever(DenseConfig(model="model2vec-minilm", use_gpu="no"), ctx)
    path = r.build()
    assert r.encoder.identity == m2v.identity and r.dim == 256
    assert r.settings()["model_identity"] == m2v.identity
    hits = r.retrieve("Snowpiercer is a science fiction film.", k=3)
    assert hits[0].sentence == SentenceId("Snowpiercer", 0)
    beatles = r.retrieve("The Beatles were a rock band from Liverpool.", k=3)
    assert SentenceId("The_Beatles", 0) in {h.sentence for h in beatles}
    # the MiniLM index of the same corpus is another artifact
    minilm = FaissDenseRetriever(DenseConfig(use_gpu="no"), ctx)
    assert minilm.settings()["model_identity"] != r.settings()["model_identity"]
    assert path.name.startswith("dense-")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("model2vec-mpnet", "dense.model: unknown static encoder 'model2vec-mpnet' (known: model2vec-minilm"),
        ("model2vec-minilm-999", "dense.model: 'model2vec-minilm-999' asks for 999 dimensions"),
        ("wordllama-xl", "dense.model: unknown static encoder 'wordllama-xl'"),
    ],
)
def test_bad_names_give_one_line(name: str, message: str):
    with pytest.raises(ValueError) as err:
        SentenceEncoder(name)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_cli_names_a_bad_encoder_in_one_line(
    tiny_corpus: Path, tiny_claims: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    argv = ["index", "--dataset", "custom", "--no-progress"]
    for kv in (
        f"data.corpus={tiny_corpus}",
        f"data.claims={tiny_claims}",
        f"paths.cache_dir={tmp_path}",
        "retrieval.retrievers=[dense]",
        "dense.model=model2vec-large",
    ):
        argv += ["--set", kv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("garag: error: dense.model: unknown static encoder 'model2vec-large'")


def test_a_sentence_transformers_directory_is_not_a_static_model(tmp_path: Path):
    from retrievers.embeddings import resolve_model

    assert parse_static(resolve_model("minilm")) is None
    (tmp_path / "config.json").write_text('{"model_type": "model2vec"}')
    assert parse_static(str(tmp_path)).kind == "model2vec_dir"
