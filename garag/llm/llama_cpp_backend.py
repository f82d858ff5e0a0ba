"""In-process llama.cpp as a LangChain chat model, with JSON-schema grammars and a per-call deadline.

langchain-community's ``ChatLlamaCpp`` would pull the whole community package
and hides llama.cpp's ``response_format.schema``; this thin ``BaseChatModel``
calls ``llama_cpp.Llama.create_chat_completion`` directly, which compiles the
JSON schema to a GBNF grammar, so every token the model samples keeps the
reply valid JSON of that schema.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from garag.llm.base import LLMTimeoutError, LLMUnavailableError, content_text, lines_begun

logger = logging.getLogger(__name__)

_ROLE = {"system": "system", "human": "user", "ai": "assistant"}


class LlamaCppChatModel(BaseChatModel):
    """LangChain chat model over a local GGUF file run by llama-cpp-python.

    Call-time keyword arguments (``invoke(messages, schema=..., timeout_s=..., max_lines=...)``):
    ``schema`` constrains the reply to a JSON schema; ``timeout_s`` bounds the
    generation (measured from when this model starts the call); ``max_lines`` stops it once the
    reply has begun one line more (``garag.llm.base.lines_begun``; finish reason "lines").

    Attributes:
        model_path: the .gguf file.
        n_ctx: context length.
        n_threads: CPU threads (0 = llama.cpp's default).
        temperature, seed, max_tokens: sampling settings (temperature 0 = greedy).
        batch_size: chats ``generate_many`` decodes together (``garag.llm.llama_batch``).
    """

    model_path: str
    n_ctx: int = 4096
    n_threads: int = 0
    temperature: float = 0.0
    seed: int = 13
    max_tokens: int = 384
    batch_size: int = 8
    _llama: Any = PrivateAttr(default=None)
    _batched: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "garag-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "n_ctx": self.n_ctx, "seed": self.seed}

    def load(self) -> LlamaCppChatModel:
        """Load the GGUF (idempotent)."""
        with self._lock:
            if self._llama is None:
                try:
                    from llama_cpp import Llama
                except ImportError as e:
                    raise LLMUnavailableError(
                        "the llama_cpp backend needs llama-cpp-python: pip install 'garag[llm]'"
                    ) from e
                # llama-cpp-python generates on half the cores unless told; 0 here means all cores,
                # for reading the prompt and for generating
                threads = self.n_threads if self.n_threads > 0 else max(os.cpu_count() or 1, 1)
                kwargs: dict[str, Any] = {
                    "n_ctx": self.n_ctx,
                    "seed": self.seed,
                    "verbose": False,
                    "n_threads": threads,
                    "n_threads_batch": threads,
                }
                self._llama = Llama(model_path=self.model_path, **kwargs)
        return self

    def can_batch(self) -> bool:
        """``generate_many`` decodes together here: ``batch_size`` > 1, greedy, and (loading the
        model) a batch decoder that formats chats as ``create_chat_completion`` does."""
        if self.batch_size < 2 or self.temperature != 0:
            return False
        try:
            self._decoder()
        except ValueError as e:
            logger.warning("llama.cpp: replies are decoded one at a time (%s)", e)
            self.batch_size = 1
            return False
        return True

    def _decoder(self) -> Any:
        self.load()
        with self._lock:
            if self._batched is None:
                from garag.llm.llama_batch import BatchDecoder

                threads = self.n_threads if self.n_threads > 0 else max(os.cpu_count() or 1, 1)
                self._batched = BatchDecoder(self._llama, self.batch_size, self.n_ctx, threads)
            return self._batched

    def generate_many(
        self,
        chats: list[list[dict[str, str]]],
        max_tokens: int | None = None,
        max_lines: int | None = None,
        timeout_s: float | None = None,
    ) -> list[Any]:
        """Greedy plain-text replies to many chats, ``batch_size`` decoded together
        (``garag.llm.llama_batch.BatchDecoder.generate``; a list of its ``BatchReply``).

        Raises:
            ValueError: the model samples (temperature > 0) or has no chat template.
        """
        if self.temperature != 0:
            raise ValueError("batched generation is greedy only (llm.temperature 0)")
        decoder = self._decoder()
        with self._lock:
            budget = int(max_tokens if max_tokens is not None else self.max_tokens)
            return decoder.generate(chats, budget, max_lines, timeout_s)

    def first_token_logits(self, chats: list[list[dict[str, str]]], words: list[str]) -> list[list[float]]:
        """The logits of each word's first token as each chat's first reply token.

        ``garag.llm.llama_batch.BatchDecoder.first_logits``: chats sharing a prefix read it once.

        Raises:
            LLMUnavailableError: the model's chats are not formatted by its own template (none, or
                a built-in format), or two words start with the same token.
            ValueError: a prompt does not fit ``n_ctx``.
        """
        try:
            decoder = self._decoder()
        except ValueError as e:
            raise LLMUnavailableError(f"llama.cpp: {e}") from e
        ids = [self._llama.tokenize(w.encode("utf-8"), add_bos=False)[0] for w in words]
        if len(set(ids)) != len(ids):  # one token counted twice, or on both sides
            raise LLMUnavailableError(f"llama.cpp: the words {list(words)} do not start with distinct tokens")
        with self._lock:
            return decoder.first_logits(chats, ids)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.load()
        schema = kwargs.get("schema")
        timeout_s = kwargs.get("timeout_s")
        max_lines = kwargs.get("max_lines")
        chat = [{"role": _ROLE.get(m.type, "user"), "content": content_text(m.content)} for m in messages]
        call: dict[str, Any] = {
            "messages": chat,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": int(kwargs.get("max_tokens", self.max_tokens)),
            "stop": stop or [],
            "stream": True,  # the deadline is checked between tokens
        }
        if schema is not None:
            call["response_format"] = {"type": "json_object", "schema": schema}
        parts: list[str] = []
        finish = None
        with self._lock:  # one llama.cpp context: calls run one at a time
            deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
            stream = self._llama.create_chat_completion(**call)
            try:
                for chunk in stream:
                    choice = chunk["choices"][0]
                    piece = (choice.get("delta") or {}).get("content")
                    if piece is not None:
                        parts.append(piece)
                    finish = choice.get("finish_reason") or finish
                    if max_lines is not None and piece and lines_begun("".join(parts)) > max_lines:
                        finish = "lines"  # the rest of the reply cannot change what the caller does
                        break
                    if deadline is not None and time.monotonic() > deadline:
                        raise LLMTimeoutError(f"llama.cpp call ran past {timeout_s:g}s")
            finally:
                stream.close()
            # Every content chunk is one token; the context holds the prompt and the generated
            # tokens except the last one when generation stopped at max_tokens or was cut here.
            completion = len(parts)
            unread = 1 if finish in ("length", "lines") else 0
            prompt = max(0, int(self._llama.n_tokens) - completion + unread)
        msg = AIMessage(
            content="".join(parts),
            usage_metadata={
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
            },
            response_metadata={"finish_reason": finish},
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])
