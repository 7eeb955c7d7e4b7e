"""In-process store: nothing survives the process. For tests and demos."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from memchat.engine.model import Entry, UserKey

from ._ordering import newest_first
from .base import Capabilities, bounded_lock, resolve_timeout

T = TypeVar("T")


class _BufferedTransaction:
    """Reads see the section's own writes; nothing reaches the store unless
    the whole section succeeds, so a failed update changes nothing."""

    def __init__(self, rows: dict[str, Entry], active: int) -> None:
        self._rows = rows
        #: Active rows before this section (kept by the store, so counting is O(writes)).
        self._active = active
        self._writes: dict[str, Entry | None] = {}

    def _current(self, memory_id: str) -> Entry | None:
        if memory_id in self._writes:
            return self._writes[memory_id]
        return self._rows.get(memory_id)

    async def get(self, memory_id: str) -> Entry | None:
        return self._current(memory_id)

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        self._writes[entry.id] = entry

    async def remove(self, memory_id: str) -> None:
        self._writes[memory_id] = None

    async def count_active(self) -> int:
        return self._active + self.active_delta()

    def active_delta(self) -> int:
        def alive(entry: Entry | None) -> int:
            return int(entry is not None and not entry.is_deleted)

        return sum(alive(new) - alive(self._rows.get(i)) for i, new in self._writes.items())

    def commit(self) -> None:
        for memory_id, entry in self._writes.items():
            if entry is None:
                self._rows.pop(memory_id, None)
            else:
                self._rows[memory_id] = entry


class InMemoryStore:
    name = "inmemory"
    capabilities = Capabilities(transactions=True)

    def __init__(self, *, env: Mapping[str, str] | None = None, timeout: float | None = None) -> None:
        # ``env`` is accepted like every store's, and unused: nothing to configure.
        #: Seconds a write waits for this user's other writes.
        self.timeout = resolve_timeout(timeout)
        self._users: dict[UserKey, dict[str, Entry]] = {}
        self._locks: dict[UserKey, asyncio.Lock] = {}
        self._active: dict[UserKey, int] = {}

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def describe(self) -> str:
        return "inmemory (in this process only; memories are lost on exit)"

    async def atomic(self, key: UserKey, work: Callable[[_BufferedTransaction], Awaitable[T]]) -> T:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with bounded_lock(lock, self.timeout, "this user's other writes"):
            tx = _BufferedTransaction(self._users.get(key, {}), self._active.get(key, 0))
            result = await work(tx)
            self._active[key] = tx._active + tx.active_delta()
            tx.commit()
            if tx._rows:
                self._users[key] = tx._rows
            else:
                self._users.pop(key, None)
            return result

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        return self._users.get(key, {}).get(memory_id)

    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        entries = [e for e in self._users.get(key, {}).values() if include_deleted or not e.is_deleted]
        entries = newest_first(entries)
        return entries[:limit] if limit > 0 else entries

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        if not include_deleted:
            return self._active.get(key, 0)
        return len(self._users.get(key, {}))

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        async def work(tx: _BufferedTransaction) -> int:
            active = [e for e in tx._rows.values() if not e.is_deleted]
            for entry in list(tx._rows.values()):
                if deleted_at is None:
                    await tx.remove(entry.id)
                elif not entry.is_deleted:
                    await tx.put(replace(entry, deleted_at=deleted_at))
            return len(active)

        return await self.atomic(key, work)

    async def keyword_candidates(self, key: UserKey, query: str) -> list[Entry]:
        return [e for e in self._users.get(key, {}).values() if not e.is_deleted]
