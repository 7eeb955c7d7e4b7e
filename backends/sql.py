"""The SQL family's shared store: one SQLAlchemy (async) implementation.

SQLite, MySQL/MariaDB and PostgreSQL differ only in how a DSN is built, how a
user's writers are serialised, and how an upsert is spelt; subclasses supply
those three hooks (and may take over schema creation, ``_create_schema``).
Rows hold the normalised memory in plain columns (no JSON blob to drift from
the columns), times as integer microseconds since the epoch so ordering is
exact and identical on every dialect.

Vectors: each row has an ``embedding`` column (BLOB / BYTEA of little-endian
float32, NULL when the memory has none yet), written in the same statement as
the row, and ``vector_candidates`` ranks the user's vectors exactly in numpy
over a per-user cache (``backends/_vectors.py``). The cache is reused while a
cheap signature of the user's rows with a vector (count, sum and max of
``updated_at``) is unchanged, so another process's writes are seen at the next
search. A table made before vectors existed gets the column on open (ALTER
TABLE … ADD COLUMN, under the same lock that serialises table creation).
Stores with a native vector index (sqlitevec, pgvector, mysqlvec on a server
with a vector type) replace this part.

``memchat_meta(name, value)`` holds small per-table records (the embedder that
made the stored vectors: ``read_meta`` / ``write_meta``), keyed
``<table>:<name>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects.mysql import MEDIUMTEXT
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memchat.engine.model import (
    BackendError,
    ConfigError,
    Entry,
    Memory,
    UserKey,
    from_micros,
    to_micros,
)
from memchat.engine.search.candidates import KeywordPlanner
from memchat.engine.search.index import KeywordStats
from memchat.engine.secrets import redact
from memchat.engine.vectors import IndexingProgress, ProgressCallback, report_progress

from ._cache import DecodeCache
from ._vectors import MatrixCache, UserMatrix, check_query, encode_vector
from .base import DEFAULT_VECTOR_DIMENSION, Capabilities, resolve_timeout, timeout_message
from .sql_index import INDEX_META, SQLKeywordIndex

T = TypeVar("T")

#: When (loop time) the store call running in this context must be done: a
#: connection made for it gives up then too.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("memchat_sql_deadline", default=None)

_TABLE_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

#: The table of small per-store records (``read_meta`` / ``write_meta``), shared by every memories table.
META_TABLE = "memchat_meta"


def validate_table_name(name: str, max_length: int = 64, what: str = "table name") -> str:
    """Reference §4.0: ``^[a-zA-Z_][a-zA-Z0-9_]*$``, at most ``max_length``
    characters (64; 63 on PostgreSQL). Also used for schema names."""
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name) or len(name) > max_length:
        raise ConfigError(
            f"invalid {what} {name!r}: use letters, digits and underscores, "
            f"not starting with a digit, at most {max_length} characters"
        )
    return name


def short_identifier(name: str, max_length: int = 63) -> str:
    """``name`` if it fits the server's identifier limit (63 on PostgreSQL, 64
    on MySQL), else a stable shortening that ends in a hash of the whole name."""
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{name[: max_length - 13]}_{digest}"


def lock_key(*parts: str) -> int:
    """A signed 64-bit number for ``parts`` (for ``pg_advisory_xact_lock``):
    the first 8 bytes of sha256 over the NUL-joined parts."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def mask_secret(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (a password), and any piece of it of 8 or more
    characters, replaced by ***. A safety net only: messages are built without
    the password in the first place, and one of under 4 characters is left
    alone (masking it would garble the message and hide nothing worth hiding)."""
    if secret and len(secret) >= 4:
        text = redact(text, [secret])
    return text


def memories_table(
    metadata: sa.MetaData,
    name: str,
    json_type: sa.types.TypeEngine,
    *,
    schema: str | None = None,
    **table_options: Any,
) -> sa.Table:
    # MySQL's TEXT holds 64 KiB, too little for long utf8mb4 memories.
    text_type = sa.Text().with_variant(MEDIUMTEXT(), "mysql", "mariadb")
    return sa.Table(
        name,
        metadata,
        sa.Column("app_name", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("memory_id", sa.String(64), primary_key=True),
        sa.Column("memory", text_type, nullable=False),
        sa.Column("topics", json_type, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("event_time", sa.BigInteger, nullable=True),
        sa.Column("participants", json_type, nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("deleted_at", sa.BigInteger, nullable=True),
        sa.Index(short_identifier(f"idx_{name}_user_updated"), "app_name", "user_id", "updated_at"),
        schema=schema,
        **table_options,
    )


def _dimension(dimension: int | None) -> int:
    if dimension is None:
        return DEFAULT_VECTOR_DIMENSION
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0:
        raise ConfigError(
            f"invalid embedding dimension {dimension!r}: give the embedder's dimension, "
            "a positive whole number such as 384"
        )
    return dimension


def _json_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return tuple(value)


def meta_table(metadata: sa.MetaData, *, schema: str | None = None, **table_options: Any) -> sa.Table:
    return sa.Table(
        META_TABLE,
        metadata,
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        schema=schema,
        **table_options,
    )


class _SQLTransaction:
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

    def _wrote(self, versions: tuple[tuple[int, int], tuple[int, int]] | None) -> None:
        if versions is None:  # no cached matrix to bring along: the versions were not read
            self._matrix_unknowable = True
            return
        if self._before is None:
            self._before = versions[0]
        self._after = versions[1]

    def advance_matrix(self) -> None:
        """After the commit: bring this process's cached matrix of the user along."""
        store, key = self._store, self._key
        if self._before is None or self._after is None:
            return
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
        self._known[entry.id] = entry
        self._wrote(
            await store.keyword_index.replace(
                self._conn, self._key, entry.id, old, entry, versions=self._key in store._matrices
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

    async def remove(self, memory_id: str) -> None:
        store = self._store
        t = store.table
        old = await self.get(memory_id)
        await self._conn.execute(sa.delete(t).where(store._scope(self._key), t.c.memory_id == memory_id))
        self._known[memory_id] = None
        self._wrote(
            await store.keyword_index.replace(
                self._conn, self._key, memory_id, old, None, versions=self._key in store._matrices
            )
        )
        self._removals.add(memory_id)
        self._upserts.pop(memory_id, None)

    async def count_active(self) -> int:
        return await self._store._count(self._conn, self._key, include_deleted=False)


class SQLStore:
    """Base of the SQL stores. Subclasses set ``name``, build ``self.engine``
    and may override ``_begin_user`` (serialise writers) and ``_upsert``."""

    name = "sql"
    capabilities = Capabilities(
        vector_search=True, transactions=True, persistent=True, multi_process=True, native_keyword_search=True
    )
    max_table_name = 64
    #: How often an atomic section is run again after a deadlock (``_is_retryable``).
    max_attempts = 5
    #: Vectors live in the table's ``embedding`` BLOB column and are ranked in
    #: numpy; False for a store with its own vector index (sqlitevec, pgvector).
    blob_vectors = True
    #: False: any dimension fits (the engine sets ``dimension`` to its
    #: embedder's); True: the index was made for ``dimension`` only.
    fixed_dimension = False

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
            self.dimension = _dimension(dimension)
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
        if self.blob_vectors:
            self.table.append_column(sa.Column("embedding", self._blob_type(), nullable=True))
        self.meta_table = meta_table(self.metadata, schema=schema, **table_options)
        #: The inverted index and statistics of keyword search (sql_index.py).
        self.keyword_index = SQLKeywordIndex(
            self.metadata, self.table, short_identifier=short_identifier, schema=schema, **table_options
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

    # -- hooks -----------------------------------------------------------

    def _json_type(self) -> sa.types.TypeEngine:
        return sa.JSON()

    async def _begin_user(self, conn: AsyncConnection, key: UserKey) -> None:
        """Called first in every atomic section: serialise this user's writers."""

    def _upsert_into(self, table: sa.Table, row: dict[str, Any], keys: Sequence[str]) -> sa.Executable:
        """INSERT ``row``, or on a conflict of ``keys`` UPDATE the row's other columns."""
        raise NotImplementedError

    def _upsert(self, row: dict[str, Any]) -> sa.Executable:
        return self._upsert_into(self.table, row, ("app_name", "user_id", "memory_id"))

    def _blob_type(self) -> sa.types.TypeEngine:
        """The column type of a float32 vector (BLOB; BYTEA on PostgreSQL)."""
        return sa.LargeBinary()

    def _encode(self, vector: Sequence[float]) -> Any:
        """The ``embedding`` column's value for ``vector``."""
        return encode_vector(vector, self.dimension)

    def _embedding_value(self, vector: Sequence[float]) -> Any:
        """What a write stores in the ``embedding`` column (None: the store keeps
        its vectors elsewhere)."""
        return self._encode(vector) if self.blob_vectors else None

    def _explain(self, exc: BaseException) -> str:
        """One clear sentence for a driver error; never includes a password."""
        orig = getattr(exc, "orig", None) or exc
        return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__

    def _is_retryable(self, exc: BaseException) -> bool:
        """A deadlock or serialisation failure: the whole section may run again."""
        return False

    def _is_connection_lost(self, exc: BaseException) -> bool:
        """The server is unreachable or dropped the connection."""
        return bool(getattr(exc, "connection_invalidated", False)) or isinstance(exc, OSError)

    #: A client/server store bounds every call by ``timeout`` (``_bounded``);
    #: an embedded one relies on its busy timeout.
    bounded_calls = False
    #: What ``timeout_message`` calls the server ("PostgreSQL server").
    server_kind = "server"

    def _server_address(self) -> str:
        return self.location

    def _abort_connection(self, driver_connection: Any) -> None:
        """Make a call waiting on this driver connection fail now (a server
        that stopped answering): shut its socket down."""

    async def _connect_bounded(self, connect: Callable[[], Awaitable[Any]]) -> Any:
        """A new driver connection (for ``async_creator``), made within the
        current call's deadline (or ``timeout`` outside one)."""
        loop = asyncio.get_running_loop()
        deadline = _DEADLINE.get()
        async with asyncio.timeout_at(deadline if deadline is not None else loop.time() + self.timeout):
            connection = await connect()
        self._connections.add(connection)
        return connection

    @contextlib.asynccontextmanager
    async def _bounded(self) -> AsyncIterator[list[bool]]:
        """Bound one store call by ``timeout``. When it runs out, every
        connection of this store is shut down, so the driver raises at once
        (its transaction never commits) and the pool discards it; the list
        yielded then holds True, and the caller reports the timeout."""
        expired: list[bool] = []
        if not self.bounded_calls:
            yield expired
            return
        loop = asyncio.get_running_loop()

        def expire() -> None:
            expired.append(True)
            for connection in list(self._connections):
                self._abort_connection(connection)

        handle = loop.call_later(self.timeout, expire)
        token = _DEADLINE.set(loop.time() + self.timeout)
        try:
            yield expired
        finally:
            _DEADLINE.reset(token)
            handle.cancel()

    def _timed_out(self, action: str) -> BackendError:
        message = timeout_message(self.server_kind, self._server_address(), self.timeout)
        message = f"{self.name} backend at {self.location or '?'}: {action} failed: {message}"
        return BackendError(mask_secret(message, self._secret))

    async def _create_schema(self) -> None:
        """Create the tables (and indexes) if missing; safe to race with other processes."""
        async with self._write_engine.begin() as conn:
            await conn.run_sync(self.metadata.create_all, checkfirst=True)
            await self._ensure_embedding_column(conn)

    async def _ensure_embedding_column(self, conn: AsyncConnection) -> None:
        """Add the ``embedding`` column to a table made before vectors existed.
        Call it where table creation is serialised against other processes."""
        if not self.blob_vectors:
            return
        t = self.table

        def columns(sync_conn: sa.Connection) -> set[str]:
            return {c["name"] for c in sa.inspect(sync_conn).get_columns(t.name, schema=t.schema)}

        if "embedding" in await conn.run_sync(columns):
            return
        spec = t.c.embedding.type.compile(dialect=conn.dialect)
        table = conn.dialect.identifier_preparer.format_table(t)
        await conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN embedding {spec} NULL"))

    # -- plumbing --------------------------------------------------------

    def describe(self) -> str:
        return f"{self.name} ({self.location})" if self.location else self.name

    def _error(self, action: str, exc: BaseException) -> BackendError:
        message = f"{self.name} backend at {self.location or '?'}: {action} failed: {self._explain(exc)}"
        return BackendError(mask_secret(message, self._secret))

    async def _failed(self, action: str, exc: BaseException, expired: bool = False) -> BackendError:
        """The error to raise for ``exc``; when the connection is gone (or the
        call timed out: its connection is in an unknown state), the pool is
        discarded too, so the next call connects afresh (no restart needed)."""
        timed_out = expired or isinstance(exc, TimeoutError)
        if timed_out or self._is_connection_lost(exc):
            with contextlib.suppress(Exception):  # the pool is thrown away; nothing to save
                await self.engine.dispose()
        return self._timed_out(action) if timed_out else self._error(action, exc)

    async def open(self) -> None:
        if self._schema_ready:
            return
        async with self._bounded() as expired:
            try:
                await self._create_schema()
            except Exception as exc:
                # A failed open keeps no connection: the caller may never close us.
                with contextlib.suppress(Exception):
                    await self.engine.dispose()
                if expired or isinstance(exc, TimeoutError):
                    raise self._timed_out("connecting and creating the table") from exc
                if isinstance(exc, SQLAlchemyError | OSError):
                    raise self._error("connecting and creating the table", exc) from exc
                raise
        self._schema_ready = True
        await self._ensure_keyword_index()

    async def _ensure_keyword_index(self) -> None:
        """Index a table made before the keyword index (or written by a memchat
        that did not keep it), user by user, each inside its own write section."""
        index = self.keyword_index

        async def check(conn: AsyncConnection) -> bool:
            built = await self._scalar_or_none(
                conn,
                sa.select(self.meta_table.c.value).where(
                    self.meta_table.c.name == self._meta_name(INDEX_META)
                ),
            )
            return built == index.version() and await index.active_counts_match(conn)

        if await self._read("reading the keyword index", check):
            self._index_ready = True
            return
        t, st = self.table, index.stats

        async def users(conn: AsyncConnection) -> dict[UserKey, int]:
            active = sa.func.sum(sa.case((t.c.deleted_at.is_(None), 1), else_=0))
            stmt = sa.select(t.c.app_name, t.c.user_id, active).group_by(t.c.app_name, t.c.user_id)
            counts = {UserKey(a, u): int(n or 0) for a, u, n in (await conn.execute(stmt)).all()}
            for a, u in (await conn.execute(sa.select(st.c.app_name, st.c.user_id))).all():
                counts.setdefault(UserKey(a, u), 0)  # statistics of a user with no row left
            return counts

        counts = await self._read("reading the users to index", users)
        total, done = sum(counts.values()), 0
        await report_progress(self.progress, IndexingProgress(done, total))
        for key in counts:

            async def rebuild(tx: Any, key: UserKey = key) -> None:
                conn = tx._conn
                stmt = sa.select(*self._row_columns()).where(self._scope(key), t.c.deleted_at.is_(None))
                entries = [self._entry(r) for r in (await conn.execute(stmt)).all()]
                await index.rebuild_user(conn, key, entries)

            await self.atomic(key, rebuild)
            done += counts[key]
            await report_progress(self.progress, IndexingProgress(done, total))
        await self.write_meta(INDEX_META, index.version())
        self._index_ready = True

    async def close(self) -> None:
        await self.engine.dispose()
        self._schema_ready = False

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
            topics=_json_list(row.topics),
            kind=row.kind or "fact",
            event_time=from_micros(row.event_time),
            participants=_json_list(row.participants),
            location=row.location or "",
        )
        return Entry(
            id=row.memory_id,
            app=row.app_name,
            user=row.user_id,
            memory=memory,
            created_at=from_micros(row.created_at),
            updated_at=from_micros(row.updated_at),
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

    async def _read(self, action: str, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        await self.open()
        async with self._bounded() as expired:
            try:
                async with self.engine.connect() as conn:
                    return await fn(conn)
            except (SQLAlchemyError, OSError) as exc:
                raise await self._failed(action, exc, bool(expired)) from exc

    # -- Store -----------------------------------------------------------

    async def atomic(self, key: UserKey, work: Callable[[_SQLTransaction], Awaitable[T]]) -> T:
        attempts: list[_SQLTransaction] = []

        async def section(conn: AsyncConnection) -> T:
            await self._begin_user(conn, key)
            tx = _SQLTransaction(self, conn, key)
            attempts.append(tx)
            return await work(tx)

        result = await self._in_write_transaction("writing", section)
        attempts[-1].advance_matrix()  # the attempt that committed
        return result

    def _matrix_signature(self, version: tuple[int, int]) -> tuple[Any, ...]:
        return (self.dimension, "version", *version)

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        return await self._read("reading", lambda conn: self._get(conn, key, memory_id))

    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        t = self.table
        stmt = self._newest_first(sa.select(*self._row_columns()).where(self._scope(key)))
        if not include_deleted:
            stmt = stmt.where(t.c.deleted_at.is_(None))
        if limit > 0:
            stmt = stmt.limit(limit)

        async def fetch(conn: AsyncConnection) -> list[Entry]:
            return [self._entry(r) for r in (await conn.execute(stmt)).all()]

        return await self._read("reading", fetch)

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        if self._index_ready and not include_deleted:
            # The index statistics' active count (one primary-key read; COUNT(*) reads every row).
            async def active(conn: AsyncConnection) -> int:
                return (await self.keyword_index.signature(conn, key))[1]

            return await self._read("counting", active)
        return await self._read(
            "counting", lambda conn: self._count(conn, key, include_deleted=include_deleted)
        )

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        t = self.table
        self._matrices.drop(key)

        async def work(tx: _SQLTransaction) -> int:
            active = await tx.count_active()
            await self.keyword_index.clear(tx._conn, key)
            if deleted_at is None:
                await tx._conn.execute(sa.delete(t).where(self._scope(key)))
            else:
                await tx._conn.execute(
                    sa.update(t)
                    .where(self._scope(key), t.c.deleted_at.is_(None))
                    .values(deleted_at=to_micros(deleted_at))
                )
            return active

        return await self.atomic(key, work)

    async def keyword_candidates(self, key: UserKey, query: str) -> list[Entry]:
        return await self.list(key)

    async def indexed_keyword_candidates(
        self, key: UserKey, space: str, terms: Sequence[str], planner: KeywordPlanner | None = None
    ) -> tuple[list[Entry], KeywordStats | None]:
        """The active memories holding one of ``terms`` (with a ``planner``, its
        best-ranked ones: search/candidates.py) and the user's statistics; every
        active memory and no statistics while the index is being built."""
        if not self._index_ready:
            return await self.list(key), None
        t = self.table

        async def fetch(conn: AsyncConnection) -> tuple[list[Entry], KeywordStats | None]:
            holders, stats = await self.keyword_index.lookup(conn, key, space, terms, planner)
            # Two steps, each on a primary key: a planner without table statistics
            # (a freshly filled PostgreSQL table) once chose a nested loop over both
            # tables for the one-statement semi-join and ran past the timeout.
            if isinstance(holders, list):
                ids = holders
            else:
                ids = [row[0] for row in (await conn.execute(holders)).all()]
            entries: list[Entry] = []
            columns = self._row_columns()
            for start in range(0, len(ids), 500):
                stmt = sa.select(*columns).where(
                    self._scope(key), t.c.deleted_at.is_(None), t.c.memory_id.in_(ids[start : start + 500])
                )
                entries.extend(self._entry(r) for r in (await conn.execute(stmt)).all())
            return entries, stats

        return await self._read("searching", fetch)

    # -- vectors -----------------------------------------------------------

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories with a vector, nearest to
        ``vector`` first, ``score`` = cosine similarity (exact, numpy)."""
        if k <= 0:
            return []
        query = check_query(vector, self.dimension)
        return await self._read("searching", lambda conn: self._blob_candidates(conn, key, query, k))

    def _with_vector(self, key: UserKey) -> sa.ColumnElement[bool]:
        t = self.table
        return sa.and_(self._scope(key), t.c.deleted_at.is_(None), t.c.embedding.is_not(None))

    async def _blob_candidates(self, conn: AsyncConnection, key: UserKey, query: Any, k: int) -> list[Entry]:
        t = self.table
        if self._index_ready:  # the version the index keeps: one primary-key read
            signature = self._matrix_signature(await self.keyword_index.signature(conn, key))
            return await self._rank_blobs(conn, key, query, k, signature)
        signature = tuple(
            (
                await conn.execute(
                    sa.select(
                        sa.func.count(),
                        # Summed modulo 2^31 - 1: a sum of 10k microsecond stamps overflows 64 bits.
                        sa.func.coalesce(sa.func.sum(t.c.updated_at % 2147483647), 0),
                        sa.func.coalesce(sa.func.max(t.c.updated_at), 0),
                    ).where(self._with_vector(key))
                )
            ).one()
        )
        return await self._rank_blobs(conn, key, query, k, (self.dimension, *(int(v) for v in signature)))

    async def _rank_blobs(
        self, conn: AsyncConnection, key: UserKey, query: Any, k: int, signature: tuple[Any, ...]
    ) -> list[Entry]:
        t = self.table
        matrix = self._matrices.get(key, signature)
        if matrix is None:
            rows = (
                await conn.execute(sa.select(t.c.memory_id, t.c.embedding).where(self._with_vector(key)))
            ).all()
            matrix = UserMatrix.from_blobs(((r[0], r[1]) for r in rows), self.dimension)
            self._matrices.put(key, signature, matrix)
        scores = dict(matrix.nearest(query, k))
        return await self._fetch_scored(conn, key, scores)

    async def _fetch_scored(
        self, conn: AsyncConnection, key: UserKey, scores: dict[str, float]
    ) -> list[Entry]:
        """The active entries for ``scores``' IDs, in its order, scored."""
        if not scores:
            return []
        t = self.table
        ids = list(scores)
        found: dict[str, Entry] = {}
        columns = self._row_columns()
        for start in range(0, len(ids), 500):
            stmt = sa.select(*columns).where(
                self._scope(key), t.c.deleted_at.is_(None), t.c.memory_id.in_(ids[start : start + 500])
            )
            for row in (await conn.execute(stmt)).all():
                found[row.memory_id] = self._entry(row)
        return [found[i].with_score(scores[i]) for i in ids if i in found]

    # -- export and migration (memchat.engine.portability) -------------------

    async def users(self) -> list[UserKey]:
        t = self.table
        stmt = sa.select(t.c.app_name, t.c.user_id).distinct().order_by(t.c.app_name, t.c.user_id)

        async def fetch(conn: AsyncConnection) -> list[UserKey]:
            return [UserKey(app, user) for app, user in (await conn.execute(stmt)).all()]

        return await self._read("reading the users", fetch)

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        """The embeddings of ``ids`` (those that have one), in batches of 500."""
        t = self.table

        async def fetch(conn: AsyncConnection) -> dict[str, list[float]]:
            found: dict[str, list[float]] = {}
            for start in range(0, len(ids), 500):
                batch = list(ids[start : start + 500])
                stmt = sa.select(t.c.memory_id, t.c.embedding).where(
                    self._scope(key), t.c.memory_id.in_(batch), t.c.embedding.is_not(None)
                )
                for memory_id, stored in (await conn.execute(stmt)).all():
                    vector = self._decode_vector(stored)
                    if vector is not None:
                        found[memory_id] = vector
            return found

        return await self._read("reading the vectors", fetch) if ids else {}

    def _decode_vector(self, stored: Any) -> list[float] | None:
        """An ``embedding`` value as floats (float32 bytes here), or None if unusable."""
        if stored is None or len(stored) != self.dimension * 4:
            return None
        return np.frombuffer(bytes(stored), dtype="<f4").astype(float).tolist()

    # -- embedder bookkeeping (memchat.engine.vectors) ------------------------

    def _missing_vector(self) -> sa.ColumnElement[bool]:
        return self.table.c.embedding.is_(None)

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        """Entries of any user, tombstones included, that have no vector: at
        most ``limit`` (``<= 0``: all), by (app, user, id)."""
        t = self.table
        stmt = (
            sa.select(*self._row_columns())
            .where(self._missing_vector())
            .order_by(t.c.app_name, t.c.user_id, t.c.memory_id)
        )
        if limit > 0:
            stmt = stmt.limit(limit)

        async def fetch(conn: AsyncConnection) -> list[Entry]:
            return [self._entry(r) for r in (await conn.execute(stmt)).all()]

        return await self._read("reading", fetch)

    async def count_missing_vectors(self) -> int:
        """How many entries (any user, tombstones included) have no vector."""
        stmt = sa.select(sa.func.count()).select_from(self.table).where(self._missing_vector())
        return await self._read("counting", lambda conn: self._scalar_int(conn, stmt))

    @staticmethod
    async def _scalar_int(conn: AsyncConnection, stmt: sa.Executable) -> int:
        return int((await conn.execute(stmt)).scalar_one())

    async def clear_vectors(self) -> None:
        """Forget every stored vector (any user): the embedder changed."""
        t = self.table
        stmt = sa.update(t).where(t.c.embedding.is_not(None)).values(embedding=None)
        stats = self.keyword_index.stats
        bump = sa.update(stats).values(version=stats.c.version + 1)  # other processes' matrices too

        async def forget(conn: AsyncConnection) -> None:
            await conn.execute(stmt)
            await conn.execute(bump)

        await self._write_all("forgetting the old vectors", forget)
        self._matrices.clear()

    def _meta_name(self, name: str) -> str:
        return f"{self.table.name}:{name}"

    async def read_meta(self, name: str) -> str | None:
        """The value recorded under ``name`` for this table, or None."""
        m = self.meta_table
        stmt = sa.select(m.c.value).where(m.c.name == self._meta_name(name))
        return await self._read("reading", lambda conn: self._scalar_or_none(conn, stmt))

    @staticmethod
    async def _scalar_or_none(conn: AsyncConnection, stmt: sa.Executable) -> Any:
        return (await conn.execute(stmt)).scalar()

    async def write_meta(self, name: str, value: str) -> None:
        """Record ``value`` under ``name`` for this table (replacing it)."""
        stmt = self._upsert_into(self.meta_table, {"name": self._meta_name(name), "value": value}, ("name",))
        await self._write_all("writing", lambda conn: conn.execute(stmt))

    async def _write_all(self, action: str, fn: Callable[[AsyncConnection], Awaitable[Any]]) -> None:
        """Run ``fn`` in one write transaction not tied to a user (retried on a deadlock)."""
        await self._in_write_transaction(action, fn)

    async def _in_write_transaction(self, action: str, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``fn`` in one write transaction, bounded by the timeout; a deadlock or
        serialisation failure rolls it back whole and runs it again after a short pause."""
        await self.open()
        attempt = 0
        async with self._bounded() as expired:
            while True:
                attempt += 1
                try:
                    async with self._write_engine.begin() as conn:
                        return await fn(conn)
                except (SQLAlchemyError, OSError) as exc:
                    if not expired and attempt < self.max_attempts and self._is_retryable(exc):
                        await asyncio.sleep(0.01 * attempt)
                        continue
                    raise await self._failed(action, exc, bool(expired)) from exc


class ServerSQLStore(SQLStore):
    """Base of the client/server SQL stores (MySQL/MariaDB, PostgreSQL), which
    are configured by a DSN or by the reference's separate variables
    ``<env_prefix>_HOST`` … (``env_dsn`` taking priority)."""

    env_prefix = ""
    env_dsn = ""
    #: Where the DSN came from ("the DSN" argument or ``env_dsn``), or None
    #: when the separate variables were used: error messages name the fix.
    _dsn_source: str | None = None

    def _remember_source(self, dsn: str | None, env: Mapping[str, str]) -> None:
        self._dsn_source = "the DSN" if dsn else (self.env_dsn if env.get(self.env_dsn) else None)

    def _setting(self, *fields: str) -> str:
        """How a person changes ``fields``: the variables, or the parts of the DSN."""
        if self._dsn_source:
            return f"the {' and '.join(f.lower() for f in fields)} in {self._dsn_source}"
        return " and ".join(f"{self.env_prefix}_{f}" for f in fields)

    def describe(self) -> str:
        table = f"{self.table.schema}.{self.table.name}" if self.table.schema else self.table.name
        return f"{self.name} ({self.location}, table {table})"
