"""The postings an SQL store has read for keyword search, kept per user while the
user's version (``<table>_stats.version``, bumped in the transaction of every
write of the user, in any process) stays the same.

A search reads the version with the statistics it needs anyway, then only the
postings of the query terms it has not read at that version; the ranking
(``CandidatePlan.choose``) runs over numpy columns, as the in-memory store's.
Postings read after the version was (same transaction) are at least that new,
and no write leaves the version alone, so another process's write is seen at
the next search. A write section of this process brings the user's postings
from the version it started at to the one it committed, with the postings it
removed and wrote (``PostingsCache.advance``): without that, every search after
an add read again all postings of its terms (a common term's tens of thousands
at 100k memories).

Past ``MAX_POSTINGS`` a user's record drops the terms no search has used for
longest, not everything: a reset made the next searches read their common
terms again, tens of milliseconds each at 100k memories. Counts and document
numbers are kept as 32-bit integers (20 bytes a posting) and widened for
ranking; the memory IDs of the document numbers a search returned are kept
with them, so the next search that returns them does not look them up, and so
are the times of those whose tie at the candidate limit a search cut.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Users whose postings are kept per store (LRU), as for the vector matrices.
POSTING_CACHE_USERS = 8
#: Postings kept per user at most (20 MB); past it the least recently used terms go.
MAX_POSTINGS = 1_000_000


@dataclass(frozen=True, slots=True)
class PostingChange:
    """One memory's postings (stored term → its four counts) before and after a
    write, and its (updated_at, created_at) µs after it (None: no longer active);
    ``doc`` is its number among the user's memories (``sql_index``)."""

    doc: int
    memory_id: str
    before: Mapping[str, Sequence[int]]
    after: Mapping[str, Sequence[int]]
    times: tuple[int, int] | None


class UserPostings:
    """One user's postings of some terms at one version: each term its holders'
    document numbers and (content tf, topic tf, content length, topic length)
    rows, and the memory IDs of the document numbers looked up so far."""

    __slots__ = ("names", "size", "terms", "times", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.terms: dict[str, tuple[Any, Any]] = {}
        #: Document number → memory ID, of those a search has named.
        self.names: dict[int, str] = {}
        #: Document number → (updated_at, created_at) µs, of those a search has timed.
        self.times: dict[int, tuple[int, int]] = {}
        self.size = 0

    def add(self, term: str, docs: Any, counts: Any, version: int) -> tuple[Any, Any]:
        """The term's postings as read at ``version`` (``docs``: the holders'
        document numbers, ``counts``: one row of four per holder), as (docs,
        counts). Kept only while this record is still at ``version``: a write of
        this process may have brought it to the next one while the read was under
        way, and the read holds none of that write."""
        postings = (
            np.asarray(docs).astype(np.int32),
            np.asarray(counts).astype(np.int32).reshape(len(docs), 4),
        )
        if self.version == version:
            previous = self.terms.pop(term, None)
            if previous is not None:
                self.size -= len(previous[0])
            self.terms[term] = postings
            self.size += len(docs)
        return postings

    def get(self, term: str) -> tuple[Any, Any] | None:
        """The term's (docs, counts) if read at this version; a use, for
        :meth:`trim`'s least-recently-used order."""
        postings = self.terms.pop(term, None)
        if postings is not None:
            self.terms[term] = postings
        return postings

    def name(self, found: Mapping[int, str], version: int) -> None:
        """Memory IDs of document numbers read at ``version`` (kept only at it)."""
        if self.version == version:
            self.names.update(found)

    def time(self, found: Mapping[int, tuple[int, int]], version: int) -> None:
        """Times of document numbers read at ``version`` (kept only at it)."""
        if self.version == version:
            self.times.update(found)

    def trim(self, limit: int) -> None:
        """Drop the terms used longest ago until at most ``limit`` postings are kept."""
        terms = self.terms
        while self.size > limit and terms:
            self.size -= len(terms.pop(next(iter(terms)))[0])
        if len(self.names) > limit:
            self.names.clear()
        if len(self.times) > limit:
            self.times.clear()

    def apply(self, change: PostingChange) -> None:
        """The memory's postings of the terms held here, as ``change`` left them."""
        doc = change.doc
        for term in change.before.keys() & self.terms.keys():
            found, counts = self.terms[term]
            keep = found != doc
            self.terms[term] = (found[keep], counts[keep])
            self.size -= len(found) - int(keep.sum())
        # A number freed by a removal may be given to the next memory added.
        self.names.pop(doc, None)
        self.times.pop(doc, None)
        if change.times is not None:
            self.names[doc] = change.memory_id
            self.times[doc] = change.times
        for term in change.after.keys() & self.terms.keys():
            found, counts = self.terms[term]
            row = np.asarray(change.after[term], dtype=np.int32).reshape(1, 4)
            self.terms[term] = (np.append(found, np.int32(doc)), np.concatenate([counts, row]))
            self.size += 1

    @staticmethod
    def columns(parts: Sequence[tuple[Any, Any]]) -> tuple[Any, Any, Any]:
        """(holder docs, term numbers, counts) of every posting of the terms whose
        (docs, counts) are ``parts``, in that order."""
        holders = np.concatenate([docs for docs, _ in parts])
        counts = np.concatenate([rows for _, rows in parts]).astype(np.float64)
        which = np.repeat(np.arange(len(parts)), [len(docs) for docs, _ in parts])
        return holders, which, counts


class PostingsCache:
    """LRU of user → :class:`UserPostings` at the user's last version read."""

    def __init__(self, users: int = POSTING_CACHE_USERS) -> None:
        self.users = users
        self._items: OrderedDict[Hashable, UserPostings] = OrderedDict()

    def at(self, key: Hashable, version: int) -> UserPostings:
        """The user's postings read at ``version`` (a new, empty record when it moved
        on), trimmed to ``MAX_POSTINGS``."""
        cached = self._items.get(key)
        if cached is None or cached.version != version:
            cached = self._items[key] = UserPostings(version)
        cached.trim(MAX_POSTINGS)
        self._items.move_to_end(key)
        while len(self._items) > self.users:
            self._items.popitem(last=False)
        return cached

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def advance(self, key: Hashable, before: int, after: int, changes: Sequence[PostingChange]) -> None:
        """A write section of this process took the user from version ``before`` to
        ``after`` by ``changes`` (all of its writes): postings read at ``before`` are
        brought to ``after``; any at another version are left to be read again."""
        cached = self._items.get(key)
        if cached is None or cached.version != before:
            return
        for change in changes:
            cached.apply(change)
        cached.version = after

    def clear(self) -> None:
        self._items.clear()
