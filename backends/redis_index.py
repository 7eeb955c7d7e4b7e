"""The Redis store's inverted index for keyword search (memchat/engine/search/index.py).

Beside each user's hashes (same hash tag, so one cluster slot)::

    <base>:kw:t:<term>    set of the IDs of the active memories holding <term>
    <base>:kw:df          hash  term → how many active memories hold it
    <base>:kw:stats       hash  active, k_content, k_topics, s_content, s_topics

They change in the same MULTI/EXEC as the entries (``queue_replace``), under
the section's WATCH of the user's hashes, so a write and its postings land
together or not at all. A search reads the postings of its terms (SUNION) and
the statistics in one round trip, then only the memories holding a term (HMGET)
instead of the whole hash. (The df hash is the list of the user's terms, which a
hard clear deletes; the scorer counts document frequencies among the
candidates, which are every memory holding a query term.)

Self-healing instead of a migration: if the recorded active count differs from
the active hash's size (a store written before the index existed, or by a
memchat that does not keep it), that search scans as before and the user's
index is rebuilt in a write section (``rebuild``), losing nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memchat.engine.model import Entry
from memchat.engine.search.index import IndexRecord, KeywordStats, index_record

__all__ = ["IndexKeys", "index_keys", "lookup", "queue_drop", "queue_replace", "record_of"]

_STATS_FIELDS = ("active", "k_content", "k_topics", "s_content", "s_topics")


class IndexKeys:
    __slots__ = ("df", "stats", "term_prefix")

    def __init__(self, base: str) -> None:
        self.df = f"{base}:kw:df"
        self.stats = f"{base}:kw:stats"
        self.term_prefix = f"{base}:kw:t:"

    def term(self, term: str) -> str:
        return self.term_prefix + term


def index_keys(base: str) -> IndexKeys:
    return IndexKeys(base)


def record_of(entry: Entry | None) -> IndexRecord | None:
    """The index record of an entry that counts (active), else None."""
    if entry is None or entry.is_deleted:
        return None
    return index_record(entry.memory)


def queue_replace(
    pipe: Any, keys: IndexKeys, memory_id: str, before: IndexRecord | None, after: IndexRecord | None
) -> None:
    """Queue (inside MULTI) the change of one memory's postings and the statistics."""
    if before == after:
        return
    old = set(before.terms) if before is not None else set()
    new = set(after.terms) if after is not None else set()
    for term in old - new:
        pipe.srem(keys.term(term), memory_id)
        pipe.hincrby(keys.df, term, -1)
    for term in new - old:
        pipe.sadd(keys.term(term), memory_id)
        pipe.hincrby(keys.df, term, 1)
    for record, sign in ((before, -1), (after, 1)):
        if record is not None:
            pipe.hincrby(keys.stats, "active", sign)
            for name, n in zip(_STATS_FIELDS[1:], record.lengths, strict=True):
                if n:
                    pipe.hincrby(keys.stats, name, sign * n)


def queue_drop(pipe: Any, keys: IndexKeys, terms: Sequence[str]) -> None:
    """Queue the deletion of the whole index of a user whose df hash lists ``terms``."""
    names = [keys.df, keys.stats, *(keys.term(t) for t in terms)]
    for start in range(0, len(names), 500):
        pipe.delete(*names[start : start + 500])


async def lookup(
    client: Any, keys: IndexKeys, active_key: str, space: str, terms: Sequence[str]
) -> tuple[list[str], KeywordStats] | None:
    """(IDs of the memories holding a term, the statistics), or None when the
    index does not match the active hash (it needs a rebuild)."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.hlen(active_key)
        pipe.hmget(keys.stats, list(_STATS_FIELDS))
        pipe.sunion([keys.term(t) for t in terms])
        size, stats, ids = await pipe.execute()
    values = [int(v or 0) for v in stats]
    if values[0] != int(size):
        return None
    # Every holder of a term is a candidate: the scorer counts document frequencies itself.
    return sorted(ids), KeywordStats.of(space, values[0], values[1:])
