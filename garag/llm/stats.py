"""Per-stage accounting of LLM calls: calls, cache hits, tokens, seconds, failures, fallbacks."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

COUNTERS = (
    "requests",  # structured requests asked by a stage (one per chat_json call)
    "calls",  # model calls actually made (cache misses, retries and repairs included)
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "errors",  # failed calls (each attempt)
    "retries",
    "timeouts",  # calls past llm.timeout_s, each attempt (a batched prompt cut off counts, then goes alone)
    "invalid",  # replies that failed JSON/schema validation
    "repairs",  # repair calls made
    "repaired",  # repairs that produced a valid reply
    "fallbacks",  # requests that ended without a valid reply
    "invalid_citations",  # verdict ids that were not in the prompt (dropped)
    "verifier_fallbacks",  # verdicts handed to the fallback verifier
)


@dataclass
class StageStats:
    """Counters of one stage (e.g. "decompose", "triplets", "verdict")."""

    requests: int = 0
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    retries: int = 0
    timeouts: int = 0
    invalid: int = 0
    repairs: int = 0
    repaired: int = 0
    fallbacks: int = 0
    invalid_citations: int = 0
    verifier_fallbacks: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out


class LLMStats:
    """Thread-safe counters per stage; ``snapshot()`` gives plain dicts for run metadata."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[str, StageStats] = {}

    def add(self, stage: str, **amounts: float) -> None:
        """Add ``amounts`` (counter name -> increment, or ``seconds``) to ``stage``."""
        with self._lock:
            st = self._stages.setdefault(stage, StageStats())
            for key, value in amounts.items():
                if key not in COUNTERS and key != "seconds":
                    raise ValueError(f"unknown LLM counter {key!r} (known: {', '.join(COUNTERS)}, seconds)")
                setattr(st, key, getattr(st, key) + value)

    def stage(self, stage: str) -> StageStats:
        """A copy of one stage's counters (zeros for an unknown stage)."""
        with self._lock:
            return dataclasses.replace(self._stages.get(stage, StageStats()))

    def snapshot(self) -> dict[str, dict]:
        """Stage -> counters, plus a "total" entry."""
        with self._lock:
            stages = {name: st.to_json() for name, st in sorted(self._stages.items())}
        total = StageStats()
        for st in stages.values():
            for key, value in st.items():
                setattr(total, key, getattr(total, key) + value)
        stages["total"] = total.to_json()
        return stages

    def reset(self) -> None:
        with self._lock:
            self._stages.clear()
