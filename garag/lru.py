"""A bounded, thread-safe map that drops its least recently used entries first.

Used where results are pure functions of their key and a batch asks for many keys at once:
query vectors (retrievers/dense.py), sentence triplets (pipeline/triplets.py), GRAAL results
(retrievers/graal/retriever.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; ``get`` and ``values`` mark what they return as most recent.

    Args:
        size: entries kept (at least 1).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"LRU size must be >= 1, got {size}")
        self.size = size
        self.computed = 0  # keys that ``values`` had to compute (misses), over this map's life
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        """The value of ``key`` (None when not held)."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._store([(key, value)])

    def values(self, keys: Iterable[K], compute: Callable[[list[K]], Iterable[V]]) -> list[V]:
        """The values of ``keys`` in order: held ones as they are, the others from one call of
        ``compute(distinct missing keys, first-seen order)``, which returns their values in that
        order, outside the lock.  All become most recent, then the oldest beyond ``size`` go.

        Held values are read in the same locked step that decides what is missing, so a key that
        another thread pushes out while ``compute`` runs is still answered.

        Raises:
            ValueError: ``compute`` returned another number of values than it was asked for.
        """
        keys = list(keys)
        with self._lock:
            known = {k: self._items[k] for k in keys if k in self._items}
        todo = list(dict.fromkeys(k for k in keys if k not in known))
        if todo:
            new = list(compute(todo))
            if len(new) != len(todo):
                raise ValueError(f"LRU compute returned {len(new)} values for {len(todo)} keys")
            known.update(zip(todo, new, strict=True))
        out = [known[k] for k in keys]
        with self._lock:
            self.computed += len(todo)
            self._store(zip(keys, out, strict=True))
        return out

    def _store(self, pairs: Iterable[tuple[K, V]]) -> None:
        items = self._items
        for key, value in pairs:
            items[key] = value
            items.move_to_end(key)
        while len(items) > self.size:
            items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
