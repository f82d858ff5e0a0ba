"""Corpus fingerprints, memoised by file size and mtime so large dumps are hashed once."""

from __future__ import annotations

import json
import os
from pathlib import Path

from garag.artifacts import write_json_atomic
from garag.wiki import corpus_files, corpus_fingerprint


def cached_fingerprint(corpus: str | Path, cache_dir: str | Path) -> str:
    """sha256 of the corpus, reusing a stored value while no file's size or mtime changed."""
    files = corpus_files(corpus)
    key = json.dumps([[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files])
    memo_path = Path(cache_dir) / "fingerprints.json"
    memo: dict = {}
    if memo_path.is_file():
        try:
            memo = json.loads(memo_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            memo = {}
    if key in memo:
        return memo[key]
    value = corpus_fingerprint(corpus)
    memo[key] = value
    os.makedirs(cache_dir, exist_ok=True)
    write_json_atomic(memo_path, memo)
    return value
