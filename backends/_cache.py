"""A bounded cache from a stored row's raw bytes to its decoded Entry.

Keyword search reads every active memory of a user on each query; decoding
thousands of rows (JSON, timestamps, dataclasses) would cost more than the
ranking itself. The key is the raw stored value (plus the scope it was read
under), so a hit is exact by construction: any change to a row changes its
key. Old keys simply age out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class DecodeCache(Generic[V]):
    def __init__(self, maxsize: int = 50_000) -> None:
        self.maxsize = maxsize
        self._items: dict[Hashable, V] = {}

    def get(self, key: Hashable, decode: Callable[[], V]) -> V:
        try:
            return self._items[key]
        except KeyError:
            pass
        value = decode()
        if len(self._items) >= self.maxsize:
            # Drop the oldest quarter (dicts keep insertion order): cheap and good enough.
            for stale in list(self._items)[: self.maxsize // 4]:
                del self._items[stale]
        self._items[key] = value
        return value

    def clear(self) -> None:
        self._items.clear()
