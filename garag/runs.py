"""Run directories: one writer at a time (an OS file lock), and fingerprints of what a run was made from."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from garag.types import Claim

logger = logging.getLogger(__name__)

LOCK_FILE = ".garag.lock"


class RunBusyError(ValueError):
    """Another process holds the run directory's lock."""


def claims_fingerprint(claims: Sequence[Claim]) -> str:
    """sha256 over the claims' ids and texts, in order: a changed text, id or order changes it."""
    digest = hashlib.sha256()
    for c in claims:
        digest.update(json.dumps([c.id, c.text], ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def output_dir(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a directory to write into; an existing non-directory is an error naming the flag."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{flag} {out}: exists and is not a directory")
    return out


@contextmanager
def run_lock(directory: str | Path) -> Iterator[Path]:
    """Hold an exclusive lock on ``directory`` for one writer; a second one gets :class:`RunBusyError`.

    The lock is an ``flock`` on ``<directory>/.garag.lock``: the OS releases it when the holder
    exits, killed or not, so a crashed run never leaves the directory locked.
    """
    out = output_dir(directory)
    out.mkdir(parents=True, exist_ok=True)
    fh = open(out / LOCK_FILE, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise RunBusyError(
                f"{out}: another garag run ({holder}) is writing here; wait for it or use another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        fh.flush()
        yield out
    finally:
        fh.close()  # closing releases the flock


def set_aside(paths: Sequence[Path], together: bool = False) -> list[Path]:
    """Rename existing ``paths`` to ``<name>.stale-<time><suffix>`` (nothing computed is deleted), or
    with ``together`` move them, names kept, into ``stale-<time>/`` beside the first of them (so a
    run directory's outputs stay one run directory there)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    existing = [p for p in paths if p.exists()]
    if together and existing:
        folder = existing[0].parent / f"stale-{stamp}"
        folder.mkdir(exist_ok=True)
        for p in existing:
            os.replace(p, folder / p.name)
        return [folder]
    moved = []
    for p in existing:
        target = p.with_name(f"{p.stem}.stale-{stamp}{p.suffix}")
        os.replace(p, target)
        moved.append(target)
    return moved


def changed_keys(previous: dict, identity: dict, prefix: str = "") -> tuple[list[str], list[str]]:
    """Keys of ``identity`` whose values differ from ``previous``, and keys ``previous`` does not
    record; dicts found on both sides are compared key by key (``a.b``)."""
    changed, unknown = [], []
    for key, value in identity.items():
        if key not in previous:
            unknown.append(prefix + key)
        elif isinstance(value, dict) and isinstance(previous[key], dict):
            c, u = changed_keys(previous[key], value, f"{prefix}{key}.")
            changed += c
            unknown += u
        elif previous[key] != value:
            changed.append(prefix + key)
    return changed, unknown


def check_identity(
    run_json: Path,
    identity: dict,
    force_new: bool,
    outputs: Sequence[Path],
    what: str,
    hint: str,
    together: bool = False,
) -> None:
    """Refuse to resume a run that ``run_json`` records as made from other settings or inputs, or
    with ``force_new`` set its ``outputs`` and ``run_json`` aside (nothing is deleted).

    Args:
        run_json: the earlier run's record (nothing to check when absent).
        identity: what the run about to start is made from.
        outputs: what the earlier run computed.
        what: how the refusal names those outputs ("a run", "predictions").
        hint: the other way out, after "use --force-new ...; or " ("another --out").
        together: set the outputs aside into one ``stale-<time>/`` folder (see :func:`set_aside`).

    Raises:
        ValueError: one line naming the directory and the keys that differ.
    """
    if not run_json.is_file():
        return
    previous = json.loads(run_json.read_text(encoding="utf-8"))
    changed, unknown = changed_keys(previous, identity)
    where = run_json.parent
    if unknown:  # written by an older garag: what it did not record cannot be checked
        logger.warning("%s: run.json does not record %s; resuming without checking them", where, unknown)
    if not changed:
        return
    if not force_new:
        raise ValueError(
            f"{where}: holds {what} made from other settings or inputs ({', '.join(changed)} differ); "
            f"use --force-new to set them aside and start again, or {hint}"
        )
    moved = set_aside([*outputs, run_json], together)
    logger.warning("%s: %s changed; earlier %s set aside as %s", where, changed, what, moved)
