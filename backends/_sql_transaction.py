"""The write section of the SQL stores (``SQLStore.atomic``), and the one
hook through which a vector store keeps its vectors beside the rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from memchat.engine.model import Entry, UserKey

from ._sql_postings import PostingChange

if TYPE_CHECKING:
    from .sql import SQLStore


@dataclass(frozen=True, slots=True)
class VectorChange:
    """What a write section did to one of the user's vectors, told to
    ``SQLStore.write_vector`` in the same transaction:

    * ``put``: the row ``memory_id`` was written; ``vector`` is its new vector
      (None: keep the stored one), ``active`` False for a tombstone;
    * ``remove``: the row ``memory_id`` is gone;
    * ``remove_user``: every row of the user is gone;
    * ``tombstone_user``: every active row of the user became a tombstone.
    """

    kind: Literal["put", "remove", "remove_user", "tombstone_user"]
    memory_id: str = ""
    vector: Sequence[float] | None = None
    active: bool = True


class SQLTransaction:
    """One atomic section of one user on an SQL store: rows, the keyword index
    and the vectors written on ``connection``, all in one database transaction."""

    def __init__(self, store: SQLStore, conn: AsyncConnection, key: UserKey) -> None:
        self._store, self._conn, self._key = store, conn, key
        #: The user's (version, active) before the section's first write and after its last.
        self._before: tuple[int, int] | None = None
        self._after: tuple[int, int] | None = None
        #: What the section did to the user's vectors, for the cached matrix.
        self._upserts: dict[str, np.ndarray] = {}
        self._removals: set[str] = set()
        #: The cached matrix cannot be brought along (a write whose versions were not
        #: read, or a restore of a vector not in hand): it is dropped after the commit.
        self._matrix_unknowable = False
        #: Rows as this section knows them (read, or written by it): a put needs the
        #: entry it replaces, which the section has usually just read.
        self._known: dict[str, Entry | None] = {}
        #: Rows this section wrote or removed (PostgreSQL keeps its planner's statistics with it).
        self.rows_written = 0
        #: What the section did to the user's postings and rows, for the caches of them.
        self._postings: list[PostingChange] = []
        self._written: dict[str, Entry | None] = {}

    def _wrote(self, versions: tuple[tuple[int, int], tuple[int, int]] | None) -> None:
        if versions is None:  # no cached matrix to bring along: the versions were not read
            self._matrix_unknowable = True
            return
        if self._before is None:
            self._before = versions[0]
        self._after = versions[1]

    def advance_caches(self) -> None:
        """After the commit: bring this process's cached matrix, postings and entries of the user along."""
        store, key = self._store, self._key
        if self._before is None or self._after is None:
            return
        store.keyword_index.postings.advance(key, self._before[0], self._after[0], self._postings)
        store._entries.advance(key, self._before[0], self._after[0], self._written)
        if self._matrix_unknowable:
            store._matrices.drop(key)
            return
        store._matrices.advance(
            key,
            store._matrix_signature(self._before),
            store._matrix_signature(self._after),
            self._upserts,
            self._removals,
        )

    def _versions_wanted(self) -> bool:
        """Whether a cache of this process follows the section's writes (then the
        user's versions are read with them: one statement more)."""
        store, key = self._store, self._key
        return key in store._matrices or key in store.keyword_index.postings or key in store._entries

    @property
    def connection(self) -> AsyncConnection:
        """The section's connection, inside its transaction (for statements of the store's own)."""
        return self._conn

    @property
    def key(self) -> UserKey:
        return self._key

    async def get(self, memory_id: str) -> Entry | None:
        if memory_id not in self._known:
            self._known[memory_id] = await self._store._get(self._conn, self._key, memory_id)
        return self._known[memory_id]

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        if entry.app != self._key.app or entry.user != self._key.user:
            raise ValueError("an entry can only be written inside its own user's section")
        store = self._store
        row = store._row(entry)
        if vector is not None:
            value = store._embedding_value(vector)
            if value is not None:
                # Absent from the row, the stored embedding is kept on conflict.
                row["embedding"] = value
        old = await self.get(entry.id)
        await self._conn.execute(store._upsert(row))
        self._known[entry.id] = self._written[entry.id] = entry
        self.rows_written += 1
        self._wrote(
            await store.keyword_index.replace(
                self._conn,
                self._key,
                entry.id,
                old,
                entry,
                versions=self._versions_wanted(),
                changes=self._postings,
            )
        )
        if entry.is_deleted:
            self._removals.add(entry.id)
            self._upserts.pop(entry.id, None)
        elif vector is not None:
            self._upserts[entry.id] = np.asarray(vector, dtype=np.float32).reshape(-1)
            self._removals.discard(entry.id)
        elif old is not None and old.is_deleted:
            self._matrix_unknowable = True  # a restore brings back a stored vector not in hand
        await store.write_vector(
            self._conn, self._key, VectorChange("put", entry.id, vector, active=not entry.is_deleted)
        )

    async def remove(self, memory_id: str) -> None:
        store = self._store
        t = store.table
        old = await self.get(memory_id)
        await self._conn.execute(sa.delete(t).where(store._scope(self._key), t.c.memory_id == memory_id))
        self._known[memory_id] = self._written[memory_id] = None
        self.rows_written += 1
        self._wrote(
            await store.keyword_index.replace(
                self._conn,
                self._key,
                memory_id,
                old,
                None,
                versions=self._versions_wanted(),
                changes=self._postings,
            )
        )
        self._removals.add(memory_id)
        self._upserts.pop(memory_id, None)
        await store.write_vector(self._conn, self._key, VectorChange("remove", memory_id))

    async def count_active(self) -> int:
        return await self._store._active_count(self._conn, self._key)
