"""A bounded, thread-safe map that drops its least recently used entries first.

Used where results are pure functions of their key and a batch asks for many keys at once:
query vectors (retrievers/dense.py), sentence triplets (pipeline/triplets.py), GRAAL results
(retrievers/graal/retriever.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; ``get`` and ``take`` mark what they return as most recent.

    Args:
        size: entries kept (at least 1).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"LRU size must be >= 1, got {size}")
        self.size = size
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
        self.take([key], {key: value})

    def missing(self, keys: Iterable[K]) -> list[K]:
        """The distinct keys not held, in first-seen order: the ones to compute."""
        with self._lock:
            return list(dict.fromkeys(k for k in keys if k not in self._items))

    def take(self, keys: Iterable[K], new: Mapping[K, V]) -> list[V]:
        """The values of ``keys`` in order, from ``new`` (stored) or held; all become most recent,
        then the oldest beyond ``size`` are dropped.

        Raises:
            KeyError: a key neither in ``new`` nor held (dropped since ``missing`` by as many
                newer entries as ``size``, from another thread).
        """
        items = self._items
        out = []
        with self._lock:
            for key in keys:
                value = new[key] if key in new else items[key]
                items[key] = value
                items.move_to_end(key)
                out.append(value)
            while len(items) > self.size:
                items.popitem(last=False)
        return out

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
