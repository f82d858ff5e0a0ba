"""Carry a backbone to a GPU machine whose uploads are capped (64 MiB a call): int8 weights, xz, chunks.

``pack SRC_DIR OUT_DIR``: every 2-D weight matrix becomes int8 with one float32 scale per row
(symmetric, round to nearest), other tensors stay as they are; the safetensors file is xz-compressed
and split into chunks of ``--chunk`` bytes.  all-mpnet-base-v2: 418 MiB -> 105 MiB int8 -> 93 MiB xz;
sentence embeddings of the rebuilt model against the original: cosine 0.9988 at worst, 0.9993 on
average over 60 FEVER claims (a fine-tuning start, not a replacement for the original weights).

``unpack CHUNK... --configs SRC_DIR --out OUT_DIR``: join, decompress, rebuild float32 weights,
copy the other files of SRC_DIR (configs, tokenizer).

The way back (a device call returns at most 64 MiB, in files of at most 16 MiB): a model fine-tuned
there from such a rebuilt backbone travels as its change.  ``pack-delta BASE_DIR TUNED_DIR OUT_DIR``:
every 2-D matrix of the tuned model whose backbone counterpart exists (same name, or the name after
the model's prefix such as ``mpnet.``) becomes ``tuned - base`` as int8 with one float32 scale per
row; the change is about a hundredth of the weight, so the rounding error is too (measured on the
device against the tuned model's own probabilities); every other tensor travels whole.  Raw int8,
no compression (xz takes minutes there and saves little on int8 noise), split into chunks of
``--chunk`` bytes.  ``unpack-delta CHUNK... --base BASE_DIR --configs TUNED_FILES --out OUT_DIR``:
the same backbone rebuilt here (``unpack`` of the same chunks gives the same bytes) plus the change;
the delta file names the sha256 of the backbone file it was packed against, and another is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from garag.artifacts import file_sha256, write_file_atomic  # noqa: E402  (stdlib only: runs on the bare device too)

_SCALE = ".__scale"
_BASE = ".__base"  # the backbone tensor's name, as bytes
_BASE_SHA = "garag_delta_base_sha256"  # the delta file's metadata: the backbone file it is a change from


def _write_bytes(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary file and a rename: a killed run leaves no half chunk."""
    write_file_atomic(path, lambda tmp: tmp.write_bytes(data))


def pack(src: Path, out: Path, chunk: int) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    packed = {}
    for name, t in load_file(src / "model.safetensors").items():
        if t.dim() == 2 and t.numel() > 10_000:
            t = t.float()
            scale = t.abs().amax(dim=1).clamp(min=1e-12) / 127.0
            packed[name] = torch.round(t / scale[:, None]).clamp(-127, 127).to(torch.int8)
            packed[name + _SCALE] = scale
        else:
            packed[name] = t.contiguous()
    raw = out / "model-int8.safetensors"
    save_file(packed, raw)
    data = lzma.compress(raw.read_bytes(), preset=9)
    raw.unlink()
    for i in range(0, len(data), chunk):
        _write_bytes(out / f"model-int8.xz.{i // chunk:03d}", data[i : i + chunk])
    print(f"{len(data)} bytes in {-(-len(data) // chunk)} chunks; sha256 {hashlib.sha256(data).hexdigest()}")


def unpack(chunks: list[Path], configs: Path, out: Path) -> None:
    from safetensors.torch import load_file, save_file

    data = lzma.decompress(b"".join(p.read_bytes() for p in sorted(chunks)))
    out.mkdir(parents=True, exist_ok=True)
    raw = out / ".int8.safetensors"
    raw.write_bytes(data)
    packed = load_file(raw)
    raw.unlink()
    weights = {
        name: t.float() * packed[name + _SCALE][:, None] if name + _SCALE in packed else t
        for name, t in packed.items()
        if not name.endswith(_SCALE)
    }
    for f in configs.iterdir():
        if f.name not in ("model.safetensors", "desktop.ini"):
            (shutil.copytree if f.is_dir() else shutil.copy)(f, out / f.name)
    write_file_atomic(out / "model.safetensors", lambda tmp: save_file(weights, tmp))
    print(f"rebuilt {len(weights)} tensors in {out}")


def _base_name(name: str, base: dict) -> str | None:
    """The backbone tensor a tuned tensor continues: same name, or the name after its first part."""
    if name in base:
        return name
    rest = name.partition(".")[2]
    return rest if rest in base else None


def pack_delta_state(base: dict, tuned: dict) -> dict:
    """``tuned`` as int8 row-scaled changes from ``base`` where it can, the rest whole (float32)."""
    import torch

    packed = {}
    for name, t in tuned.items():
        b = _base_name(name, base)
        if b is not None and t.dim() == 2 and t.numel() > 10_000 and base[b].shape == t.shape:
            d = t.float() - base[b].float()
            scale = d.abs().amax(dim=1).clamp(min=1e-12) / 127.0
            packed[name] = torch.round(d / scale[:, None]).clamp(-127, 127).to(torch.int8)
            packed[name + _SCALE] = scale
            packed[name + _BASE] = torch.tensor(list(b.encode()), dtype=torch.uint8)
        else:
            packed[name] = t.float().contiguous() if t.is_floating_point() else t.contiguous()
    return packed


def unpack_delta_state(base: dict, packed: dict) -> dict:
    """The tuned weights back from ``base`` and ``pack_delta_state``'s output (float32)."""
    out = {}
    for name, t in packed.items():
        if name.endswith((_SCALE, _BASE)):
            continue
        if name + _SCALE in packed:
            b = bytes(packed[name + _BASE].tolist()).decode()
            out[name] = base[b].float() + t.float() * packed[name + _SCALE][:, None]
        else:
            out[name] = t
    return out


def pack_delta(
    base_dir: Path, tuned_dir: Path, out: Path, chunk: int, prefix: str = "delta-int8"
) -> list[Path]:
    from safetensors.torch import load_file, save

    base_file = base_dir / "model.safetensors"
    packed = pack_delta_state(load_file(base_file), load_file(tuned_dir / "model.safetensors"))
    data = save(packed, metadata={_BASE_SHA: file_sha256(base_file)})
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(0, len(data), chunk):
        paths.append(out / f"{prefix}.{i // chunk:03d}")
        _write_bytes(paths[-1], data[i : i + chunk])
    print(f"{len(data)} bytes in {len(paths)} chunks; sha256 {hashlib.sha256(data).hexdigest()}")
    return paths


def unpack_delta(
    chunks: list[Path], base_dir: Path, configs: Path, out: Path, unchecked_base: bool = False
) -> None:
    from safetensors.torch import load, load_file, save_file

    data = b"".join(p.read_bytes() for p in sorted(chunks))
    print(f"{len(data)} bytes joined; sha256 {hashlib.sha256(data).hexdigest()}")
    try:
        size = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + size])
    except ValueError as e:
        raise SystemExit(f"{chunks[0].parent}: the chunks do not join into a delta file ({e})") from None
    base_file = base_dir / "model.safetensors"
    want, got = (header.get("__metadata__") or {}).get(_BASE_SHA), file_sha256(base_file)
    if want is None and not unchecked_base:
        raise SystemExit(
            f"{chunks[0].parent}: the delta names no backbone sha256 (packed before transport.py recorded"
            " it); --unchecked-base rebuilds it on the given backbone anyway"
        )
    if want is not None and want != got:  # another backbone would give other weights silently
        raise SystemExit(f"{base_file}: sha256 {got[:12]}..., but the change was packed against {want}")
    weights = unpack_delta_state(load_file(base_file), load(data))
    out.mkdir(parents=True, exist_ok=True)
    for f in configs.iterdir():
        if f.name != "model.safetensors" and f.is_file():
            shutil.copy(f, out / f.name)
    meta = {"format": "pt"}
    write_file_atomic(out / "model.safetensors", lambda tmp: save_file(weights, tmp, metadata=meta))
    print(f"rebuilt {len(weights)} tensors in {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("src", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--chunk", type=int, default=52_000_000)
    u = sub.add_parser("unpack")
    u.add_argument("chunks", type=Path, nargs="+")
    u.add_argument("--configs", type=Path, required=True)
    u.add_argument("--out", type=Path, required=True)
    pd = sub.add_parser("pack-delta")
    pd.add_argument("base", type=Path)
    pd.add_argument("tuned", type=Path)
    pd.add_argument("out", type=Path)
    pd.add_argument("--chunk", type=int, default=16_000_000)
    ud = sub.add_parser("unpack-delta")
    ud.add_argument("chunks", type=Path, nargs="+")
    ud.add_argument("--base", type=Path, required=True)
    ud.add_argument("--configs", type=Path, required=True, help="the tuned model's folder of small files")
    ud.add_argument("--out", type=Path, required=True)
    ud.add_argument("--unchecked-base", action="store_true", help="accept a delta that names no backbone")
    args = ap.parse_args()
    if args.cmd == "pack":
        pack(args.src, args.out, args.chunk)
    elif args.cmd == "unpack":
        unpack(args.chunks, args.configs, args.out)
    elif args.cmd == "pack-delta":
        pack_delta(args.base, args.tuned, args.out, args.chunk)
    else:
        unpack_delta(args.chunks, args.base, args.configs, args.out, args.unchecked_base)


if __name__ == "__main__":
    main()
