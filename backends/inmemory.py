"""In-process store: nothing survives the process. For tests and demos.

Each memory's embedding is kept beside it (a float32 array) and
``vector_candidates`` ranks the user's vectors exactly in numpy, the matrix
cached per user until the user's next write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from memchat.engine.model import Entry, UserKey
from memchat.engine.search.fusion import memories_in_periods
from memchat.engine.search.index import KeywordStats

if TYPE_CHECKING:
    from memchat.engine.search.candidates import KeywordPlanner

from ._buffered import BufferedWrites
from ._keyword_index import UserKeywordIndex
from ._ordering import NewestOrder, newest_first
from ._vectors import MatrixCache, UserMatrix, check_query, encode_vector
from .base import DEFAULT_VECTOR_DIMENSION, Capabilities, bounded_lock, resolve_timeout

T = TypeVar("T")


class _BufferedTransaction(BufferedWrites[np.ndarray]):
    """Reads see the section's own writes; nothing reaches the store unless
    the whole section succeeds, so a failed update changes nothing."""

    def __init__(self, store: InMemoryStore, rows: dict[str, Entry], active: int) -> None:
        super().__init__()
        self._store = store
        self._rows = rows
        #: Active rows before this section (kept by the store, so counting is O(writes)).
        self._active = active

    def _keep_vector(self, vector: Sequence[float]) -> np.ndarray:
        return np.frombuffer(encode_vector(vector, self._store.dimension), dtype="<f4")

    async def _stored(self, memory_id: str) -> Entry | None:
        return self._rows.get(memory_id)

    async def count_active(self) -> int:
        return self._active + self.active_delta()

    def active_delta(self) -> int:
        def alive(entry: Entry | None) -> int:
            return int(entry is not None and not entry.is_deleted)

        return sum(alive(new) - alive(self._rows.get(i)) for i, new in self._writes.items())

    def commit(self, vectors: dict[str, np.ndarray]) -> None:
        for memory_id, entry in self._writes.items():
            if entry is None:
                self._rows.pop(memory_id, None)
            else:
                self._rows[memory_id] = entry
        for memory_id, vector in self._vectors.items():
            if vector is None:
                vectors.pop(memory_id, None)
            else:
                vectors[memory_id] = vector


class InMemoryStore:
    name = "inmemory"
    capabilities = Capabilities(
        vector_search=True, transactions=True, native_keyword_search=True, event_time_lookup=True
    )
    #: Any dimension fits: the engine sets ``dimension`` to its embedder's.
    fixed_dimension = False

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        dimension: int | None = None,
    ) -> None:
        # ``env`` is accepted like every store's, and unused: nothing to configure.
        #: Seconds a write waits for this user's other writes.
        self.timeout = resolve_timeout(timeout)
        #: The dimension of the vectors written and searched.
        self.dimension = DEFAULT_VECTOR_DIMENSION if dimension is None else int(dimension)
        self._users: dict[UserKey, dict[str, Entry]] = {}
        self._locks: dict[UserKey, asyncio.Lock] = {}
        self._active: dict[UserKey, int] = {}
        #: user → memory ID → float32 vector (tombstones keep theirs, for restore).
        self._vectors: dict[UserKey, dict[str, np.ndarray]] = {}
        #: user → how many sections changed it (the matrix cache's signature).
        self._versions: dict[UserKey, int] = {}
        self._matrices = MatrixCache()
        self._meta: dict[str, str] = {}
        #: user → inverted index and statistics of its active memories (keyword search).
        self._index: dict[UserKey, UserKeywordIndex] = {}
        #: user → its active memories newest first (``list`` with a limit reads a slice).
        self._newest: dict[UserKey, NewestOrder] = {}

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def describe(self) -> str:
        return "inmemory (in this process only; memories are lost on exit)"

    async def atomic(self, key: UserKey, work: Callable[[_BufferedTransaction], Awaitable[T]]) -> T:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with bounded_lock(lock, self.timeout, "this user's other writes"):
            tx = _BufferedTransaction(self, self._users.get(key, {}), self._active.get(key, 0))
            result = await work(tx)
            self._active[key] = tx._active + tx.active_delta()
            vectors = self._vectors.get(key, {})
            index = self._index.setdefault(key, UserKeywordIndex())
            order = self._newest.setdefault(key, NewestOrder())
            for memory_id, entry in tx._writes.items():
                index.replace(memory_id, entry)
                order.replace(tx._rows.get(memory_id), entry)
            if not index.records:
                self._index.pop(key, None)
            if not order:
                self._newest.pop(key, None)
            tx.commit(vectors)
            if tx._rows:
                self._users[key] = tx._rows
            else:
                self._users.pop(key, None)
            if vectors:
                self._vectors[key] = vectors
            else:
                self._vectors.pop(key, None)
            if tx._writes:
                self._versions[key] = self._versions.get(key, 0) + 1
            return result

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        return self._users.get(key, {}).get(memory_id)

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

    async def indexed_keyword_candidates(
        self, key: UserKey, space: str, terms: Sequence[str], planner: KeywordPlanner | None = None
    ) -> tuple[list[Entry], KeywordStats]:
        """The active memories holding one of ``terms`` (with a ``planner``, its
        best-ranked ones) and the user's statistics (memchat/engine/search/index.py)."""
        index = self._index.get(key) or UserKeywordIndex()
        rows = self._users.get(key, {})

        def newest_first(ids: list[str]) -> dict[str, tuple[int, int, str]]:
            return {i: rows[i].newest_first for i in ids}

        ids, stats = index.lookup(space, terms, planner, newest_first)
        return [rows[i] for i in ids], stats

    async def memories_in_periods(
        self, key: UserKey, periods: Sequence[tuple[datetime, datetime]], limit: int
    ) -> list[Entry] | None:
        return memories_in_periods(self._users.get(key, {}).values(), periods, limit)

    # -- vectors -----------------------------------------------------------

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories with a vector, nearest first,
        ``score`` = cosine similarity (exact)."""
        if k <= 0:
            return []
        query = check_query(vector, self.dimension)
        rows = self._users.get(key, {})
        signature = (self.dimension, self._versions.get(key, 0))
        matrix = self._matrices.get(key, signature)
        if matrix is None:
            vectors = self._vectors.get(key, {})
            active = ((mid, vectors[mid]) for mid, e in rows.items() if not e.is_deleted and mid in vectors)
            matrix = UserMatrix.from_vectors(active, self.dimension)
            self._matrices.put(key, signature, matrix)
        best = await matrix.nearest_soon(query, k)
        # A large matrix is ranked in a thread: a write may have come meanwhile.
        return [
            rows[mid].with_score(score) for mid, score in best if mid in rows and not rows[mid].is_deleted
        ]

    async def users(self) -> list[UserKey]:
        return sorted((k for k, rows in self._users.items() if rows), key=lambda k: (k.app, k.user))

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        stored = self._vectors.get(key, {})
        return {mid: stored[mid].tolist() for mid in ids if mid in stored}

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        """Entries of any user, tombstones included, that have no vector (at
        most ``limit``; ``<= 0``: all), by (app, user, id)."""
        found: list[Entry] = []
        for key in sorted(self._users, key=lambda k: (k.app, k.user)):
            vectors = self._vectors.get(key, {})
            for mid in sorted(self._users[key]):
                if mid not in vectors:
                    found.append(self._users[key][mid])
                    if 0 < limit <= len(found):
                        return found
        return found

    async def count_missing_vectors(self) -> int:
        return sum(
            sum(1 for mid in rows if mid not in self._vectors.get(key, {}))
            for key, rows in self._users.items()
        )

    async def clear_vectors(self) -> None:
        """Forget every stored vector: the embedder changed."""
        for key in self._vectors:
            self._versions[key] = self._versions.get(key, 0) + 1
        self._vectors.clear()
        self._matrices.clear()

    async def read_meta(self, name: str) -> str | None:
        return self._meta.get(name)

    async def write_meta(self, name: str, value: str) -> None:
        self._meta[name] = value

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        rows = self._users.get(key, {})
        if limit > 0 and not include_deleted:
            order = self._newest.get(key)
            return [rows[memory_id] for memory_id in order.first(limit)] if order else []
        return newest_first(e for e in rows.values() if include_deleted or not e.is_deleted)[: limit or None]
