"""Persistent SQLite cache of model replies.

The key covers everything that changes a reply: the model fingerprint (for
llama.cpp it holds the GGUF sha256), the messages, temperature, seed,
max_tokens and the response format (JSON schema).  nano-graphrag keys on
model + messages only, which returns stale replies when a setting changes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from garag.llm.base import ChatMessage, ChatReply

CACHE_VERSION = 1


def cache_key(
    model: str,
    messages: Sequence[ChatMessage],
    temperature: float,
    seed: int,
    max_tokens: int,
    schema: dict[str, Any] | None,
    prompt_sha: str = "",
    max_lines: int | None = None,
) -> str:
    """Hex sha256 over every input that changes a reply (``prompt_sha``: the prompt file's hash;
    ``max_lines``: for a reply cut at its line limit, which a whole reply's key leaves out)."""
    fields: dict[str, Any] = {
        "v": CACHE_VERSION,
        "model": model,
        "messages": [m.to_json() for m in messages],
        "temperature": float(temperature),
        "seed": int(seed),
        "max_tokens": int(max_tokens),
        "response_format": schema,
        "prompt": prompt_sha,
    }
    if max_lines is not None:
        fields["max_lines"] = int(max_lines)
    blob = json.dumps(fields, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Replies by key in one SQLite file; safe to share between threads of one process.

    Args:
        path: the database file (created with its directory).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, text TEXT,"
            " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)"
        )
        self._db.commit()

    def get(self, key: str) -> ChatReply | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens FROM replies WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else ChatReply(row[0], int(row[1]), int(row[2]))

    def put(self, key: str, model: str, reply: ChatReply) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?)",
                (key, model, reply.text, reply.prompt_tokens, reply.completion_tokens, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
