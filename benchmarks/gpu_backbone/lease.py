"""Stage a backbone training for a lent GPU machine whose calls carry at most 64 MiB each.

Every device call carries the whole working tree (about 28 MiB of tracked files here) plus the
folders it names, so 418 MiB of all-mpnet-base-v2 must travel as int8 + xz chunks (93 MiB,
``transport.py``) spread over several calls, each copying its share to /root/x on the machine,
which keeps it while warm (30 s after a call).  This script does the bookkeeping:

``pairs RAW --family MODEL_FOLDER=NAME ... --out DATA_DIR``
    From the pairs that ``GPAIRS=record GPAIRS_FILE=RAW pairs.py evaluate`` wrote (one JSON line
    per scored pair, tagged with the verifier folder), write DATA_DIR/pairs-NAME.jsonl.gz with each distinct
    (premise, claim) once, and print the counts (check them: a smoke test's data holds 50-100).
``stage BACKBONE_DIR DATA_DIR``
    Pack the backbone (chunks of 33,000,000 bytes), and put the chunks, its config files,
    DATA_DIR's files, the wheels the machine lacks (pydantic; ``--wheels DIR``) and
    ``device.sh`` into ignored folders ``.gpu1``, ``.gpu2``, ... of at most ``--budget`` bytes
    each, with the sha256 of every file; then print the device calls to make, in order: all but
    the last only copy, the last runs ``device.sh`` (train_on_device.py with the environment
    given to it, e.g. ``ALL2=1 V2=...``).

    python benchmarks/gpu_backbone/lease.py pairs /tmp/pairs-raw.jsonl \\
        --family verifier-f482df3bfd3dd676=joint --family verifier-b0424bf1807375cf=default --out /tmp/D
    python benchmarks/gpu_backbone/lease.py stage <cache>/backbones/all-mpnet-base-v2 /tmp/D --wheels /tmp/W

(DATA_DIR and the wheels outside the repository, or in an ignored folder: every call carries the
rest.)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from garag.artifacts import file_sha256  # noqa: E402

CALL_LIMIT = 64 * 1024 * 1024
CHUNK = 33_000_000
DEVICE_SCRIPT = Path(__file__).resolve().parent / "device.sh"


def pairs(raw: Path, families: dict[str, str], out: Path) -> dict[str, int]:
    """Distinct (premise, claim) pairs per family, written as pairs-<family>.jsonl.gz."""
    seen: dict[str, set] = {name: set() for name in families.values()}
    tags: Counter = Counter()
    with raw.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            try:
                r = json.loads(line.decode("utf-8"))
                tag, p, c = r["m"], r["p"], r["c"]
                if not all(isinstance(x, str) for x in (tag, p, c)):
                    raise TypeError("m, p and c must be strings")
            except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
                raise SystemExit(f"{raw}:{n}: not a recorded pair ({type(e).__name__}: {e})") from None
            tags[tag] += 1
            if tag in families:
                seen[families[tag]].add((p, c))
    unknown = sorted(set(tags) - set(families))
    if unknown:
        print(f"pairs of other verifiers, left out: {unknown}", file=sys.stderr)
    empty = [name for name, got in seen.items() if not got]
    if empty:
        raise SystemExit(f"{raw}: no pair recorded for {empty} (tags seen: {sorted(tags)})")
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, got in seen.items():
        tmp = out / f".pairs-{name}.jsonl.gz.tmp"
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            for p, c in sorted(got):
                f.write(json.dumps({"p": p, "c": c}) + "\n")
        tmp.replace(out / f"pairs-{name}.jsonl.gz")
        counts[name] = len(got)
    return counts


def tree_bytes(repo: Path) -> int:
    """Bytes of the tracked files and the untracked, not ignored ones: what every call carries."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    paths = [repo / os.fsdecode(name) for name in listed if name]
    return sum(p.stat().st_size for p in paths if p.is_file())


def exclude_file(repo: Path) -> Path:
    """The repository's info/exclude (also in a worktree, whose .git is a file)."""
    out = subprocess.run(
        ["git", "rev-parse", "--git-path", "info/exclude"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    path = Path(out) if Path(out).is_absolute() else repo / out
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def ignore(repo: Path, names: list[str]) -> None:
    """Add ``/name/`` lines to info/exclude (kept as it is otherwise)."""
    exclude = exclude_file(repo)
    lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
    new = [f"/{n}/" for n in names if f"/{n}/" not in lines]
    if new:
        exclude.write_text("\n".join(lines + new) + "\n", encoding="utf-8")


def stage(backbone: Path, data: Path, wheels: Path | None, repo: Path, budget: int | None) -> list[Path]:
    """Fill .gpu1, .gpu2, ... and return them; each fits one call beside the working tree."""
    import transport

    stale = sorted(
        p for p in repo.glob(".gpu*") if p.is_dir() and (p.name[4:].isdigit() or p.name == ".gpu-pack")
    )
    ignore(repo, [p.name for p in stale] + [".gpu-pack"])  # before anything is written
    for p in stale:  # an earlier stage's folders, so that only this stage's are left
        shutil.rmtree(p)
    if budget is None:
        budget = CALL_LIMIT - tree_bytes(repo) - 2 * 1024 * 1024  # a margin for files added later
    budget -= 64 * 1024  # sums.txt and device.sh go into the last folder
    if budget < CHUNK + 1024 * 1024:
        raise SystemExit(f"{budget} bytes left per call beside the working tree: less than one chunk")
    # (file, path under /root/x); the weights' chunks are added after packing
    items = [(p, f"configs/{p.relative_to(backbone)}") for p in sorted(backbone.rglob("*")) if p.is_file()]
    items = [(p, dest) for p, dest in items if Path(dest).name != "model.safetensors"]
    items += [(p, f"data/{p.name}") for p in sorted(data.iterdir()) if p.is_file()]
    if wheels is not None:
        items += [(p, f"whl/{p.name}") for p in sorted(wheels.glob("*.whl"))]
    too_big = [str(p) for p, _ in items if p.stat().st_size > budget]
    if too_big:
        raise SystemExit(f"more than one call carries ({budget} bytes): {too_big}")
    work = repo / ".gpu-pack"
    try:
        transport.pack(backbone, work, CHUNK)
        items += [(p, p.name) for p in sorted(work.glob("model-int8.xz.*"))]
        items.sort(key=lambda it: -it[0].stat().st_size)  # largest first: the small ones fill the gaps
        bins: list[list[tuple[Path, str]]] = []
        sizes: list[int] = []
        for p, dest in items:
            size = p.stat().st_size
            for i, used in enumerate(sizes):
                if used + size <= budget:
                    bins[i].append((p, dest))
                    sizes[i] += size
                    break
            else:
                bins.append([(p, dest)])
                sizes.append(size)
        folders = [repo / f".gpu{i}" for i in range(1, len(bins) + 1)]
        ignore(repo, [f.name for f in folders])
        for folder, content in zip(folders, bins, strict=True):
            for p, dest in content:
                (folder / dest).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, folder / dest)
        sums = [f"{file_sha256(p)}  {dest}" for content in bins for p, dest in content]
        (folders[-1] / "sums.txt").write_text("\n".join(sums) + "\n", encoding="utf-8")
        shutil.copy2(DEVICE_SCRIPT, folders[-1] / "device.sh")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folders


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pairs")
    p.add_argument("raw", type=Path)
    p.add_argument("--family", action="append", required=True, metavar="MODEL_FOLDER=NAME")
    p.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("stage")
    s.add_argument("backbone", type=Path)
    s.add_argument("data", type=Path)
    s.add_argument("--wheels", type=Path, help="wheels to install there if its python lacks pydantic")
    s.add_argument("--budget", type=int, help="bytes per call besides the working tree (default: measured)")
    args = ap.parse_args()
    if args.cmd == "pairs":
        families = {}
        for spec in args.family:
            tag, sep, name = spec.partition("=")
            if not sep or not tag or not name or "/" in name or tag in families:
                raise SystemExit(
                    f"--family {spec!r}: expected MODEL_FOLDER=NAME, each folder once, no / in NAME"
                )
            families[tag] = name
        for name, n in pairs(args.raw, families, args.out).items():
            print(f"pairs-{name}.jsonl.gz: {n} distinct pairs")
        return
    folders = stage(args.backbone, args.data, args.wheels, ROOT, args.budget)
    print("device calls, in order (run each as soon as the previous returns: the machine stays 30 s):")
    for i, f in enumerate(folders):
        fresh = "rm -rf /root/x && mkdir -p /root/x && " if i == 0 else ""
        run = " && ALL2=1 V1=... V2=... OUT=$OUT bash /root/x/device.sh" if f == folders[-1] else ""
        print(f'  carry ["{f.name}"]: {fresh}cp -r {f.name}/. /root/x/{run}')


if __name__ == "__main__":
    main()
