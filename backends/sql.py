"""The SQL family's shared store: one SQLAlchemy (async) implementation.

SQLite, MySQL/MariaDB and PostgreSQL differ only in how a DSN is built, how a
user's writers are serialised, and how an upsert is spelt; subclasses supply
those three hooks (and may take over schema creation, ``_create_schema``).
Rows hold the normalised memory in plain columns (no JSON blob to drift from
the columns), times as integer microseconds since the epoch so ordering is
exact and identical on every dialect.

Vectors: ``<table>_vectors`` beside the memories holds one row per memory
with a vector (BLOB / BYTEA of little-endian float32), written in the same
transaction as the memory's row through the one vector hook ``write_vector``,
and ``vector_candidates`` ranks the user's vectors exactly in numpy over a
per-user cache (``backends/_vectors.py``). Out of the rows, the vectors leave
the rows a search reads small: at 100k memories they were most of a MariaDB
table twice the size of its default buffer pool. The cache is reused while the
user's version (the keyword index's statistics row, bumped by every write) is
unchanged, so another process's writes are seen at the next search. A table
whose rows hold the vectors (an ``embedding`` column: an older memchat's) has
them moved beside it on open, and the column dropped, under the same lock
that serialises table creation. Stores with a native vector index (sqlitevec,
pgvector, mysqlvec on a server with a vector type) replace this part: a
vector column of their own type in the row (``_embedding_value``), or an
index of their own kept through ``write_vector``.

``memchat_meta(name, value)`` holds small per-table records (the embedder that
made the stored vectors: ``read_meta`` / ``write_meta``), keyed
``<table>:<name>``.

The parts: ``_sql_schema`` (tables and identifier rules), ``_sql_calls``
(timeouts, retries, error sentences), ``_sql_tables`` (rows and the dialect
hooks), ``_sql_transaction`` (the write section), this module (the Store
operations), ``_sql_server`` (the client/server stores' shared base).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from memchat.engine.model import Entry, UserKey, to_micros
from memchat.engine.search.candidates import KeywordPlanner
from memchat.engine.search.index import KeywordStats
from memchat.engine.vectors import IndexingProgress, report_progress

from ._sql_schema import (
    MEMORY_KEY,
    META_TABLE,
    VECTORS_SUFFIX,
    event_time_index,
    lock_key,
    memories_table,
    meta_table,
    newest_index,
    short_identifier,
    validate_table_name,
)
from ._sql_tables import SQLTables
from ._sql_transaction import SQLTransaction, VectorChange
from ._vectors import UserMatrix, check_query
from .base import Capabilities
from .sql_index import INDEX_META
from .sql_index import TABLE_SUFFIXES as INDEX_TABLE_SUFFIXES

__all__ = [
    "META_TABLE",
    "TABLE_SUFFIXES",
    "SQLStore",
    "SQLTransaction",
    "VectorChange",
    "lock_key",
    "memories_table",
    "meta_table",
    "short_identifier",
    "validate_table_name",
]

T = TypeVar("T")

#: The tables a memories table ``<name>`` has beside it, as ``<name><suffix>``: its
#: vectors, and its keyword index's (this layout's, then older ones').
TABLE_SUFFIXES = (VECTORS_SUFFIX, *INDEX_TABLE_SUFFIXES)


class SQLStore(SQLTables):
    """Base of the SQL stores. Subclasses set ``name``, build ``self.engine``
    and may override ``_begin_user`` (serialise writers) and ``_upsert``."""

    name = "sql"
    #: This process moved an older table's vectors out of its rows on open (``_move_vectors_beside``).
    _vectors_moved = False
    capabilities = Capabilities(
        vector_search=True,
        transactions=True,
        persistent=True,
        multi_process=True,
        native_keyword_search=True,
        event_time_lookup=True,
    )

    async def _create_schema(self) -> None:
        """Create the tables (and indexes) if missing; safe to race with other processes."""
        async with self._write_engine.begin() as conn:
            await self._create_tables(conn)

    async def _create_tables(self, conn: AsyncConnection) -> None:
        """Create the tables that are missing, and bring a memories table made by an
        older memchat up to date (its vectors' column, read's index). A table this
        call made already has both, so only an existing one is inspected. Call it
        where table creation is serialised against other processes."""
        t = self.table

        def create(sync_conn: sa.Connection) -> bool:
            existed = sa.inspect(sync_conn).has_table(t.name, schema=t.schema)
            self.metadata.create_all(sync_conn, checkfirst=True)
            return existed

        if await conn.run_sync(create):
            # Only a store ranking BLOB vectors has an embedding column to look after.
            columns = await self._columns(conn) if self.blob_vectors else set()
            await self._ensure_embedding_column(conn, columns)
            await self._move_vectors_beside(conn, columns)
            await self._ensure_indexes(conn)

    async def _ensure_indexes(self, conn: AsyncConnection) -> None:
        """Add the indexes ``read`` walks (_sql_schema.newest_index) and the period
        lookup reads (_sql_schema.event_time_index) to a table made before them. Call
        it where table creation is serialised against other processes."""
        t = self.table
        wanted = [newest_index(t), event_time_index(t)]

        def missing(sync_conn: sa.Connection) -> list[sa.Index]:
            names = {i["name"] for i in sa.inspect(sync_conn).get_indexes(t.name, schema=t.schema)}
            return [index for index in wanted if index.name not in names]

        for index in await conn.run_sync(missing):
            await conn.run_sync(index.create)

    async def _columns(self, conn: AsyncConnection) -> set[str]:
        """The memories table's columns as the server has them."""
        t = self.table

        def columns(sync_conn: sa.Connection) -> set[str]:
            return {c["name"] for c in sa.inspect(sync_conn).get_columns(t.name, schema=t.schema)}

        return await conn.run_sync(columns)

    async def _ensure_embedding_column(self, conn: AsyncConnection, columns: set[str]) -> None:
        """Add the ``embedding`` column to a table made before vectors existed, for a
        store that keeps its vectors in the row (mysqlvec on a server with a vector
        type). Call it where table creation is serialised against other processes."""
        if not (self.blob_vectors and self.vectors_in_row) or "embedding" in columns:
            return
        t = self.table
        spec = t.c.embedding.type.compile(dialect=conn.dialect)
        table = conn.dialect.identifier_preparer.format_table(t)
        await conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN embedding {spec} NULL"))

    async def _move_vectors_beside(self, conn: AsyncConnection, columns: set[str]) -> None:
        """Move the vectors of a memories table made by a memchat that kept them in the
        rows (an ``embedding`` column) into the vectors table, then drop the column,
        rebuilding the table so its rows shrink. While the column is there the rows are
        the truth: an older memchat that opened the table after this one added it back
        and wrote (or cleared, for another embedder) the vectors there, so the vectors
        table becomes exactly the rows' vectors, and a memory without one in its row
        is embedded again. Running this again after an interruption loses nothing.
        Call it where table creation is serialised against other processes."""
        v = self.vector_table
        if v is None or self.vectors_in_row or "embedding" not in columns:
            return
        t = self.table
        old = sa.Table(
            t.name,
            sa.MetaData(),
            *(sa.Column(name, t.c[name].type) for name in MEMORY_KEY),
            sa.Column("embedding", v.c.embedding.type),
            schema=t.schema,
        )
        moved = sa.select(*(old.c[name] for name in (*MEMORY_KEY, "embedding"))).where(
            old.c.embedding.is_not(None)
        )
        count = sa.select(sa.func.count()).select_from(moved.subquery())
        total = int((await conn.execute(count)).scalar_one())
        if total:
            await report_progress(self.progress, IndexingProgress(0, total))
        await conn.execute(sa.delete(v))
        await conn.execute(sa.insert(v).from_select([*MEMORY_KEY, "embedding"], moved))
        table = conn.dialect.identifier_preparer.format_table(t)
        await conn.execute(sa.text(self._drop_embedding_column(table)))
        self._vectors_moved = True
        if total:
            await report_progress(self.progress, IndexingProgress(total, total))

    def _drop_embedding_column(self, table: str) -> str:
        """The statement that drops the rows' old ``embedding`` column and gives its
        space back (SQLite rewrites the rows as it drops a column)."""
        return f"ALTER TABLE {table} DROP COLUMN embedding"

    # -- plumbing --------------------------------------------------------

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

            async def rebuild(tx: SQLTransaction, key: UserKey = key) -> None:
                conn = tx.connection
                stmt = sa.select(*self._row_columns()).where(self._scope(key), t.c.deleted_at.is_(None))
                entries = [self._entry(r) for r in (await conn.execute(stmt)).all()]
                await index.rebuild_user(conn, key, entries)
                # Counted as written: PostgreSQL then vacuums the new postings, so their
                # reads stay in the key's index (_after_section).
                tx.rows_written += len(entries)

            await self.atomic(key, rebuild)
            done += counts[key]
            await report_progress(self.progress, IndexingProgress(done, total))
        await self.write_meta(INDEX_META, index.version())
        self._index_ready = True

    async def close(self) -> None:
        await self.engine.dispose()
        self._schema_ready = False

    # -- Store -----------------------------------------------------------

    async def atomic(self, key: UserKey, work: Callable[[SQLTransaction], Awaitable[T]]) -> T:
        attempts: list[SQLTransaction] = []

        async def section(conn: AsyncConnection) -> T:
            await self._begin_user(conn, key)
            tx = SQLTransaction(self, conn, key)
            attempts.append(tx)
            return await work(tx)

        result = await self._in_write_transaction("writing", section)
        attempts[-1].advance_caches()  # the attempt that committed
        self._after_section(attempts[-1].rows_written)
        return result

    def _after_section(self, rows: int) -> None:
        """A write section that wrote or removed ``rows`` rows committed (PostgreSQL
        keeps its planner's statistics with this)."""
        return None

    def _matrix_signature(self, version: tuple[int, int]) -> tuple[Any, ...]:
        return (self.dimension, "version", *version)

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        return await self._read("reading", lambda conn: self._get(conn, key, memory_id))

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        if not include_deleted:
            return await self._read("counting", lambda conn: self._active_count(conn, key))
        return await self._read("counting", lambda conn: self._count(conn, key, include_deleted=True))

    async def _active_count(self, conn: AsyncConnection, key: UserKey) -> int:
        """The user's active memories as ``conn`` sees them: once the index is ready,
        its statistics row (one primary-key read, kept by every write in its own
        transaction); COUNT(*) reads every row of the user (1.2 s at 100k on MariaDB)."""
        if self._index_ready:
            return (await self.keyword_index.signature(conn, key))[1]
        return await self._count(conn, key, include_deleted=False)

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        t = self.table
        self._matrices.drop(key)
        self._entries.drop(key)

        async def work(tx: SQLTransaction) -> int:
            conn = tx.connection
            active = await tx.count_active()
            await self.keyword_index.clear(conn, key)
            if deleted_at is None:
                done = await conn.execute(sa.delete(t).where(self._scope(key)))
            else:
                done = await conn.execute(
                    sa.update(t)
                    .where(self._scope(key), t.c.deleted_at.is_(None))
                    .values(deleted_at=to_micros(deleted_at))
                )
            tx.rows_written += max(done.rowcount, 0)
            await self.write_vector(
                conn, key, VectorChange("remove_user" if deleted_at is None else "tombstone_user")
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

        async def fetch(conn: AsyncConnection) -> tuple[list[Entry], KeywordStats | None]:
            index = self.keyword_index
            user = await index.user_stats(conn, key)
            holders, stats = await index.lookup(conn, key, space, terms, planner, user)
            # Two steps, each on a primary key: a planner without table statistics
            # (a freshly filled PostgreSQL table) once chose a nested loop over both
            # tables for the one-statement semi-join and ran past the timeout.
            if isinstance(holders, list):
                ids = holders
            else:
                ids = [row[0] for row in (await conn.execute(holders)).all()]
            found = await self._active_entries(conn, key, ids, user.version)
            return list(found.values()), stats

        return await self._read("searching", fetch)

    async def memories_in_periods(
        self, key: UserKey, periods: Sequence[tuple[datetime, datetime]], limit: int
    ) -> list[Entry] | None:
        """The user's active memories in ``periods``: a range of the event-time index each."""
        if not periods:
            return []
        t = self.table
        ranges = [
            sa.and_(t.c.event_time >= to_micros(start), t.c.event_time < to_micros(end))
            for start, end in periods
        ]
        stmt = (
            sa.select(*self._row_columns())
            .where(self._scope(key), t.c.deleted_at.is_(None), sa.or_(*ranges))
            .limit(limit + 1)
        )

        async def fetch(conn: AsyncConnection) -> list[Entry]:
            return [self._entry(row) for row in (await conn.execute(stmt)).all()]

        found = await self._read("searching", fetch)
        return None if len(found) > limit else found

    # -- vectors -----------------------------------------------------------

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories with a vector, nearest to
        ``vector`` first, ``score`` = cosine similarity (exact, numpy)."""
        if k <= 0:
            return []
        query = check_query(vector, self.dimension)
        return await self._read("searching", lambda conn: self._blob_candidates(conn, key, query, k))

    def _vector_holder(self) -> sa.Table:
        if self.vector_table is None:
            raise TypeError(f"{self.name} keeps its vectors in an index of its own")
        return self.vector_table

    def _with_vectors(self) -> sa.FromClause:
        """The memories joined with their vectors (the memories table alone when the
        vectors are in its rows): select from it with ``_with_vector``."""
        t, v = self.table, self._vector_holder()
        if v is t:
            return t
        return t.join(v, sa.and_(*(t.c[name] == v.c[name] for name in MEMORY_KEY)))

    def _with_vector(self, key: UserKey) -> sa.ColumnElement[bool]:
        """The user's active memories that have a vector (from ``_with_vectors``)."""
        t, v = self.table, self._vector_holder()
        return sa.and_(self._scope(key), t.c.deleted_at.is_(None), v.c.embedding.is_not(None))

    async def _blob_candidates(self, conn: AsyncConnection, key: UserKey, query: Any, k: int) -> list[Entry]:
        t = self.table
        if self._index_ready:  # the version the index keeps: one primary-key read
            version = await self.keyword_index.signature(conn, key)
            return await self._rank_blobs(conn, key, query, k, self._matrix_signature(version), version[0])
        signature = tuple(
            (
                await conn.execute(
                    sa.select(
                        sa.func.count(),
                        # Summed modulo 2^31 - 1: a sum of 10k microsecond stamps overflows 64 bits.
                        sa.func.coalesce(sa.func.sum(t.c.updated_at % 2147483647), 0),
                        sa.func.coalesce(sa.func.max(t.c.updated_at), 0),
                    )
                    .select_from(self._with_vectors())
                    .where(self._with_vector(key))
                )
            ).one()
        )
        return await self._rank_blobs(conn, key, query, k, (self.dimension, *(int(v) for v in signature)))

    async def _rank_blobs(
        self,
        conn: AsyncConnection,
        key: UserKey,
        query: Any,
        k: int,
        signature: tuple[Any, ...],
        version: int | None = None,
    ) -> list[Entry]:
        matrix = self._matrices.get(key, signature)
        if matrix is None:
            matrix = UserMatrix.from_blobs(await self._stored_vectors(conn, key), self.dimension)
            self._matrices.put(key, signature, matrix)
        scores = dict(await matrix.nearest_soon(query, k))
        return await self._fetch_scored(conn, key, scores, version)

    async def _stored_vectors(self, conn: AsyncConnection, key: UserKey) -> list[tuple[str, Any]]:
        """(memory ID, float32 bytes) of each of the user's active memories with a vector."""
        t, v = self.table, self._vector_holder()
        stmt = (
            sa.select(t.c.memory_id, v.c.embedding)
            .select_from(self._with_vectors())
            .where(self._with_vector(key))
        )
        return [(r[0], r[1]) for r in (await conn.execute(stmt)).all()]

    async def _fetch_scored(
        self, conn: AsyncConnection, key: UserKey, scores: dict[str, float], version: int | None = None
    ) -> list[Entry]:
        """The active entries for ``scores``' IDs, in its order, scored (``version``:
        the user's, read on ``conn`` before; see ``_active_entries``)."""
        found = await self._active_entries(conn, key, list(scores), version)
        return [found[i].with_score(scores[i]) for i in scores if i in found]

    async def _active_entries(
        self, conn: AsyncConnection, key: UserKey, ids: Sequence[str], version: int | None
    ) -> dict[str, Entry]:
        """The active entries of ``ids`` (ID → entry, in the order read), by primary
        key in batches of 500. Given the user's ``version``, read on ``conn`` before
        (so the rows are at least that new), only the rows not already read at that
        version are read (``_sql_entries``)."""
        cached: dict[str, Entry] = {} if version is None else self._entries.at(key, version)
        # Taken before the reads: a write of this process may bring the cache to its
        # next version while they are under way (``VersionedEntries.keep``).
        known = {i: cached[i] for i in ids if i in cached}
        missing = [i for i in ids if i not in known]
        t = self.table
        columns = self._row_columns()
        read: dict[str, Entry] = {}
        for start in range(0, len(missing), 500):
            stmt = sa.select(*columns).where(
                self._scope(key), t.c.deleted_at.is_(None), t.c.memory_id.in_(missing[start : start + 500])
            )
            for row in (await conn.execute(stmt)).all():
                read[row.memory_id] = self._entry(row)
        if version is not None:
            self._entries.keep(key, version, read)
        known.update(read)
        return {i: known[i] for i in ids if i in known}

    # -- export and migration (memchat.engine.portability) -------------------

    async def users(self) -> list[UserKey]:
        t = self.table
        stmt = sa.select(t.c.app_name, t.c.user_id).distinct().order_by(t.c.app_name, t.c.user_id)

        async def fetch(conn: AsyncConnection) -> list[UserKey]:
            return [UserKey(app, user) for app, user in (await conn.execute(stmt)).all()]

        return await self._read("reading the users", fetch)

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        """The embeddings of ``ids`` (those that have one), in batches of 500."""
        v = self._vector_holder()

        async def fetch(conn: AsyncConnection) -> dict[str, list[float]]:
            found: dict[str, list[float]] = {}
            for start in range(0, len(ids), 500):
                batch = list(ids[start : start + 500])
                stmt = sa.select(v.c.memory_id, v.c.embedding).where(
                    v.c.app_name == key.app,
                    v.c.user_id == key.user,
                    v.c.memory_id.in_(batch),
                    v.c.embedding.is_not(None),
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
        t, v = self.table, self._vector_holder()
        if v is t:
            return t.c.embedding.is_(None)
        return ~sa.exists().where(*(v.c[name] == t.c[name] for name in MEMORY_KEY))

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
        t, v = self.table, self._vector_holder()
        if v is t:
            stmt: sa.Executable = sa.update(t).where(t.c.embedding.is_not(None)).values(embedding=None)
        else:
            stmt = sa.delete(v)
        stats = self.keyword_index.stats
        bump = sa.update(stats).values(version=stats.c.version + 1)  # other processes' matrices too

        async def forget(conn: AsyncConnection) -> None:
            await conn.execute(stmt)
            await conn.execute(bump)

        await self._write_all("forgetting the old vectors", forget)
        self._matrices.clear()
        self._entries.clear()

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

    # Last in the class: below it, ``list`` would name this method, not the builtin.
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
