"""garag.lru.LRU: the bounded map behind the query-vector, triplet and GRAAL result caches."""

from __future__ import annotations

import pytest

from garag.lru import LRU


def test_least_recently_used_entries_are_dropped_first():
    lru: LRU[str, int] = LRU(3)
    assert lru.missing(["a", "b", "a", "c"]) == ["a", "b", "c"]  # distinct, first-seen order
    assert lru.take(["a", "b", "a", "c"], {"a": 1, "b": 2, "c": 3}) == [1, 2, 1, 3]
    assert lru.get("a") == 1  # "a" is now the most recent, "b" the oldest
    lru.put("d", 4)
    assert "b" not in lru and len(lru) == 3 and lru.get("b") is None
    assert lru.missing(["a", "b", "d"]) == ["b"]
    assert lru.take(["c", "b"], {"b": 5}) == [3, 5]  # held values kept, new ones stored
    assert "a" not in lru and [k for k in ("b", "c", "d") if k in lru] == ["b", "c", "d"]
    with pytest.raises(KeyError):
        lru.take(["a"], {})  # neither new nor held
    lru.clear()
    assert len(lru) == 0
    with pytest.raises(ValueError, match="size must be >= 1"):
        LRU(0)
