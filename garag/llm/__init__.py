"""The only package that talks to a model: chat backends, response cache, accounting, structured replies.

Backends (``llama_cpp``, ``openai``) import their optional packages lazily, so
``import garag.llm`` works without the ``llm`` extra.
"""

from __future__ import annotations

from garag.llm.base import (
    ChatMessage,
    ChatModel,
    ChatReply,
    LLMError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from garag.llm.cache import ResponseCache, cache_key
from garag.llm.client import LLMClient, Structured
from garag.llm.stats import LLMStats, StageStats
from garag.llm.structured import extract_json, json_schema, parse_reply, repair_messages

__all__ = [
    "ChatMessage",
    "ChatModel",
    "ChatReply",
    "LLMClient",
    "LLMError",
    "LLMStats",
    "LLMTimeoutError",
    "LLMUnavailableError",
    "ResponseCache",
    "StageStats",
    "Structured",
    "cache_key",
    "extract_json",
    "json_schema",
    "parse_reply",
    "repair_messages",
]
