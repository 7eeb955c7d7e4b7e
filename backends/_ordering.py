"""The one "newest first" order every store returns (reference §1.5)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from memchat.engine.model import Entry


def newest_first(entries: Iterable[Entry]) -> list[Entry]:
    """updated_at desc, then created_at desc, then id asc."""
    ordered = sorted(entries, key=lambda e: e.id)
    ordered.sort(key=lambda e: (e.updated_at, e.created_at), reverse=True)
    return ordered


def _position(entry: Entry) -> tuple[int, int, str]:
    return entry.newest_first


class NewestOrder:
    """One user's active memories in :func:`newest_first` order, kept with each
    write (a sorted list of keys: an insert or removal moves pointers, no sort), so
    reading the newest N is a slice, not a sort of every memory."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: list[tuple[int, int, str]] = []

    def replace(self, before: Entry | None, after: Entry | None) -> None:
        """A write took the memory from ``before`` to ``after`` (None: absent)."""
        if before is not None and not before.is_deleted:
            old = _position(before)
            i = bisect.bisect_left(self._keys, old)
            if i < len(self._keys) and self._keys[i] == old:
                del self._keys[i]
        if after is not None and not after.is_deleted:
            bisect.insort(self._keys, _position(after))

    def first(self, limit: int) -> list[str]:
        """The IDs of the ``limit`` newest."""
        return [memory_id for *_, memory_id in self._keys[:limit]]

    def __len__(self) -> int:
        return len(self._keys)
