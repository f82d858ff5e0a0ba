"""LLM prompt templates (files), versioned and hashed into cache keys; filled by the LLM stages.

Each ``<name>.yaml`` holds ``name``, ``version``, a ``system`` text, few-shot
``examples`` (literal user/assistant turns) and a ``user`` template with
``{field}`` placeholders.  ``load_prompt`` returns it as a LangChain
``ChatPromptTemplate`` together with the file's sha256, which goes into the
LLM cache key and the run metadata: editing a prompt invalidates its cached
replies.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from garag.llm.base import ChatMessage

PROMPT_DIR = Path(__file__).resolve().parent
_KEYS = {"name", "version", "system", "examples", "user", "reply"}
REPLIES = ("json", "lines")
_LC_ROLE = {"system": "system", "human": "user", "ai": "assistant"}


@dataclass(frozen=True)
class PromptFile:
    """A loaded prompt.

    Attributes:
        name: prompt name (the file stem).
        version: the file's ``version``.
        sha256: hex sha256 of the file's bytes.
        system: system text.
        examples: few-shot (user, assistant) turns, sent verbatim.
        user: the user template with ``{field}`` placeholders.
        reply: the reply's form: "json" (a JSON object of the stage's schema) or "lines" (plain
            text lines the stage parses itself: no grammar, fewer tokens).
    """

    name: str
    version: int
    sha256: str
    system: str
    examples: tuple[tuple[str, str], ...]
    user: str
    reply: str = "json"

    @property
    def template(self) -> Any:
        """The prompt as a LangChain ``ChatPromptTemplate`` (needs langchain-core)."""
        try:
            from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
            from langchain_core.prompts import ChatPromptTemplate
        except ImportError as e:
            raise ValueError("prompt templates need langchain-core: pip install 'garag[llm]'") from e
        parts: list[Any] = [SystemMessage(content=self.system)]
        for user, assistant in self.examples:
            parts += [HumanMessage(content=user), AIMessage(content=assistant)]
        parts.append(("human", self.user))
        return ChatPromptTemplate.from_messages(parts)

    @property
    def tag(self) -> str:
        """``name@vN:sha12`` for logs and run metadata."""
        return f"{self.name}@v{self.version}:{self.sha256[:12]}"

    def render(self, **fields: Any) -> list[ChatMessage]:
        """Fill the template; raises ValueError naming a missing field."""
        try:
            messages = self.template.format_messages(**fields)
        except KeyError as e:
            raise ValueError(f"prompt {self.name!r}: missing field {e.args[0]!r}") from e
        return [ChatMessage(_LC_ROLE[m.type], str(m.content)) for m in messages]


def _parse(path: Path) -> PromptFile:
    raw = path.read_bytes()
    data = yaml.safe_load(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a prompt file must be a mapping")
    unknown = set(data) - _KEYS
    missing = {"name", "version", "system", "user"} - set(data)
    if unknown or missing:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    if not isinstance(data["version"], int):
        raise ValueError(f"{path}: version must be an integer")
    reply = data.get("reply", "json")
    if reply not in REPLIES:
        raise ValueError(f"{path}: reply must be one of {', '.join(REPLIES)}, got {reply!r}")
    examples = []
    for i, ex in enumerate(data.get("examples") or []):
        if not isinstance(ex, dict) or set(ex) != {"user", "assistant"}:
            raise ValueError(f"{path}: examples[{i}] needs exactly the keys user and assistant")
        examples.append((str(ex["user"]).strip(), str(ex["assistant"]).strip()))
    return PromptFile(
        name=str(data["name"]),
        version=data["version"],
        sha256=hashlib.sha256(raw).hexdigest(),
        system=str(data["system"]).strip(),
        examples=tuple(examples),
        user=str(data["user"]).rstrip(),
        reply=reply,
    )


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, mtime_ns: int) -> PromptFile:
    return _parse(Path(path))


def load_prompt(name: str, directory: str | Path | None = None) -> PromptFile:
    """Load ``<directory>/<name>.yaml`` (default: this package's prompts).

    Raises:
        ValueError: no such prompt, or a malformed file.
    """
    base = Path(directory) if directory is not None else PROMPT_DIR
    path = base / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in base.glob("*.yaml"))
        raise ValueError(f"prompt {name!r} not found in {base} (known: {', '.join(known)})")
    return _load_cached(str(path), path.stat().st_mtime_ns)
