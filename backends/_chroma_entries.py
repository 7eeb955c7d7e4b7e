"""The Chroma store's cache of decoded memories, checked against the index version.

A Chroma server spends about a tenth of a millisecond per record it returns
with its document and metadata, so the few hundred candidates of each search
would cost tens of milliseconds. The store keeps the records it has read, per
user, tagged with the user's index version (backends/_chroma_index.py: a new
token with every write of that user, by any memchat process keeping the index);
a search reads the version with its postings or beside its nearest-neighbour
query and reuses the cache only while the version is the same. A write section
of this process carries the cache over to the version it wrote.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from memchat.engine.model import Entry, UserKey

#: Users whose records are kept per store (LRU).
CACHED_USERS = 8


class EntryCache:
    """LRU of user → (index version, record ID → entry)."""

    def __init__(self, users: int = CACHED_USERS) -> None:
        self.users = users
        self._items: OrderedDict[UserKey, tuple[str, dict[str, Entry]]] = OrderedDict()

    def at(self, key: UserKey, version: str) -> dict[str, Entry]:
        """The user's cached records at ``version`` (emptied when the version moved);
        the caller adds what it reads."""
        cached = self._items.get(key)
        if cached is None or cached[0] != version:
            cached = (version, {})
            self._items[key] = cached
        self._items.move_to_end(key)
        while len(self._items) > self.users:
            self._items.popitem(last=False)
        return cached[1]

    def take(self, key: UserKey) -> tuple[str, dict[str, Entry]] | None:
        """Remove the user's records (a write section starts) and return them."""
        return self._items.pop(key, None)

    def carry(
        self,
        key: UserKey,
        taken: tuple[str, dict[str, Entry]] | None,
        before: str,
        after: str,
        written: Mapping[str, Entry | None],
    ) -> None:
        """A section of this process took the user's index from version ``before`` to
        ``after`` writing ``written`` (record ID → entry, None: removed): records
        taken at ``before`` are kept at ``after``, with the section's writes."""
        if taken is None or taken[0] != before or not before:
            return
        records = taken[1]
        for record_id, entry in written.items():
            if entry is None:
                records.pop(record_id, None)
            else:
                records[record_id] = entry
        self._items[key] = (after, records)

    def drop(self, key: UserKey) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()
