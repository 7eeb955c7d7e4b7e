"""The shard records a Chroma store has read for keyword search, kept per user
while the user's version (the statistics record's ``version``, a new token with
every write of the user: backends/_chroma_index.py) stays the same.

A search reads the statistics with its terms' roots in one request, then only
the shards of split terms it has not read at that version. At 100k memories a
common term is 1,250 shards of 40k postings: reading them took tens of
milliseconds of the server's time and as long again to decode, on every search.
A write of this process brings the user's shards from the version it started
at to the one it committed, less the records it wrote or removed
(``ShardCache.advance``), so the search after an add reads one shard of each
of the memory's terms, not all of them.

A user's memory IDs are kept once (``UserShards.names``), and a shard as two
arrays: its holders' places in that list (32-bit) and their four counts
(32-bit), 20 bytes a posting. Past ``MAX_POSTINGS`` the least recently used
shards go; past ``USERS`` users the least recently searched.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memchat.engine.model import UserKey

#: Users whose shards are kept per store (LRU), as for the vector matrices.
USERS = 8
#: Postings kept per user at most (20 MB); past it the least recently used shards go.
MAX_POSTINGS = 1_000_000

#: One term record's postings: its holders' places in the user's ``names`` and
#: an array of one row (content tf, topic tf, content length, topic length) each.
Slots = tuple[Any, Any]


class UserShards:
    """One user's memory IDs and the shard records read at one version."""

    __slots__ = ("levels", "names", "places", "records", "size", "version", "warmed")

    def __init__(self, version: str) -> None:
        self.version = version
        #: Whether a read of the commonest terms' shards has started at this version
        #: (``ChromaKeywordIndex.warm``): one per version is enough.
        self.warmed = False
        self.names: list[str] = []
        self.places: dict[str, int] = {}
        self.records: OrderedDict[str, Slots] = OrderedDict()
        self.size = 0
        #: Root record → its term's level, as read at this version (the times' term).
        self.levels: dict[str, int] = {}

    def place(self, ids: Sequence[str]) -> Any:
        """The places of ``ids`` in ``names`` (added where new), as an array."""
        places, names = self.places, self.names
        new = [mid for mid in dict.fromkeys(ids) if mid not in places]
        if new:
            places.update(zip(new, range(len(names), len(names) + len(new)), strict=True))
            names.extend(new)
        return np.fromiter(map(places.__getitem__, ids), dtype=np.int32, count=len(ids))

    def put(self, record: str, slots: Slots) -> None:
        previous = self.records.pop(record, None)
        if previous is not None:
            self.size -= len(previous[0])
        self.records[record] = slots
        self.size += len(slots[0])

    def get(self, record: str) -> Slots | None:
        """The record's postings if read at this version; a use, for ``trim``."""
        found = self.records.get(record)
        if found is not None:
            self.records.move_to_end(record)
        return found

    def forget(self, records: Iterable[str]) -> None:
        for record in records:
            self.levels.pop(record, None)  # a root written: its term may be split again
            dropped = self.records.pop(record, None)
            if dropped is not None:
                self.size -= len(dropped[0])

    def trim(self, limit: int) -> None:
        while self.size > limit and self.records:
            self.size -= len(self.records.popitem(last=False)[1][0])


class ShardCache:
    """LRU of user → :class:`UserShards` at the user's last version read. Searches
    and writes run in worker threads: every change holds the lock."""

    def __init__(self, users: int = USERS, max_postings: int = MAX_POSTINGS) -> None:
        self.users = users
        self.max_postings = max_postings
        self._items: OrderedDict[UserKey, UserShards] = OrderedDict()
        self._lock = threading.Lock()

    def at(self, key: UserKey, version: str) -> UserShards:
        """The user's shards read at ``version`` (a new, empty record when it moved
        on): the handle a search places its postings with, from first to last."""
        with self._lock:
            user = self._items.get(key)
            if user is None or user.version != version or len(user.names) > self.max_postings:
                user = self._items[key] = UserShards(version)
            self._items.move_to_end(key)
            while len(self._items) > self.users:
                self._items.popitem(last=False)
            return user

    def to_warm(self, key: UserKey, version: str) -> UserShards | None:
        """The user's shards at ``version`` if none of its reads warmed them yet (then
        marked warmed), else None: one warming read per user and version."""
        user = self.at(key, version)
        with self._lock:
            if user.warmed or self._items.get(key) is not user:
                return None
            user.warmed = True
            return user

    def level(self, user: UserShards, root: str) -> int | None:
        """The level of the term of the ``root`` record if read at the user's version."""
        with self._lock:
            return user.levels.get(root)

    def held(self, user: UserShards, records: Sequence[str]) -> dict[str, Slots]:
        """Those of ``records`` read at the user's version (record → its postings)."""
        with self._lock:
            return {record: slots for record in records if (slots := user.get(record)) is not None}

    def place(
        self,
        key: UserKey,
        user: UserShards,
        version: str,
        read: dict[str, tuple[list[str], Any]],
        *,
        keep: bool,
        levels: dict[str, int] | None = None,
    ) -> dict[str, Slots]:
        """Records read at ``version`` (record → holders' IDs and counts) as postings
        placed among the user's IDs; with ``keep``, kept while the user is still at
        ``version`` (a write of this process may have moved it on meanwhile), with
        the ``levels`` of the roots read."""
        with self._lock:
            placed = {
                record: (user.place(ids), np.asarray(counts, dtype=np.int32))
                for record, (ids, counts) in read.items()
            }
            if keep and self._items.get(key) is user and user.version == version:
                for record, slots in placed.items():
                    user.put(record, slots)
                user.levels.update(levels or {})
                user.trim(self.max_postings)
            return placed

    def advance(self, key: UserKey, before: str, after: str, written: Iterable[str]) -> None:
        """A write section of this process took the user from ``before`` to ``after``
        by (re)writing or removing the records ``written``: the others still hold."""
        with self._lock:
            user = self._items.get(key)
            if user is None:
                return
            if user.version != before:
                del self._items[key]
                return
            user.forget(written)
            user.version = after

    def drop(self, key: UserKey) -> None:
        with self._lock:
            self._items.pop(key, None)
