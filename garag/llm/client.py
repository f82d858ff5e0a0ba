"""The LLM client: cache, retries with backoff, timeouts, a concurrency limit, accounting, structured replies.

Stages call ``chat_json(stage, messages, Schema)``: the reply is asked for as
JSON of ``Schema`` (grammar-constrained on llama.cpp, ``response_format`` on
OpenAI-compatible servers), validated with pydantic, repaired once, and
otherwise returned as a fallback marker (``Structured.ok`` is False) that the
stage turns into its rule-based or NLI fallback.  No model reply, exception
or timeout escapes as a crash.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from garag.config import LLMConfig
from garag.llm.base import (
    ChatMessage,
    ChatModel,
    ChatReply,
    LLMError,
    LLMTimeoutError,
    LLMUnavailableError,
    lines_begun,
)
from garag.llm.cache import ResponseCache, cache_key
from garag.llm.stats import LLMStats
from garag.llm.structured import json_schema, parse_reply, repair_messages

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

CACHE_FILE = "llm/responses.sqlite"
# The words whose first tokens ``yes_probability_many`` weighs against each other.
YES_WORDS = ("Yes", "yes")
NO_WORDS = ("No", "no")


@dataclass(frozen=True)
class Structured(Generic[T]):
    """A structured reply, or the fallback marker.

    Attributes:
        value: the validated reply; None means "fall back".
        raw: the last reply text ("" when no call succeeded).
        reason: "" when ok, else "timeout", "error", "invalid", "length" or "lines".
        repaired: the value came from the repair call.
    """

    value: T | None
    raw: str = ""
    reason: str = ""
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return self.value is not None


class LLMClient:
    """The one object that talks to a model.

    Args:
        config: the ``llm`` config section.
        cache_dir: garag's cache root (holds ``llm/responses.sqlite`` and assembled models).
        chat: a ready backend; None = build the configured one in ``load()``.
        stats: shared counters; None = a new LLMStats.
    """

    def __init__(
        self,
        config: LLMConfig,
        cache_dir: str | Path,
        chat: ChatModel | None = None,
        stats: LLMStats | None = None,
    ) -> None:
        self.config = config
        self.cache_dir = Path(cache_dir)
        self.chat = chat
        self.stats = stats if stats is not None else LLMStats()
        self._cache: ResponseCache | None = None
        self._pool: ThreadPoolExecutor | None = None

    def load(self) -> LLMClient:
        """Build the backend (assembling a local model file if needed) and open the cache."""
        if self.chat is None:
            from garag.llm.backends import make_chat_model

            self.chat = make_chat_model(self.config, self.cache_dir)
        if self.config.cache and self._cache is None:
            self._cache = ResponseCache(self.cache_dir / CACHE_FILE)
        return self

    @property
    def fingerprint(self) -> str:
        """Exact model identity (backend, model, file sha256)."""
        if self.chat is None:
            raise ValueError("LLMClient.load() must be called before use")
        return self.chat.fingerprint

    def metadata(self) -> dict[str, Any]:
        """Model identity, sampling settings and counters for run metadata."""
        return {
            "model": self.fingerprint if self.chat is not None else self.config.model,
            "backend": self.config.backend,
            "temperature": self.config.temperature,
            "seed": self.config.seed,
            "max_tokens": self.config.max_tokens,
            "stats": self.stats.snapshot(),
        }

    # -- raw calls ------------------------------------------------------------------------

    def complete(
        self,
        stage: str,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any] | None = None,
        prompt_sha: str = "",
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> ChatReply:
        """One cached call with retries; raises LLMTimeoutError or LLMError when it finally fails.

        Args:
            max_tokens: this call's completion budget instead of ``llm.max_tokens``.
            max_lines: generation stops once the reply has begun more lines than this
                (``garag.llm.base.lines_begun``).  A reply that stays within it is the whole reply
                and is cached (and found) as one asked for without the limit; a cut one is cached
                under its limit.  A cached whole reply is returned whole: the caller compares its
                lines with the limit.
        """
        if self.chat is None:
            self.load()
        if self.chat is None:
            raise ValueError("LLMClient: no chat model after load()")
        keys = self._keys(messages, schema, prompt_sha, max_tokens, max_lines)
        hit = self._cached(stage, keys)
        if hit is not None:
            return hit
        attempt = 0
        while True:
            self.stats.add(stage, calls=1)
            try:
                reply = self.chat.complete(messages, schema, self.config.timeout_s, max_tokens, max_lines)
            except LLMTimeoutError:
                self.stats.add(stage, timeouts=1)
                raise
            except Exception as e:  # any backend failure is retried, then reported
                self.stats.add(stage, errors=1)
                if attempt >= self.config.retries:
                    raise LLMError(f"{stage}: model call failed after {attempt + 1} attempt(s): {e}") from e
                delay = self.config.backoff_s * (2**attempt)
                logger.warning("%s: model call failed (%s); retrying in %.1fs", stage, e, delay)
                self.stats.add(stage, retries=1)
                time.sleep(delay)
                attempt += 1
                continue
            self._store(stage, keys, reply, max_lines)
            return reply

    def _keys(
        self,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any] | None,
        prompt_sha: str,
        max_tokens: int | None,
        max_lines: int | None,
    ) -> tuple[str, str | None]:
        """The whole reply's cache key, and the cut reply's (None without a line limit)."""
        if self.chat is None:
            raise ValueError("LLMClient.load() must be called before use")
        budget = self.config.max_tokens if max_tokens is None else max_tokens
        args = (self.chat.fingerprint, messages, self.config.temperature, self.config.seed, budget, schema)
        return cache_key(*args, prompt_sha), None if max_lines is None else cache_key(
            *args, prompt_sha, max_lines
        )

    def _cached(self, stage: str, keys: tuple[str, str | None]) -> ChatReply | None:
        if self._cache is None:
            return None
        for k in keys:
            hit = None if k is None else self._cache.get(k)
            if hit is not None:
                self.stats.add(stage, cache_hits=1)
                return hit
        return None

    def _lookup(
        self, stage: str, keys: Sequence[tuple[str, str | None]]
    ) -> tuple[dict[int, ChatReply], list[int]]:
        """The cached replies by position in ``keys``, and the positions the cache lacks."""
        hits: dict[int, ChatReply] = {}
        missing: list[int] = []
        for i, k in enumerate(keys):
            hit = self._cached(stage, k)
            if hit is None:
                missing.append(i)
            else:
                hits[i] = hit
        return hits, missing

    def _store(
        self, stage: str, keys: tuple[str, str | None], reply: ChatReply, max_lines: int | None
    ) -> None:
        """Count a model reply's tokens and cache it: under the cut key when it passed its line limit."""
        self.stats.add(stage, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
        if self._cache is not None and self.chat is not None:
            cut = keys[1] is not None and max_lines is not None and lines_begun(reply.text) > max_lines
            self._cache.put(keys[1] if cut and keys[1] is not None else keys[0], self.chat.fingerprint, reply)

    # -- structured calls -----------------------------------------------------------------

    def chat_json(
        self,
        stage: str,
        messages: Sequence[ChatMessage],
        output: type[T],
        constrain: bool = True,
        prompt_sha: str = "",
    ) -> Structured[T]:
        """Ask for JSON of ``output``; validate, repair once, else return the fallback marker.

        Args:
            stage: accounting name ("decompose", "triplets", "verdict", ...).
            messages: the rendered prompt.
            output: the pydantic model of the reply.
            constrain: send the schema to the backend (grammar / response_format); False
                leaves the reply unconstrained (for backends without structured output).
            prompt_sha: the prompt file's sha256, part of the cache key.
        """
        started = time.perf_counter()
        self.stats.add(stage, requests=1)
        schema = json_schema(output)
        sent = schema if constrain else None
        try:
            reply = self._first_call(stage, messages, sent, prompt_sha)
            if isinstance(reply, Structured):
                return reply
            value, error = parse_reply(reply.text, output)
            if value is not None:
                return Structured(value, reply.text)
            self.stats.add(stage, invalid=1, repairs=1)
            logger.info("%s: invalid reply (%s); asking for a repair", stage, error)
            try:
                fixed = self.complete(
                    stage, repair_messages(messages, reply.text, error, schema), sent, prompt_sha
                )
            except LLMError as e:  # includes timeouts
                logger.warning("%s: repair call failed (%s); falling back", stage, e)
                return self._fallback(stage, reply.text, "invalid")
            value, error = parse_reply(fixed.text, output)
            if value is not None:
                self.stats.add(stage, repaired=1)
                return Structured(value, fixed.text, repaired=True)
            self.stats.add(stage, invalid=1)
            logger.warning("%s: repaired reply still invalid (%s); falling back", stage, error)
            return self._fallback(stage, fixed.text, "invalid")
        finally:
            self.stats.add(stage, seconds=time.perf_counter() - started)

    def chat_text(
        self,
        stage: str,
        messages: Sequence[ChatMessage],
        prompt_sha: str = "",
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> Structured[str]:
        """Ask for plain text (no schema, no grammar: the stage parses it); a timeout or a failed
        call returns the fallback marker, counted like ``chat_json``'s, and so does a reply cut
        at ``max_tokens`` (reason "length"), which a stage cannot tell from a whole one, and a
        reply of more than ``max_lines`` lines (reason "lines"; generation stops at the first
        line too many)."""
        started = time.perf_counter()
        self.stats.add(stage, requests=1)
        try:
            reply = self._first_call(stage, messages, None, prompt_sha, max_tokens, max_lines)
        finally:
            self.stats.add(stage, seconds=time.perf_counter() - started)
        return self._text_result(stage, reply, max_tokens, max_lines)

    def _text_result(
        self, stage: str, reply: ChatReply | Structured[str], max_tokens: int | None, max_lines: int | None
    ) -> Structured[str]:
        if isinstance(reply, Structured):
            return reply
        if max_lines is not None and lines_begun(reply.text) > max_lines:
            return self._fallback(stage, reply.text, "lines")
        if max_tokens is not None and reply.completion_tokens >= max_tokens:
            return self._fallback(stage, reply.text, "length")
        return Structured(reply.text, reply.text)

    def chat_text_many(
        self,
        stage: str,
        requests: Sequence[Sequence[ChatMessage]],
        prompt_sha: str = "",
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> list[Structured[str]]:
        """``chat_text`` for many prompts, in input order: the ones the cache lacks are decoded
        ``llm.batch`` at a time where the backend batches (llama.cpp), each group cached when it is
        done, else asked one by one (or on ``llm.concurrency`` threads).  A group that fails is
        asked again one by one, with ``chat_text``'s retries, and so is each prompt of a group
        whose reply the group's deadline cut off (``llm.timeout_s`` counts from the start of the
        group, which on a slow machine eight long prompts can outrun together): alone, it gets the
        whole ``llm.timeout_s`` a prompt asked alone gets, and falls back only if it runs past that."""
        if self.chat is None:
            self.load()
        if not getattr(self.chat, "batches", False) or len(requests) < 2:
            return self._text_each(stage, requests, prompt_sha, max_tokens, max_lines)
        results: list[Structured[str] | None] = [None] * len(requests)
        keys = [self._keys(m, None, prompt_sha, max_tokens, max_lines) for m in requests]
        hits, missing = self._lookup(stage, keys)
        for i, hit in hits.items():
            self.stats.add(stage, requests=1)
            results[i] = self._text_result(stage, hit, max_tokens, max_lines)
        size = max(1, self.config.batch)
        for start in range(0, len(missing), size):  # each group cached as soon as it is decoded
            group = missing[start : start + size]
            replies = None
            started = time.perf_counter()
            try:
                replies = self.chat.complete_many(  # type: ignore[attr-defined]
                    [requests[i] for i in group], self.config.timeout_s, max_tokens, max_lines
                )
            except Exception as e:  # asked again one by one below, with retries
                logger.warning("%s: batched call failed (%s); asking one by one", stage, e)
                self.stats.add(stage, calls=1, errors=1)
            self.stats.add(stage, seconds=time.perf_counter() - started)
            redo = group  # the prompts asked again one by one: all of a failed group
            if replies is not None:
                redo = [
                    i for i, reply in zip(group, replies, strict=True) if isinstance(reply, LLMTimeoutError)
                ]
                self.stats.add(stage, requests=len(group) - len(redo), calls=len(group), timeouts=len(redo))
                for i, reply in zip(group, replies, strict=True):
                    if not isinstance(reply, LLMTimeoutError):
                        self._store(stage, keys[i], reply, max_lines)
                        results[i] = self._text_result(stage, reply, max_tokens, max_lines)
                if redo:
                    logger.warning(
                        "%s: %d of a group of %d ran past its %gs; asking them again one by one",
                        stage,
                        len(redo),
                        len(group),
                        self.config.timeout_s,
                    )
            again = self._text_each(stage, [requests[i] for i in redo], prompt_sha, max_tokens, max_lines)
            for i, r in zip(redo, again, strict=True):
                results[i] = r
        return [r for r in results if r is not None]

    def yes_probability_many(
        self,
        stage: str,
        requests: Sequence[Sequence[ChatMessage]],
        prompt_sha: str = "",
        yes: Sequence[str] = YES_WORDS,
        no: Sequence[str] = NO_WORDS,
    ) -> list[float]:
        """P(the reply starts with one of ``yes`` rather than one of ``no``) for each prompt.

        Read from the logits of the reply's first token (each word's first token; a softmax over
        those tokens only) without generating it, on the in-process llama.cpp backend only.
        Prompts are read ``llm.batch`` at a time; prompts that share a prefix (several questions on
        one evidence) read it once.  Cached like replies (under a key of its own), so a rerun
        reads nothing.  ``llm.timeout_s`` does not apply: nothing is generated.

        Raises:
            LLMUnavailableError: the backend cannot read first-token logits.
        """
        if self.chat is None:
            self.load()
        words = [*yes, *no]
        marker = {"first_token_probability": {"yes": list(yes), "no": list(no)}}
        keys = [self._keys(m, marker, prompt_sha, 1, None) for m in requests]
        hits, missing = self._lookup(stage, keys)
        self.stats.add(stage, requests=len(requests))
        out: list[float | None] = [None] * len(requests)
        for i, hit in hits.items():
            out[i] = float(hit.text)
        read = getattr(self.chat, "first_token_logits", None)
        if missing and read is None:
            raise LLMUnavailableError(
                f"llm.backend {self.config.backend}: first-token probabilities need the llama_cpp backend"
            )
        size = max(1, self.config.batch)
        for start in range(0, len(missing), size):
            group = missing[start : start + size]
            started = time.perf_counter()
            try:
                logits = read([requests[i] for i in group], words)  # type: ignore[misc]
            except Exception:
                self.stats.add(stage, calls=len(group), errors=1, seconds=time.perf_counter() - started)
                raise
            self.stats.add(stage, calls=len(group), seconds=time.perf_counter() - started)
            for i, row in zip(group, logits, strict=True):
                top = max(row)
                e = [math.exp(x - top) for x in row]
                p = sum(e[: len(yes)]) / sum(e)
                out[i] = p
                self._store(stage, keys[i], ChatReply(repr(p), 0, 0), None)
        if None in out:
            raise RuntimeError(f"{stage}: a first-token probability is missing")
        return [float(p) for p in out if p is not None]

    def _text_each(
        self,
        stage: str,
        requests: Sequence[Sequence[ChatMessage]],
        prompt_sha: str,
        max_tokens: int | None,
        max_lines: int | None,
    ) -> list[Structured[str]]:
        """``chat_text`` one prompt at a time, or on the thread pool for backends that serve calls in
        parallel (not the in-process model, which runs one at a time)."""
        return self._each(
            lambda m: self.chat_text(stage, m, prompt_sha, max_tokens, max_lines),
            requests,
            parallel=self.config.backend != "llama_cpp",
        )

    def _each(
        self,
        call: Callable[[Sequence[ChatMessage]], R],
        requests: Sequence[Sequence[ChatMessage]],
        parallel: bool,
    ) -> list[R]:
        """``call`` for each prompt, in input order: on a pool of ``llm.concurrency`` threads when
        ``parallel`` and there is more than one, else one after the other."""
        if not parallel or len(requests) <= 1 or self.config.concurrency <= 1:
            return [call(m) for m in requests]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.config.concurrency, thread_name_prefix="garag-llm"
            )
        futures = [self._pool.submit(call, m) for m in requests]
        return [f.result() for f in futures]

    def _first_call(
        self,
        stage: str,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any] | None,
        prompt_sha: str,
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> ChatReply | Structured[Any]:
        """``complete``, or the fallback marker (counted) when the call times out or fails."""
        try:
            return self.complete(stage, messages, schema, prompt_sha, max_tokens, max_lines)
        except LLMTimeoutError as e:
            logger.warning("%s: %s; falling back", stage, e)
            return self._fallback(stage, "", "timeout")
        except LLMError as e:
            logger.warning("%s: %s; falling back", stage, e)
            return self._fallback(stage, "", "error")

    def chat_json_many(
        self,
        stage: str,
        requests: Sequence[Sequence[ChatMessage]],
        output: type[T],
        constrain: bool = True,
        prompt_sha: str = "",
    ) -> list[Structured[T]]:
        """``chat_json`` for many prompts on a pool of ``llm.concurrency`` threads, in input order."""
        return self._each(
            lambda m: self.chat_json(stage, m, output, constrain, prompt_sha), requests, parallel=True
        )

    def _fallback(self, stage: str, raw: str, reason: str) -> Structured[Any]:
        self.stats.add(stage, fallbacks=1)
        return Structured(None, raw, reason)

    def close(self) -> None:
        """Stop the thread pool and close the cache."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
