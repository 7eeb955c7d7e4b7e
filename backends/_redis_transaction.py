"""The write section of the Redis store (``RedisStore.atomic``): reads under
WATCH, writes buffered and sent in one MULTI/EXEC."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memchat.engine.model import Entry, UserKey, to_micros

from ._buffered import BufferedWrites
from ._redis_layout import UserKeys, encode_entry
from ._vectors import encode_vector
from .redis_index import index_keys, indexed_terms, queue_build, queue_drop, queue_replace, record_of


class RedisTransaction(BufferedWrites[bytes]):
    """Reads go to Redis at once (under WATCH) and see the section's own
    writes; writes are buffered until the section's MULTI/EXEC."""

    def __init__(
        self,
        pipe: Any,
        key: UserKey,
        keys: UserKeys,
        *,
        dimension: int,
        decode: Callable[[str, UserKey, str], Entry],
    ) -> None:
        """``decode(raw, key, memory_id)``: the store's entry of a stored value."""
        super().__init__()
        self._pipe, self._key, self._keys = pipe, key, keys
        self._dimension, self._decode = dimension, decode
        #: Whether an ID was found in the active hash when it was read.
        self._was_active: dict[str, bool] = {}
        #: The stored entry of each ID read (before this section's writes).
        self._previous: dict[str, Entry | None] = {}
        #: Set by ``rebuild_index``: (the terms of the index to drop, the active entries to index).
        self._rebuild: tuple[list[str], list[Entry]] | None = None

    async def _stored(self, memory_id: str) -> Entry | None:
        raw = await self._pipe.hget(self._keys.active, memory_id)
        self._was_active[memory_id] = raw is not None
        if raw is None:
            raw = await self._pipe.hget(self._keys.deleted, memory_id)
        entry = None if raw is None else self._decode(raw, self._key, memory_id)
        self._previous.setdefault(memory_id, entry)
        return entry

    def _keep_vector(self, vector: Sequence[float]) -> bytes:
        return encode_vector(vector, self._dimension)

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        if entry.app != self._key.app or entry.user != self._key.user:
            raise ValueError("an entry can only be written inside its own user's section")
        await super().put(entry, vector)

    async def count_active(self) -> int:
        count = int(await self._pipe.hlen(self._keys.active))
        for memory_id, entry in self._writes.items():
            if memory_id not in self._was_active:
                self._was_active[memory_id] = bool(await self._pipe.hexists(self._keys.active, memory_id))
            now_active = entry is not None and not entry.is_deleted
            count += int(now_active) - int(self._was_active[memory_id])
        return count

    async def active_entries(self) -> list[Entry]:
        """Every active entry as the section sees it (for ``clear``)."""
        stored = await self._pipe.hgetall(self._keys.active)
        entries = {mid: self._decode(raw, self._key, mid) for mid, raw in stored.items()}
        for mid in stored:
            self._was_active[mid] = True
        for mid, entry in self._writes.items():
            entries[mid] = entry  # type: ignore[assignment]
        return [e for e in entries.values() if e is not None and not e.is_deleted]

    async def index_changes(self) -> list[tuple[str, Any, Any]]:
        """(memory ID, index record before, after) of every write: read now, under
        WATCH, whatever the section did not read itself."""
        changes = []
        for memory_id, entry in self._writes.items():
            if memory_id not in self._previous:
                await self._stored(memory_id)
            before = self._previous[memory_id] if self._was_active.get(memory_id) else None
            changes.append((memory_id, record_of(before), record_of(entry)))
        return changes

    async def rebuild_index(self) -> None:
        """Make the section re-create the user's keyword index from its active entries."""
        names = await indexed_terms(self._pipe, index_keys(self._keys.active))
        self._rebuild = (names, await self.active_entries())

    def matrix_changes(self) -> tuple[dict[str, Any], set[str]] | None:
        """(ID → new vector, IDs gone) of the user's active vectors, or None when a
        write brings back a vector not in hand (a restore without a new one)."""
        import numpy as np

        upserts: dict[str, Any] = {}
        removals: set[str] = set()
        for memory_id, entry in self._writes.items():
            blob = self._vectors.get(memory_id)
            if entry is None or entry.is_deleted:
                removals.add(memory_id)
            elif blob is not None:
                upserts[memory_id] = np.frombuffer(blob, dtype="<f4")
            elif not self._was_active.get(memory_id) and self._previous.get(memory_id) is not None:
                return None
        return upserts, removals

    def queue_writes(self, pipe: Any, index_changes: Sequence[tuple[str, Any, Any]] = ()) -> None:
        index = index_keys(self._keys.active)
        if self._rebuild is not None:
            names, entries = self._rebuild
            queue_drop(pipe, names)
            queue_build(pipe, index, entries)
            for start in range(0, len(entries), 1000):
                chunk = entries[start : start + 1000]
                pipe.zadd(index.recent, {e.id: to_micros(e.updated_at) for e in chunk})
                dated = {
                    e.id: to_micros(e.memory.event_time) for e in chunk if e.memory.event_time is not None
                }
                if dated:
                    pipe.zadd(index.when, dated)
        for memory_id, before, after in index_changes:
            queue_replace(pipe, index, memory_id, before, after)
        for memory_id, entry in self._writes.items():
            if entry is None:
                pipe.hdel(self._keys.active, memory_id)
                pipe.hdel(self._keys.deleted, memory_id)
                pipe.zrem(index.recent, memory_id)
                pipe.zrem(index.when, memory_id)
            elif entry.is_deleted:
                pipe.hset(self._keys.deleted, memory_id, encode_entry(entry))
                pipe.hdel(self._keys.active, memory_id)
                pipe.zrem(index.recent, memory_id)
                pipe.zrem(index.when, memory_id)
            else:
                pipe.hset(self._keys.active, memory_id, encode_entry(entry))
                pipe.hdel(self._keys.deleted, memory_id)
                pipe.zadd(index.recent, {memory_id: to_micros(entry.updated_at)})
                if entry.memory.event_time is None:
                    pipe.zrem(index.when, memory_id)
                else:
                    pipe.zadd(index.when, {memory_id: to_micros(entry.memory.event_time)})
        for memory_id, blob in self._vectors.items():
            if blob is None:
                pipe.hdel(self._keys.vectors, memory_id)
            else:
                pipe.hset(self._keys.vectors, memory_id, blob)
        if self._writes:
            pipe.incr(self._keys.version)
