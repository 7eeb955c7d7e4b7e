"""The SQL stores' table and rows: the memories table (with the keyword
index's tables beside it), how an entry becomes a row and back, and the
hooks a dialect overrides (column types, upsert, vector encoding)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memchat.engine.model import Entry, Memory, UserKey, from_micros, to_micros
from memchat.engine.vectors import ProgressCallback

from ._cache import DecodeCache
from ._sql_calls import SQLCalls
from ._sql_entries import VersionedEntries
from ._sql_schema import (
    MEMORY_KEY,
    check_dimension,
    json_list,
    memories_table,
    meta_table,
    short_identifier,
    validate_table_name,
    vectors_table,
)
from ._sql_transaction import VectorChange
from ._vectors import MatrixCache, encode_vector
from .base import resolve_timeout
from .sql_index import SQLKeywordIndex


def _time(micros: int) -> datetime:
    """A NOT NULL time column's value as a datetime."""
    return from_micros(int(micros)) or datetime.fromtimestamp(0)


class SQLTables(SQLCalls):
    """The table and row half of ``SQLStore``."""

    max_table_name = 64
    #: Vectors are float32 BLOBs in the ``<table>_vectors`` table beside the
    #: memories (``self.vector_table``) and are ranked in numpy; False for a store with
    #: its own vector index (sqlitevec, pgvector).
    blob_vectors = True
    #: False: any dimension fits (the engine sets ``dimension`` to its
    #: embedder's); True: the index was made for ``dimension`` only.
    fixed_dimension = False
    #: How the server aggregates a term's postings best (sql_index.py, _packed_postings).
    postings_apart = True

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        table: str = "memories",
        location: str = "",
        schema: str | None = None,
        secret: str | None = None,
        timeout: float | None = None,
        dimension: int | None = None,
        **table_options: Any,
    ) -> None:
        if dimension is not None or not hasattr(self, "dimension"):
            #: The dimension of the vectors written and searched (see ``fixed_dimension``).
            self.dimension = check_dimension(dimension)
        self.engine = engine
        self.location = location
        #: Seconds a call may take (connecting, queries, lock waits) before it fails.
        self.timeout = resolve_timeout(timeout)
        #: The driver connections this store made, shut down when a call times out.
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()
        #: Masked (***) out of every error message (a DSN password).
        self._secret = secret
        self.metadata = sa.MetaData()
        self.table = memories_table(
            self.metadata,
            validate_table_name(table, self.max_table_name),
            self._json_type(),
            schema=schema,
            **table_options,
        )
        #: Where the vectors are: the table beside the memories (``blob_vectors``), the
        #: memories table itself (a store whose vector column is in the row: pgvector,
        #: mysqlvec on a server with a vector type), or None (sqlitevec's own index).
        self.vector_table: sa.Table | None = None
        if self.blob_vectors:
            self.vector_table = vectors_table(
                self.metadata, self.table, self._blob_type(), schema=schema, **table_options
            )
        self.meta_table = meta_table(self.metadata, schema=schema, **table_options)
        #: The inverted index and statistics of keyword search (sql_index.py).
        self.keyword_index = SQLKeywordIndex(
            self.metadata,
            self.table,
            short_identifier=short_identifier,
            schema=schema,
            postings_apart=self.postings_apart,
            **table_options,
        )
        #: Whether the index is complete (built on open; until then searches scan).
        self._index_ready = False
        #: Told how building the keyword index on open goes (set by MemoryService).
        self.progress: ProgressCallback | None = None
        #: The engine write sections run on (a dialect may tag it, e.g. SQLite's
        #: BEGIN IMMEDIATE).
        self._write_engine: AsyncEngine = engine
        self._schema_ready = False
        self._decoded: DecodeCache[Entry] = DecodeCache()
        self._matrices = MatrixCache()
        #: Entries read per user at the user's current version (``_sql_entries``).
        self._entries = VersionedEntries()

    # -- hooks -----------------------------------------------------------

    def _json_type(self) -> sa.types.TypeEngine:
        return sa.JSON()

    def _upsert_into(self, table: sa.Table, row: dict[str, Any], keys: Sequence[str]) -> sa.Executable:
        """INSERT ``row``, or on a conflict of ``keys`` UPDATE the row's other columns."""
        raise NotImplementedError

    def _upsert(self, row: dict[str, Any]) -> sa.Executable:
        return self._upsert_into(self.table, row, MEMORY_KEY)

    def _blob_type(self) -> sa.types.TypeEngine:
        """The column type of a float32 vector (BLOB; BYTEA on PostgreSQL)."""
        return sa.LargeBinary()

    def _encode(self, vector: Sequence[float]) -> Any:
        """The ``embedding`` column's value for ``vector``."""
        return encode_vector(vector, self.dimension)

    @property
    def vectors_in_row(self) -> bool:
        """Whether the memories table's own ``embedding`` column holds the vectors."""
        return self.vector_table is self.table

    def _embedding_value(self, vector: Sequence[float]) -> Any:
        """What a write stores in the row's ``embedding`` column (None: the store keeps
        its vectors out of the row)."""
        return self._encode(vector) if self.vectors_in_row else None

    async def write_vector(self, conn: AsyncConnection, key: UserKey, change: VectorChange) -> None:
        """The vector hook: told, inside the write section and on its connection,
        each change to ``key``'s vectors. The base keeps the vectors table beside the
        memories; a store whose vectors are in the row (``_embedding_value``) has
        nothing more to do; one with its own vector index (sqlitevec) keeps it here."""
        v = self.vector_table
        if v is None or v is self.table:
            return
        scope = sa.and_(v.c.app_name == key.app, v.c.user_id == key.user)
        if change.kind == "put":
            if change.vector is not None:  # None: the stored vector stays
                row = {"app_name": key.app, "user_id": key.user, "memory_id": change.memory_id}
                row["embedding"] = self._encode(change.vector)
                await conn.execute(self._upsert_into(v, row, MEMORY_KEY))
        elif change.kind == "remove":
            await conn.execute(sa.delete(v).where(scope, v.c.memory_id == change.memory_id))
        elif change.kind == "remove_user":
            await conn.execute(sa.delete(v).where(scope))
        # tombstone_user: a tombstone keeps its vector (a restore brings it back), as a row did.

    def describe(self) -> str:
        return f"{self.name} ({self.location})" if self.location else self.name

    def _scope(self, key: UserKey) -> sa.ColumnElement[bool]:
        t = self.table
        return sa.and_(t.c.app_name == key.app, t.c.user_id == key.user)

    def _row(self, entry: Entry) -> dict[str, Any]:
        m = entry.memory
        return {
            "app_name": entry.app,
            "user_id": entry.user,
            "memory_id": entry.id,
            "memory": m.text,
            "topics": list(m.topics),
            "kind": m.kind,
            "event_time": to_micros(m.event_time) if m.event_time is not None else None,
            "participants": list(m.participants),
            "location": m.location,
            "created_at": to_micros(entry.created_at),
            "updated_at": to_micros(entry.updated_at),
            "deleted_at": to_micros(entry.deleted_at) if entry.deleted_at is not None else None,
        }

    def _entry(self, row: Any) -> Entry:
        """The entry of one row; decoded once per distinct row content (see _cache)."""
        try:
            key = tuple(tuple(v) if isinstance(v, list) else v for v in row)
            return self._decoded.get(key, lambda: self._decode_row(row))
        except TypeError:  # a column this cache cannot key on (e.g. a vector): decode directly
            return self._decode_row(row)

    @staticmethod
    def _decode_row(row: Any) -> Entry:
        memory = Memory(
            text=row.memory,
            topics=json_list(row.topics),
            kind=row.kind or "fact",
            event_time=from_micros(row.event_time),
            participants=json_list(row.participants),
            location=row.location or "",
        )
        return Entry(
            id=row.memory_id,
            app=row.app_name,
            user=row.user_id,
            memory=memory,
            created_at=_time(row.created_at),
            updated_at=_time(row.updated_at),
            deleted_at=from_micros(row.deleted_at),
        )

    def _newest_first(self, stmt: sa.Select) -> sa.Select:
        t = self.table
        return stmt.order_by(t.c.updated_at.desc(), t.c.created_at.desc(), t.c.memory_id.asc())

    def _row_columns(self) -> list[sa.Column[Any]]:
        """What reads select: every column but a vector store's embedding
        (reads never ship vectors back)."""
        return [c for c in self.table.c if c.name != "embedding"]

    async def _get(self, conn: AsyncConnection, key: UserKey, memory_id: str) -> Entry | None:
        t = self.table
        stmt = sa.select(*self._row_columns()).where(self._scope(key), t.c.memory_id == memory_id)
        row = (await conn.execute(stmt)).first()
        return self._entry(row) if row is not None else None

    async def _count(self, conn: AsyncConnection, key: UserKey, *, include_deleted: bool) -> int:
        t = self.table
        stmt = sa.select(sa.func.count()).select_from(t).where(self._scope(key))
        if not include_deleted:
            stmt = stmt.where(t.c.deleted_at.is_(None))
        return int((await conn.execute(stmt)).scalar_one())
