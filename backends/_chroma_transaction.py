"""The write section of the Chroma store (``ChromaStore.atomic``): Chroma has
no transactions, so a section's writes are buffered (its reads see them) and
sent after ``work`` returns, under a per-user lock of this process."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memchat.engine.model import Entry, UserKey

from ._chroma_records import record_entry, record_id, user_filter

if TYPE_CHECKING:
    from .chromadb import ChromaStore

LOCK_STRIPES = 256

#: event loop → {(collection namespace, stripe): lock}. Locks belong to a loop,
#: so each loop has its own set (pytest runs a loop per test).
LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def stripe(key: UserKey) -> int:
    """FNV-1a-64 of ``app \\0 user`` (the reference's striping), mod 256."""
    h = 0xCBF29CE484222325
    for byte in f"{key.app}\0{key.user}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % LOCK_STRIPES


def _active(entry: Entry | None) -> bool:
    return entry is not None and not entry.is_deleted


@dataclass(slots=True)
class PendingWrite:
    entry: Entry
    #: The embedding to store; None: keep the stored one.
    vector: list[float] | None
    #: The record was removed earlier in this section: there is nothing to keep.
    fresh: bool = False


class ChromaTransaction:
    """Reads go to Chroma through the section's own pending writes; writes
    are only buffered (``ChromaStore._apply`` sends them after ``work``)."""

    def __init__(self, store: ChromaStore, key: UserKey) -> None:
        self._store, self._key = store, key
        #: memory ID → pending write, or None: removed.
        self.pending: dict[str, PendingWrite | None] = {}
        #: memory ID → the stored entry the section read (None: none), so the
        #: keyword index knows what a write replaces without reading it again.
        self.stored: dict[str, Entry | None] = {}

    async def get(self, memory_id: str) -> Entry | None:
        if memory_id in self.pending:
            write = self.pending[memory_id]
            return write.entry if write is not None else None
        entry = self.stored[memory_id] = await self._store.get(self._key, memory_id)
        return entry

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        if entry.app != self._key.app or entry.user != self._key.user:
            raise ValueError("an entry can only be written inside its own user's section")
        values = self._store.check_vector(vector) if vector is not None else None
        fresh = False
        if values is None and entry.id in self.pending:
            earlier = self.pending[entry.id]
            if earlier is None:
                fresh = True
            else:
                values, fresh = earlier.vector, earlier.fresh
        self.pending[entry.id] = PendingWrite(entry, values, fresh)

    async def remove(self, memory_id: str) -> None:
        self.pending[memory_id] = None

    async def count_active(self) -> int:
        store, key = self._store, self._key
        stats = await store._user_stats(key)
        if stats is not None:
            # The index's count (one record read) while it can be trusted: listing
            # the active records' IDs costs a request per 500 of them.
            _, before = await self.replaced(for_index=True)
            return stats.active + sum(
                _active(w.entry if w else None) - _active(before.get(mid)) for mid, w in self.pending.items()
            )
        active = set(await store.record_ids(user_filter(key, active=True)))
        for memory_id, write in self.pending.items():
            rid = record_id(key, memory_id)
            if write is None or write.entry.is_deleted:
                active.discard(rid)
            else:
                active.add(rid)
        return len(active)

    async def replaced(self, *, for_index: bool) -> tuple[dict[str, list[float]], dict[str, Entry | None]]:
        """(record ID → stored embedding of the writes that keep theirs, memory ID →
        the entry each write replaces, when ``for_index``): one read, of what the
        section did not read itself."""
        key, store = self._key, self._store
        writes = {record_id(key, mid): w for mid, w in self.pending.items() if w is not None}
        keep = {rid for rid, w in writes.items() if w.vector is None and not w.fresh}
        before = dict(self.stored)
        unknown = {record_id(key, mid): mid for mid in self.pending if mid not in before} if for_index else {}
        stored: dict[str, list[float]] = {}
        if not keep and not unknown:
            return stored, before
        include = ["metadatas", *(["embeddings"] if keep else []), *(["documents"] if unknown else [])]
        collection = await store._ready()
        found = await store._call(
            "reading", collection.get, ids=sorted(keep | unknown.keys()), include=include
        )
        embeddings = found.get("embeddings")
        documents = found.get("documents")
        for i, (rid, meta) in enumerate(zip(found["ids"], found["metadatas"], strict=True)):
            if not meta:
                continue
            if rid in keep and embeddings is not None and meta.get("has_embedding"):
                stored[rid] = [float(x) for x in embeddings[i]]
            if rid in unknown and meta.get("app_name") == key.app and meta.get("user_id") == key.user:
                before[unknown[rid]] = record_entry(documents[i] if documents else None, meta)
        return stored, before
