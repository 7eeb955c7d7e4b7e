"""The Chroma store's cache of decoded memories, checked against the index version.

A Chroma server spends about a tenth of a millisecond per record it returns
with its document and metadata, so the few hundred candidates of each search
would cost tens of milliseconds. The store keeps the records it has read, per
user, tagged with the user's index version (backends/_chroma_index.py: a new
token with every write of that user, by any memchat process keeping the index);
a search reads the version with its postings or beside its nearest-neighbour
query and reuses the cache only while the version is the same. A write section
of this process carries the cache over to the version it wrote, and the one
that writes a user's first memories starts it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from memchat.engine.model import Entry, UserKey

from ._sql_entries import VersionedEntries


class EntryCache(VersionedEntries):
    """LRU of user → (index version, record ID → entry), with the hand-over of a
    write section of this process (:meth:`take`, :meth:`carry`)."""

    def take(self, key: UserKey) -> tuple[Hashable, dict[str, Entry]] | None:
        """Remove the user's records (a write section starts) and return them."""
        return self._items.pop(key, None)

    def carry(
        self,
        key: UserKey,
        taken: tuple[Hashable, dict[str, Entry]] | None,
        before: str,
        after: str,
        written: Mapping[str, Entry | None],
    ) -> None:
        """A section of this process took the user's index from version ``before`` to
        ``after`` writing ``written`` (record ID → entry, None: removed): records
        taken at ``before`` are kept at ``after``, with the section's writes."""
        if taken is None or taken[0] != before or not before:
            return
        self._items[key] = taken
        self.advance(key, before, after, written)

    def start(self, key: UserKey, version: str, written: Mapping[str, Entry | None]) -> None:
        """A section of this process wrote the first memories of a user (the index
        held no statistics of them, so no memory): they are all the user's records
        at ``version``."""
        self._items.pop(key, None)
        self.at(key, version)  # empty, and the least recently used user past the bound goes
        self.advance(key, version, version, written)

    def fill(self, key: UserKey, version: str, read: Mapping[str, Entry]) -> None:
        """Entries read at ``version``, kept unless the user is kept at another version
        (a write of this process went past it meanwhile)."""
        cached = self._items.get(key)
        if cached is not None and cached[0] != version:
            return
        self.at(key, version).update(read)
