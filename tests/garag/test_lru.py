"""garag.lru.LRU: the bounded map behind the query-vector, triplet and GRAAL result caches."""

from __future__ import annotations

import threading

import pytest

from garag.lru import LRU


def _upper(asked: list[list[str]]):
    def compute(keys: list[str]) -> list[str]:
        asked.append(keys)
        return [k.upper() for k in keys]

    return compute


def test_least_recently_used_entries_are_dropped_first():
    lru: LRU[str, str] = LRU(3)
    asked: list[list[str]] = []
    assert lru.values(["a", "b", "a", "c"], _upper(asked)) == ["A", "B", "A", "C"]
    assert asked == [["a", "b", "c"]]  # distinct, first-seen order, one call
    assert lru.get("a") == "A"  # "a" is now the most recent, "b" the oldest
    lru.put("d", "D")
    assert "b" not in lru and len(lru) == 3 and lru.get("b") is None
    assert lru.values(["c", "b"], _upper(asked)) == ["C", "B"]
    assert asked[-1] == ["b"] and lru.computed == 4  # only the dropped key was computed again
    assert "a" not in lru and [k for k in ("b", "c", "d") if k in lru] == ["b", "c", "d"]
    assert lru.values(["c", "d"], _upper(asked)) == ["C", "D"] and len(asked) == 2  # no call when all held
    lru.clear()
    assert len(lru) == 0
    with pytest.raises(ValueError, match="size must be >= 1"):
        LRU(0)
    with pytest.raises(ValueError, match="returned 1 values for 2 keys"):
        lru.values(["x", "y"], lambda keys: ["X"])


def test_a_held_key_pushed_out_while_computing_is_still_answered():
    """Another thread fills the map while ``compute`` runs: the keys held when the call began
    are answered from what was read then, not looked up again (which raised KeyError before)."""
    lru: LRU[str, str] = LRU(2)
    lru.put("a", "A")
    started, filled = threading.Event(), threading.Event()

    def other_thread() -> None:
        started.wait()
        for k in ("x", "y", "z"):
            lru.put(k, k.upper())
        filled.set()

    def slow_compute(keys: list[str]) -> list[str]:
        started.set()
        filled.wait(5)
        return [k.upper() for k in keys]

    t = threading.Thread(target=other_thread)
    t.start()
    assert lru.values(["a", "b"], slow_compute) == ["A", "B"]
    t.join()
    assert filled.is_set() and len(lru) == 2 and lru.get("a") == "A" and lru.get("b") == "B"
