"""Persistent SQLite cache of model replies.

The key covers everything that changes a reply: the model fingerprint (for
llama.cpp it holds the GGUF sha256), the messages, temperature, seed,
max_tokens and the response format (JSON schema).  nano-graphrag keys on
model + messages only, which returns stale replies when a setting changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from garag.artifacts import add_sqlite_column, sqlite_cache_error
from garag.llm.base import ChatMessage, ChatReply

logger = logging.getLogger(__name__)

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

    Each row carries a CRC-32 of its key and reply: a row that fails it is a miss (the model is
    asked again and the row rewritten), and a file SQLite cannot read is named in the error.

    Args:
        path: the database file (created with its directory).

    Raises:
        ArtifactError: the file is not a readable SQLite database (ValueError: one it cannot use now).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # crc: NULL in rows a garag before the column wrote (those are read unchecked)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, text TEXT,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL, crc INTEGER)"
            )
            add_sqlite_column(self._db, "replies", "crc", "INTEGER")
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise self._damaged(exc) from None

    def _damaged(self, exc: sqlite3.DatabaseError) -> ValueError:
        return sqlite_cache_error(
            self.path, "LLM reply cache", exc, "delete it (the model is then asked again)"
        )

    def get(self, key: str) -> ChatReply | None:
        """The cached reply, or None (also for a row that fails its checksum: logged)."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT text, prompt_tokens, completion_tokens, crc FROM replies WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        if row is None:
            return None
        text, prompt_tokens, completion_tokens, crc = row
        if crc is not None and (
            not isinstance(text, str) or _reply_crc(key, text, prompt_tokens, completion_tokens) != crc
        ):
            logger.warning(
                "%s: the cached reply %s fails its checksum (damaged); asking again", self.path, key[:12]
            )
            return None
        return ChatReply(text, int(prompt_tokens), int(completion_tokens))

    def put(self, key: str, model: str, reply: ChatReply) -> None:
        crc = _reply_crc(key, reply.text, reply.prompt_tokens, reply.completion_tokens)
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO replies (key, model, text, prompt_tokens, completion_tokens,"
                    " created, crc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key, model, reply.text, reply.prompt_tokens, reply.completion_tokens, time.time(), crc),
                )
                self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _reply_crc(key: str, text: str, prompt_tokens: int, completion_tokens: int) -> int:
    """The checksum stored with a reply: CRC-32 over its key, text and token counts."""
    blob = json.dumps([key, text, int(prompt_tokens), int(completion_tokens)], ensure_ascii=False)
    return zlib.crc32(blob.encode("utf-8"))
