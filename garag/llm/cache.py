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
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from garag.artifacts import sqlite_cache_errors
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

    Each reply has a CRC-32 of its key, text and token counts (table ``reply_crc``, apart from
    the replies so that a garag from before it can still read and write them): a reply that fails
    it is a miss, deleted (the model is asked again), and a file SQLite cannot read is named in
    the error.  A reply without a checksum is read unchecked.

    Args:
        path: the database file (created with its directory).

    Raises:
        ArtifactError: the file is not a readable SQLite database (ValueError: one it cannot use now).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._sqlite_errors():
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, text TEXT,"
                    " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)"
                )
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS reply_crc (key TEXT PRIMARY KEY, crc INTEGER NOT NULL)"
                )
                self._db.commit()
            except BaseException:
                self._db.close()
                raise

    def _sqlite_errors(self) -> AbstractContextManager[None]:
        return sqlite_cache_errors(self.path, "LLM reply cache", "delete it (the model is then asked again)")

    def get(self, key: str) -> ChatReply | None:
        """The cached reply, or None (also for a reply that fails its checksum: deleted, logged)."""
        with self._sqlite_errors(), self._lock:
            row = self._db.execute(
                "SELECT r.text, r.prompt_tokens, r.completion_tokens, c.crc FROM replies r"
                " LEFT JOIN reply_crc c ON c.key = r.key WHERE r.key = ?",
                (key,),
            ).fetchone()
            if row is None:
                return None
            reply = _reply(row[:3])
            if reply is not None and (row[3] is None or _reply_crc(key, reply) == row[3]):
                return reply
            self._db.execute("DELETE FROM replies WHERE key = ?", (key,))
            self._db.execute("DELETE FROM reply_crc WHERE key = ?", (key,))
            self._db.commit()
        logger.warning(
            "%s: the cached reply %s fails its checksum (damaged); asking again", self.path, key[:12]
        )
        return None

    def put(self, key: str, model: str, reply: ChatReply) -> None:
        with self._sqlite_errors(), self._lock:
            self._db.execute(
                # columns named: a cache that a garag of commits ce95244-b73d332 made has a 7th, crc
                "INSERT OR REPLACE INTO replies (key, model, text, prompt_tokens, completion_tokens, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, model, reply.text, reply.prompt_tokens, reply.completion_tokens, time.time()),
            )
            self._db.execute("INSERT OR REPLACE INTO reply_crc VALUES (?, ?)", (key, _reply_crc(key, reply)))
            self._db.commit()

    def __len__(self) -> int:
        with self._sqlite_errors(), self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _reply(row: tuple) -> ChatReply | None:
    """A stored ``(text, prompt_tokens, completion_tokens)`` as a reply; None when a cell has the
    wrong type (a damaged row)."""
    text, prompt_tokens, completion_tokens = row
    if (
        not isinstance(text, str)
        or not isinstance(prompt_tokens, int)
        or not isinstance(completion_tokens, int)
    ):
        return None
    return ChatReply(text, prompt_tokens, completion_tokens)


def _reply_crc(key: str, reply: ChatReply) -> int:
    """The checksum stored with a reply: CRC-32 over its key, text and token counts."""
    blob = json.dumps(
        [key, reply.text, int(reply.prompt_tokens), int(reply.completion_tokens)], ensure_ascii=False
    )
    return zlib.crc32(blob.encode("utf-8"))
