"""The NLI classifier run by ONNX Runtime instead of PyTorch (``verifier.runtime: onnx``).

The checkpoint is exported once with PyTorch's ``torch.export``-based ONNX exporter (dynamic batch
and sequence length) and run by ONNX Runtime on the CPU in float32.  The arithmetic is the same as
PyTorch's, fused differently: probabilities agree with PyTorch's to about 1e-7 (``tests/verifier/
test_onnx_runtime.py``), so labels agree but for exact ties, and pairs are read faster on a CPU
(docs/service.md has the measurement).  The exported file is kept in the cache, named from
everything its graph depends on (:func:`export_key`), and reused by every later load.

Needs the ``onnx`` extra (``pip install 'garag[onnx]'``: onnxruntime, onnx, onnxscript).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import warnings
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

# Bump when the export recipe changes (inputs, opset, optimisation): older files are not reused.
EXPORT_VERSION = 1
OPSET = 18
INSTALL_HINT = "verifier.runtime: onnx needs the onnx extra: pip install 'garag[onnx]'"
_MODULES = ("onnxruntime", "onnx", "onnxscript")


def check_installed() -> None:
    """Raise one line naming the extra when ONNX Runtime or the exporter's modules are missing.

    Raises:
        ImportError: a module of the ``onnx`` extra cannot be imported.
    """
    import importlib

    for module in _MODULES:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ImportError(f"{INSTALL_HINT} ({module}: {e})") from None


def export_key(identity: Hashable) -> str:
    """The exported file's name for a checkpoint: a hash of its identity (files, sizes and times,
    :func:`verifier.pair_memory.checkpoint_identity`), the exporter's versions and the recipe's."""
    import onnxscript
    import torch
    import transformers

    parts = [repr(identity), torch.__version__, transformers.__version__, onnxscript.__version__, OPSET]
    parts.append(EXPORT_VERSION)
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]
    return f"nli-{digest}.onnx"


def export_classifier(model: Any, tokenizer: Any) -> bytes:
    """The sequence classifier ``model`` (float32, CPU, eval mode) as a serialized ONNX model whose
    inputs are the tokenizer's tensors for a batch of pairs and whose output is ``logits``."""
    import torch

    sample = tokenizer(
        ["A premise of a few words.", "Another premise, a little longer than the first one."],
        ["A claim.", "Another claim of more words."],
        padding=True,
        return_tensors="pt",
    )
    names = list(sample.keys())
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    with warnings.catch_warnings():  # the exporter's notes on its own internals
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model,
            (),
            kwargs={k: sample[k] for k in names},
            input_names=names,
            output_names=["logits"],
            dynamic_shapes={k: {0: batch, 1: length} for k in names},
            opset_version=OPSET,
            dynamo=True,
            optimize=True,
            verbose=False,
        )
    return program.model_proto.SerializeToString()


def exported(model: Any, tokenizer: Any, identity: Hashable, export_dir: Path | None) -> bytes | Path:
    """The exported classifier: a file in ``export_dir`` (made on first use, then reused), or the
    serialized model itself where ``export_dir`` is None."""
    path = export_dir / export_key(identity) if export_dir is not None else None
    if path is not None and path.is_file():
        return path
    started = time.time()
    data = export_classifier(model, tokenizer)
    logger.info(
        "NLI classifier exported to ONNX in %.1fs%s", time.time() - started, f" ({path})" if path else ""
    )
    if path is None:
        return data
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # a reader never sees half a file
    return path


class OnnxClassifier:
    """An ONNX Runtime session over an exported classifier, called like the PyTorch model's forward
    pass on a tokenised batch, returning the logits as a NumPy array.

    Args:
        model: the exported model, a file or its bytes (:func:`exported`).
        threads: intra-op threads (PyTorch's count, so both runtimes use the CPUs alike).
    """

    def __init__(self, model: bytes | Path, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        source = str(model) if isinstance(model, Path) else model
        self.session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def logits(self, encoding: Any) -> np.ndarray:
        """``(batch, labels)`` float32 logits for a tokenised batch (a ``BatchEncoding`` of tensors)."""
        feed = {name: encoding[name].numpy() for name in self.inputs}
        return self.session.run(["logits"], feed)[0]
