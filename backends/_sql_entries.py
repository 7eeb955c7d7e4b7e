"""The entries a store has read (the SQL stores; Chroma's cache extends it),
kept per user while the user's version (``<table>_stats.version``, bumped in
the transaction of every write of the user, in any process) stays the same.

A search reads the version first (the statistics row it needs anyway) and then
reads only the rows it has not seen at that version: a row read under version
``v`` is what the table held at ``v``, since no write leaves the version alone.
Another process's write moves the version, so the next search reads afresh;
a write section of this process brings the entries along to the version it
committed, with what it wrote (``advance``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping

from memchat.engine.model import Entry

#: Users whose entries are kept per store (LRU), as for the vector matrices.
ENTRY_CACHE_USERS = 8


class VersionedEntries:
    """LRU of user → (version, memory ID → active entry read at that version). A
    version is whatever the store bumps with every write: a number, a token."""

    def __init__(self, users: int = ENTRY_CACHE_USERS) -> None:
        self.users = users
        self._items: OrderedDict[Hashable, tuple[Hashable, dict[str, Entry]]] = OrderedDict()

    def at(self, key: Hashable, version: Hashable) -> dict[str, Entry]:
        """The entries known at ``version`` (a new, empty record when it moved on);
        what the caller adds to it is kept."""
        cached = self._items.get(key)
        if cached is None or cached[0] != version:
            cached = (version, {})
            self._items[key] = cached
        self._items.move_to_end(key)
        while len(self._items) > self.users:
            self._items.popitem(last=False)
        return cached[1]

    def keep(self, key: Hashable, version: Hashable, read: Mapping[str, Entry]) -> None:
        """Entries read at ``version``, kept only while the user's record is still at it:
        a write of this process may have brought it to the next version meanwhile, and
        what was read holds none of that write."""
        cached = self._items.get(key)
        if cached is not None and cached[0] == version:
            cached[1].update(read)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def advance(
        self, key: Hashable, before: Hashable, after: Hashable, written: Mapping[str, Entry | None]
    ) -> None:
        """A write section of this process took the user from version ``before`` to
        ``after`` writing ``written`` (ID → entry, None: removed): entries known at
        ``before`` are kept at ``after``, with the section's writes."""
        cached = self._items.get(key)
        if cached is None or cached[0] != before:
            return
        entries = cached[1]
        for memory_id, entry in written.items():
            if entry is None or entry.is_deleted:
                entries.pop(memory_id, None)
            else:
                entries[memory_id] = entry
        self._items[key] = (after, entries)

    def drop(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()
