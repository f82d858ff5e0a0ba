"""``benchmarks/gpu_backbone/transport.py``'s way back: a model fine-tuned on a lent GPU travels as
int8 changes from the backbone it started from, and is rebuilt here within the rounding bound."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
from safetensors.torch import load, save

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "transport", ROOT / "benchmarks" / "gpu_backbone" / "transport.py"
)
assert _spec is not None and _spec.loader is not None
transport = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("transport", transport)
_spec.loader.exec_module(transport)


def _models():
    g = torch.Generator().manual_seed(0)
    base = {
        "encoder.w": torch.randn(300, 64, generator=g),
        "encoder.b": torch.randn(64, generator=g),
        "pooler.w": torch.randn(200, 64, generator=g),
    }
    change = 0.01 * torch.randn(300, 64, generator=g)
    tuned = {
        "mpnet.encoder.w": base["encoder.w"] + change,  # the classification model's prefix
        "mpnet.encoder.b": base["encoder.b"] + 0.01,
        "classifier.weight": torch.randn(3, 64, generator=g),  # new: no backbone counterpart
        "mpnet.pooler.w": torch.randn(100, 64, generator=g),  # another shape: travels whole
    }
    return base, tuned, change


def test_the_rebuilt_weights_are_within_the_rounding_of_the_change():
    base, tuned, change = _models()
    packed = load(save(transport.pack_delta_state(base, tuned)))  # through the bytes that travel
    assert packed["mpnet.encoder.w"].dtype == torch.int8
    rebuilt = transport.unpack_delta_state(base, packed)
    assert set(rebuilt) == set(tuned)
    bound = change.abs().amax(dim=1, keepdim=True) / 254 + 1e-6  # half a step of each row's scale
    assert ((rebuilt["mpnet.encoder.w"] - tuned["mpnet.encoder.w"]).abs() <= bound).all()
    # without the backbone the change alone is far off: the base is really added back
    assert (rebuilt["mpnet.encoder.w"] - change).abs().max() > 1.0
    for name in ("mpnet.encoder.b", "classifier.weight", "mpnet.pooler.w"):
        assert packed[name].dtype == torch.float32
        assert torch.equal(rebuilt[name], tuned[name])


def test_pack_and_unpack_through_chunk_files(tmp_path):
    from safetensors.torch import load_file, save_file

    base, tuned, _ = _models()
    (tmp_path / "base").mkdir()
    (tmp_path / "tuned").mkdir()
    save_file(base, tmp_path / "base" / "model.safetensors")
    save_file(tuned, tmp_path / "tuned" / "model.safetensors")
    (tmp_path / "tuned" / "config.json").write_text("{}")
    chunks = transport.pack_delta(tmp_path / "base", tmp_path / "tuned", tmp_path / "ship", 10_000)
    assert len(chunks) > 2 and all(c.stat().st_size <= 10_000 for c in chunks)
    transport.unpack_delta(chunks[::-1], tmp_path / "base", tmp_path / "tuned", tmp_path / "out")
    rebuilt = load_file(tmp_path / "out" / "model.safetensors")
    assert (rebuilt["mpnet.encoder.w"] - tuned["mpnet.encoder.w"]).abs().max() < 1e-3
    assert (tmp_path / "out" / "config.json").read_text() == "{}"


def test_a_change_is_refused_against_another_backbone(tmp_path):
    import pytest
    from safetensors.torch import save_file

    base, tuned, _ = _models()
    for name, weights in (("base", base), ("tuned", tuned), ("other", {k: v + 1 for k, v in base.items()})):
        (tmp_path / name).mkdir()
        save_file(weights, tmp_path / name / "model.safetensors")
    chunks = transport.pack_delta(tmp_path / "base", tmp_path / "tuned", tmp_path / "ship", 10_000)
    with pytest.raises(SystemExit, match="the change was packed against"):
        transport.unpack_delta(chunks, tmp_path / "other", tmp_path / "tuned", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit, match="do not join into a delta file"):
        transport.unpack_delta(chunks[1:], tmp_path / "base", tmp_path / "tuned", tmp_path / "out")


def test_a_delta_without_its_backbone_sha_needs_unchecked_base(tmp_path):
    """A delta packed before transport.py recorded the backbone's sha256 is refused in one line;
    ``unchecked_base`` rebuilds it on the given backbone, and no temporary file is left behind."""
    import pytest
    from safetensors.torch import load_file, save_file

    base, tuned, _ = _models()
    for name, weights in (("base", base), ("tuned", tuned)):
        (tmp_path / name).mkdir()
        save_file(weights, tmp_path / name / "model.safetensors")
    (tmp_path / "ship").mkdir()
    old = tmp_path / "ship" / "delta-int8.000"
    old.write_bytes(save(transport.pack_delta_state(base, tuned)))  # no metadata: the old format
    with pytest.raises(SystemExit, match="names no backbone sha256.*--unchecked-base"):
        transport.unpack_delta([old], tmp_path / "base", tmp_path / "tuned", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    dirs = (tmp_path / "base", tmp_path / "tuned", tmp_path / "out")
    transport.unpack_delta([old], *dirs, unchecked_base=True)
    rebuilt = load_file(tmp_path / "out" / "model.safetensors")
    assert (rebuilt["mpnet.encoder.w"] - tuned["mpnet.encoder.w"]).abs().max() < 1e-3
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.safetensors"]
