"""Structured outputs: pydantic schema -> JSON schema, lenient JSON extraction, validation, repair prompt.

Pure functions, no model calls.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from garag.llm.base import ChatMessage

T = TypeVar("T", bound=BaseModel)

_MAX_ERROR_CHARS = 400


def _inline_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 20:
        raise ValueError("JSON schema nests $ref deeper than 20 levels (recursive model?)")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = defs[ref[len("#/$defs/") :]]
            return _inline_refs(copy.deepcopy(target), defs, depth + 1)
        return {k: _inline_refs(v, defs, depth) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs, depth) for v in node]
    return node


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with ``$defs`` references inlined (llama.cpp's grammar builder
    and some servers handle flat schemas best)."""
    schema = model.model_json_schema()
    return _inline_refs(schema, schema.get("$defs", {}))


def extract_json(text: str) -> str | None:
    """The first balanced ``{...}`` object in ``text`` (skipping code fences and chatter), or None."""
    start = text.find("{")
    while start != -1:
        depth = 0
        in_str = False
        escape = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    candidate = text[start : i + 1]
                    try:
                        json.loads(candidate)
                        return candidate
                    except json.JSONDecodeError:
                        break
        start = text.find("{", start + 1)
    return None


def parse_reply(text: str, model: type[T]) -> tuple[T | None, str]:
    """Validate a reply against ``model``.

    Returns:
        ``(value, "")`` when the reply holds a valid JSON object, else ``(None, error)``
        with a short error message fit to show the model in a repair prompt.
    """
    candidate = extract_json(text)
    if candidate is None:
        return None, "the reply is not a JSON object"
    try:
        return model.model_validate_json(candidate), ""
    except ValidationError as e:
        parts = [f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()]
        return None, ("; ".join(parts))[:_MAX_ERROR_CHARS]


def repair_messages(
    messages: Sequence[ChatMessage], reply: str, error: str, schema: dict[str, Any]
) -> list[ChatMessage]:
    """The conversation plus the bad reply and one request to fix it (the single repair try)."""
    ask = (
        f"Your reply was not valid: {error}. Reply again with only one JSON object that matches this "
        f"JSON schema, and nothing else:\n{json.dumps(schema, separators=(',', ':'))}"
    )
    return [*messages, ChatMessage("assistant", reply[:2000]), ChatMessage("user", ask)]
