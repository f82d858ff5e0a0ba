"""Chat-model role, message and reply types, and the errors the LLM client tells apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn.

    Attributes:
        role: "system", "user" or "assistant".
        content: the text.
    """

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"ChatMessage.role must be one of {ROLES}, got {self.role!r}")

    def to_json(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ChatReply:
    """A model's reply and its token counts (0 when the backend does not report them)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class ChatModel(Protocol):
    """Something that turns chat messages into a reply: one backend (llama.cpp, OpenAI-compatible).

    ``fingerprint`` names the exact model (for llama.cpp it contains the GGUF file's
    sha256) and goes into the response-cache key.  ``complete`` constrains the reply
    to ``schema`` (a JSON schema) when one is given.
    """

    name: str
    fingerprint: str

    def complete(
        self,
        messages: Sequence[ChatMessage],
        schema: dict[str, Any] | None,
        timeout_s: float,
        max_tokens: int | None = None,
        max_lines: int | None = None,
    ) -> ChatReply:
        """One call (at most ``max_tokens`` completion tokens when given, else the configured
        number); generation stops once the reply has begun more than ``max_lines`` lines (see
        ``lines_begun``) when that is given; raises LLMTimeoutError past ``timeout_s`` and other
        exceptions on failure."""
        ...


def content_text(content: Any) -> str:
    """A LangChain message's content as text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


def lines_begun(text: str) -> int:
    """The lines a reply has begun that hold text: not blank and not a code fence (a line counts
    from its first character, so a reply cut at its ``max_lines`` shows one more; an unfinished
    last line of backticks only may still become a fence, and does not count yet)."""
    lines = text.splitlines()
    if lines and not text.endswith(("\n", "\r")) and "```".startswith(lines[-1].strip()):
        lines.pop()
    return sum(1 for line in lines if line.strip() and not line.lstrip().startswith("```"))


class LLMError(RuntimeError):
    """A model call failed (after retries)."""


class LLMTimeoutError(LLMError):
    """A model call ran past its timeout."""


class LLMUnavailableError(ValueError):
    """An optional dependency or model file for the configured backend is missing."""
