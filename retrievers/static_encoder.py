"""Static sentence encoders: a token-embedding table, mean-pooled over a sentence's tokens.

No transformer runs at encoding time, so a CPU core encodes thousands of sentences a second
(``benchmarks/results/fast_encoder.md``).  Three sources, all loaded as a model2vec ``StaticModel``:

* ``model2vec-minilm`` (``model2vec-minilm-<dims>``): distilled offline from the bundled
  all-MiniLM-L6-v2 with model2vec's recipe (each vocabulary token's MiniLM output, mean-pooled over
  ``[CLS] token [SEP]``; PCA to ``dims`` dimensions, 256 by default; Zipf/SIF weights), made once and
  kept in ``<cache dir>/static-models/`` under the source model's identity;
* ``wordllama``: the 256-d WordLlama table (Llama-2 tokenizer) that the ``wordllama`` wheel ships;
* a local model2vec directory (``config.json`` with ``"model_type": "model2vec"``).

Needs the ``model2vec`` package (``pip install 'garag[scale]'``); ``wordllama`` also needs the
``wordllama`` wheel for its files (its Python code is not imported).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

logger = logging.getLogger(__name__)

DISTILLED = "model2vec-minilm"
WORDLLAMA = "wordllama"
DEFAULT_PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4
_NAME = re.compile(rf"{DISTILLED}(?:-(\d+))?")
_UNUSED = re.compile(r"\[unused\d+\]")  # BERT's placeholder tokens, dropped as model2vec does
_RECIPE = "garag-model2vec-distill-v1"  # in the stored directory's name: a new recipe makes a new model
_DISTILL_BATCH = 1024
_WORDLLAMA_FILES = ("weights/l2_supercat_256.safetensors", "tokenizers/l2_supercat_tokenizer_config.json")
INSTALL_HINT = "pip install 'garag[scale]' (or pip install model2vec wordllama)"

StaticKind = Literal["distilled", "model2vec_dir", "wordllama"]


@dataclass(frozen=True)
class StaticSource:
    """A static encoder named by ``dense.model``.

    Attributes:
        kind: ``"distilled"`` (model2vec-minilm), ``"model2vec_dir"`` or ``"wordllama"``.
        name: the configured name.
        pca_dims: ``distilled`` only: output dimensions.
        path: ``model2vec_dir`` only: the directory.
    """

    kind: StaticKind
    name: str
    pca_dims: int = 0
    path: str = ""


def known_names() -> str:
    return f"{DISTILLED}, {DISTILLED}-<dims> (8..384), {WORDLLAMA}, or a model2vec directory"


def parse_static(name: str) -> StaticSource | None:
    """The static encoder ``name`` stands for, or None when it names a sentence-transformers model.

    Raises:
        ValueError: a ``model2vec-*`` or ``wordllama*`` name that is not one of ours (one line).
    """
    if name == WORDLLAMA:
        return StaticSource("wordllama", name)
    match = _NAME.fullmatch(name)
    if match:
        dims = int(match.group(1) or DEFAULT_PCA_DIMS)
        if not 8 <= dims <= 384:
            raise ValueError(
                f"dense.model: {name!r} asks for {dims} dimensions; MiniLM's static model has 8..384"
            )
        return StaticSource("distilled", name, pca_dims=dims)
    path = Path(name).expanduser()
    if path.is_dir() and is_model2vec_dir(path):
        return StaticSource("model2vec_dir", name, path=str(path.resolve()))
    if name.startswith(("model2vec", WORDLLAMA)):
        raise ValueError(f"dense.model: unknown static encoder {name!r} (known: {known_names()})")
    return None


def is_model2vec_dir(path: Path) -> bool:
    """Whether ``path`` holds a model2vec model (its ``config.json`` says ``model_type: model2vec``)."""
    config = path / "config.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "model2vec"
    except (OSError, ValueError, AttributeError):
        return False


def require_model2vec() -> None:
    """Raise a one-line ImportError with the install hint when model2vec is missing."""
    if importlib.util.find_spec("model2vec") is None:
        raise ImportError(f"static sentence encoders need the Python package 'model2vec': {INSTALL_HINT}")


def wordllama_files() -> tuple[Path, Path]:
    """The WordLlama weights and tokenizer files inside the installed ``wordllama`` wheel.

    Raises:
        ImportError: the wheel is not installed, or lacks the files.
    """
    spec = importlib.util.find_spec(WORDLLAMA)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"dense.model=wordllama needs the Python package 'wordllama': {INSTALL_HINT}")
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = (root / f for f in _WORDLLAMA_FILES)
    if not weights.is_file() or not tokenizer.is_file():
        raise ImportError(f"{root}: the wordllama wheel has no {_WORDLLAMA_FILES[0]}; reinstall it")
    return weights, tokenizer


def distilled_dir(cache_dir: str | Path, source_identity: str, pca_dims: int) -> Path:
    """Where the model distilled from a source model (by its identity) is kept."""
    return Path(cache_dir) / "static-models" / f"{DISTILLED}-{source_identity}-pca{pca_dims}-{_RECIPE}"


def ensure_distilled(out: Path, source_model: str, pca_dims: int) -> Path:
    """Distil ``source_model`` into ``out`` unless a complete model is there already.

    The model is written into a temporary directory beside ``out`` and renamed, so a reader never
    sees half a model; two processes distilling at once both succeed and one result is kept.
    """
    if (out / "config.json").is_file():
        return out
    require_model2vec()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        started = time.time()
        distill(source_model, pca_dims).save_pretrained(tmp)
        try:
            os.rename(tmp, out)
        except OSError:
            if not (out / "config.json").is_file():
                raise
        logger.info("distilled %s into %s in %.1fs", source_model, out, time.time() - started)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def token_vectors(source_model: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """The source model's fast tokenizer, its token ids kept (all but ``[unusedN]``) and each kept
    token's output vector: the model's last hidden states over ``[CLS] token [SEP]``, averaged."""
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(source_model, device="cpu")
    model, hf_tok = st[0].auto_model.eval(), st.tokenizer
    tokenizer = hf_tok.backend_tokenizer
    vocab = tokenizer.get_vocab()
    kept = np.array(sorted(i for t, i in vocab.items() if not _UNUSED.fullmatch(t)), dtype=np.int64)
    out = np.zeros((len(kept), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for i in range(0, len(kept), _DISTILL_BATCH):
            ids = torch.from_numpy(kept[i : i + _DISTILL_BATCH])[:, None]
            cls = torch.full_like(ids, hf_tok.cls_token_id)
            sep = torch.full_like(ids, hf_tok.sep_token_id)
            batch = torch.cat([cls, ids, sep], dim=1)
            hidden = model(
                input_ids=batch, attention_mask=torch.ones_like(batch), token_type_ids=torch.zeros_like(batch)
            ).last_hidden_state
            out[i : i + len(ids)] = hidden.float().mean(dim=1).numpy()
    return tokenizer, kept, np.nan_to_num(out)


def pca_sif(vectors: np.ndarray, dims: int, sif: float = SIF_COEFFICIENT) -> np.ndarray:
    """model2vec's post-processing: PCA to ``dims`` (centred, eigenvectors of the covariance, each
    component's sign fixed by its largest score), then each row scaled by its SIF weight
    ``sif / (sif + p)``, ``p`` a Zipf probability by the row's rank (rows in vocabulary order)."""
    x = vectors.astype(np.float64)
    x -= x.mean(axis=0)
    eigvals, eigvecs = np.linalg.eigh((x.T @ x) / (len(x) - 1))
    components = eigvecs[:, ::-1][:, :dims]
    scores = x @ components
    signs = np.sign(scores[np.argmax(np.abs(scores), axis=0), np.arange(scores.shape[1])])
    scores *= np.where(signs == 0, 1.0, signs)
    inv_rank = 1.0 / np.arange(2, len(x) + 2)
    weights = sif / (sif + inv_rank / inv_rank.sum())
    return (scores * weights[:, None]).astype(np.float32)


def distill(source_model: str, pca_dims: int = DEFAULT_PCA_DIMS) -> Any:
    """A model2vec ``StaticModel`` distilled from a local sentence-transformers model (no hub).

    Tokens the source tokenizer never emits for text (``[unusedN]``) get zero vectors; the
    tokenizer is the source's own, so a sentence is split exactly as the source model splits it.
    """
    from model2vec import StaticModel

    tokenizer, kept, vecs = token_vectors(source_model)
    dims = min(pca_dims, vecs.shape[1])
    table = np.zeros((tokenizer.get_vocab_size(), dims), dtype=np.float32)
    table[kept] = pca_sif(vecs, dims)
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": Path(source_model).name,
        "apply_pca": dims,
        "sif_coefficient": SIF_COEFFICIENT,
        "hidden_dim": dims,
        "seq_length": 1000000,
        "normalize": True,
        "pooling": "mean",
        "garag_recipe": _RECIPE,
    }
    return StaticModel(
        vectors=table,
        tokenizer=tokenizer,
        config=config,
        normalize=True,
        base_model_name=Path(source_model).name,
    )


class StaticEmbedder:
    """A loaded static model: ``encode(texts)`` gives unit float32 rows (a text with no known
    token gives a zero row)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    @classmethod
    def load(cls, kind: StaticKind, path: str | Path) -> StaticEmbedder:
        """Load a model2vec directory (``distilled``, ``model2vec_dir``) or WordLlama's files."""
        require_model2vec()
        from model2vec import StaticModel

        if kind != "wordllama":
            return cls(StaticModel.from_pretrained(Path(path), normalize=True, force_download=False))
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        weights, tokenizer = wordllama_files()
        table = np.ascontiguousarray(load_file(str(weights))["embedding.weight"], dtype=np.float32)
        return cls(StaticModel(vectors=table, tokenizer=Tokenizer.from_file(str(tokenizer)), normalize=True))

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    def encode(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        # one thread here: parallelism is processes (Ray actors); tokenizers' own pool is left as is
        vecs = self.model.encode(
            texts, batch_size=batch_size, use_multiprocessing=False, normalize=False, show_progress_bar=False
        )
        out = np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
