"""Backends: any LangChain chat model behind the ChatModel role, and the two configured ones.

- ``llama_cpp``: in-process llama-cpp-python (the offline default), see ``llama_cpp_backend``.
- ``openai``: ``langchain_openai.ChatOpenAI`` with a ``base_url``: OpenAI, vLLM, Ollama or
  llama.cpp's server.  The API key is read from the environment variable named in
  ``llm.api_key_env``; garag never writes to the environment.

Imports of the optional packages are lazy and fail with an install hint.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from garag.config import LLMConfig
from garag.llm.base import (
    ChatMessage,
    ChatModel,
    ChatReply,
    LLMTimeoutError,
    LLMUnavailableError,
    content_text,
    lines_begun,
)

logger = logging.getLogger(__name__)

_HINT = "pip install 'garag[llm]' (llama-cpp-python, langchain-core, langchain-openai, openai)"
_NO_KEY = "not-needed"  # local OpenAI-compatible servers accept any key


def _to_langchain(messages: Sequence[ChatMessage]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m.role](content=m.content) for m in messages]


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (LLMTimeoutError, TimeoutError)) or "Timeout" in type(exc).__name__


class LangChainChat:
    """The ChatModel role over any LangChain ``BaseChatModel``.

    Args:
        model: the LangChain chat model.
        name: short backend name for logs ("llama_cpp", "openai", ...).
        fingerprint: exact model identity for the cache key.
        call_kwargs: (schema, timeout_s) -> keyword arguments for ``model.invoke``; this is
            where a backend says how it takes a JSON schema and a timeout.
        takes_max_lines: the model stops at ``max_lines`` itself (an ``invoke`` keyword, as
            ``LlamaCppChatModel``); otherwise a call with ``max_lines`` streams the reply and
            stops reading once it has begun one line more.
    """

    def __init__(
        self,
        model: Any,
        name: str,
        fingerprint: str,
        call_kwargs: Callable[[dict[str, Any] | None, float], dict[str, Any]],
        takes_max_lines: bool = False,
    ) -> None:
        self.model = model
        self.name = name
        self.fingerprint = fingerprint
        self._call_kwargs = call_kwargs
        self.takes_max_lines = takes_max_lines

    def complete(
        self,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any] | None,
        timeout_s: float,
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> ChatReply:
        kwargs = self._call_kwargs(schema, timeout_s)
        if max_tokens is not None:  # both backends take it per call (llama.cpp's and OpenAI's)
            kwargs["max_tokens"] = int(max_tokens)
        try:
            if max_lines is not None and not self.takes_max_lines:
                return self._stream_lines(messages, kwargs, int(max_lines))
            if max_lines is not None:
                kwargs["max_lines"] = int(max_lines)
            msg = self.model.invoke(_to_langchain(messages), **kwargs)
        except Exception as e:
            if _is_timeout(e):
                raise LLMTimeoutError(
                    f"{self.name}: call ran past {timeout_s:g}s ({type(e).__name__})"
                ) from e
            raise
        usage = getattr(msg, "usage_metadata", None) or {}
        return ChatReply(
            content_text(msg.content), int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        )

    @property
    def batches(self) -> bool:
        """The model decodes plain-text replies together (``complete_many``): the in-process
        llama.cpp model with ``llm.batch`` > 1, greedy (this loads it)."""
        can_batch = getattr(self.model, "can_batch", None)
        return bool(can_batch is not None and can_batch())

    def complete_many(
        self,
        requests: Sequence[Sequence[ChatMessage]],
        timeout_s: float,
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> list[ChatReply | LLMTimeoutError]:
        """Plain-text replies to many prompts decoded together (when ``batches``), in order; a
        reply that ran past ``timeout_s`` (from the start of its group) is its LLMTimeoutError."""
        chats = [[m.to_json() for m in msgs] for msgs in requests]
        out: list[ChatReply | LLMTimeoutError] = []
        for r in self.model.generate_many(chats, max_tokens, max_lines, timeout_s):
            if r.finish == "timeout":
                out.append(LLMTimeoutError(f"{self.name}: call ran past {timeout_s:g}s (batched)"))
            else:
                out.append(ChatReply(r.text, r.prompt_tokens, r.completion_tokens))
        return out

    def first_token_logits(
        self, requests: Sequence[Sequence[ChatMessage]], words: Sequence[str]
    ) -> list[list[float]]:
        """The logits of each word's first token as each prompt's first reply token.

        Raises:
            LLMUnavailableError: the backend cannot read a reply's first-token logits (only the
                in-process llama.cpp model can).
        """
        read = getattr(self.model, "first_token_logits", None)
        if read is None:
            raise LLMUnavailableError(
                f"llm.backend {self.name}: reading the reply's first-token probabilities needs the "
                "in-process llama_cpp backend"
            )
        return read([[m.to_json() for m in msgs] for msgs in requests], list(words))

    def _stream_lines(
        self, messages: Sequence[ChatMessage], kwargs: dict[str, Any], max_lines: int
    ) -> ChatReply:
        """Stream the reply and stop reading once it has begun more than ``max_lines`` lines (closing
        the stream, which ends the request).  Token counts: the usage the stream reports, else one
        completion token a content chunk."""
        parts: list[str] = []
        chunks = prompt_tokens = output_tokens = 0
        # stream_usage: langchain-openai asks a server at a base_url for no usage while streaming
        stream = self.model.stream(_to_langchain(messages), stream_usage=True, **kwargs)
        try:
            for chunk in stream:
                piece = content_text(chunk.content)
                usage = getattr(chunk, "usage_metadata", None) or {}
                prompt_tokens += int(usage.get("input_tokens", 0))
                output_tokens += int(usage.get("output_tokens", 0))
                if piece:
                    parts.append(piece)
                    chunks += 1
                    if lines_begun("".join(parts)) > max_lines:
                        break
        finally:
            stream.close()
        return ChatReply("".join(parts), prompt_tokens, output_tokens or chunks)


def llama_cpp_chat(config: LLMConfig, cache_root: str | Path) -> LangChainChat:
    """The in-process llama.cpp backend; resolves (and if needed assembles) the GGUF file."""
    try:
        import llama_cpp  # noqa: F401

        from garag.llm.llama_cpp_backend import LlamaCppChatModel
    except ImportError as e:
        raise LLMUnavailableError(f"llm.backend=llama_cpp needs llama-cpp-python: {_HINT}") from e
    from garag.llm.models import resolve_model_file

    mf = resolve_model_file(config.model, cache_root)
    model = LlamaCppChatModel(
        model_path=str(mf.path),
        n_ctx=config.n_ctx,
        n_threads=config.n_threads,
        temperature=config.temperature,
        seed=config.seed,
        max_tokens=config.max_tokens,
        batch_size=config.batch,
    )

    def kwargs(schema: dict[str, Any] | None, timeout_s: float) -> dict[str, Any]:
        return {"schema": schema, "timeout_s": timeout_s}

    fingerprint = f"llama_cpp:{mf.name}:sha256={mf.sha256}"
    return LangChainChat(model, "llama_cpp", fingerprint, kwargs, takes_max_lines=True)


def openai_chat(config: LLMConfig) -> LangChainChat:
    """The OpenAI-compatible HTTP backend (ChatOpenAI with ``base_url``).

    Raises:
        LLMUnavailableError: langchain-openai is missing, or the key variable is unset for OpenAI itself.
    """
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as e:
        raise LLMUnavailableError(f"llm.backend=openai needs langchain-openai: {_HINT}") from e
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    if not key:
        if not config.base_url:
            raise LLMUnavailableError(
                "llm.backend=openai without llm.base_url needs an API key in the environment"
                f" variable named by llm.api_key_env ({config.api_key_env or 'unset'})"
            )
        key = _NO_KEY
    model = ChatOpenAI(
        model=config.model,
        base_url=config.base_url or None,
        api_key=key,
        temperature=config.temperature,
        seed=config.seed,
        max_tokens=config.max_tokens,
        timeout=config.timeout_s,
        max_retries=0,  # LLMClient retries with its own backoff and counts them
    )
    style = config.response_format

    def kwargs(schema: dict[str, Any] | None, timeout_s: float) -> dict[str, Any]:
        if schema is None:
            return {}
        if style == "json_object":  # llama.cpp server: grammar from response_format.schema
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": str(schema.get("title", "reply")), "schema": schema},
            }
        }

    fingerprint = f"openai:{config.base_url or 'default'}:{config.model}"
    return LangChainChat(model, "openai", fingerprint, kwargs)


def make_chat_model(config: LLMConfig, cache_root: str | Path) -> ChatModel:
    """The configured backend (loads the local model file for llama_cpp)."""
    if config.backend == "llama_cpp":
        return llama_cpp_chat(config, cache_root)
    if config.backend == "openai":
        return openai_chat(config)
    raise ValueError(f"llm.backend: unknown backend {config.backend!r} (known: llama_cpp, openai)")
