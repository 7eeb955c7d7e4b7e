"""sqlitevec: the SQLite store plus a sqlite-vec ``vec0`` index of embeddings.

Memories live in the same table, with the same locking (``BEGIN IMMEDIATE``,
WAL) as the ``sqlite`` backend; their embeddings live beside them in a
``vec0`` virtual table ``<table>_vec`` with cosine distance, partitioned by
user, written in the same transaction:

    key       text primary key    -- JSON [app, user, memory_id]
    user_key  text partition key  -- JSON [app, user]: a KNN scan reads one user's chunks
    active    integer             -- 1, or 0 for a tombstone (vec0 metadata filters avoid NULL)
    embedding float[D] distance_metric=cosine

Searches rank the user's vectors exactly with numpy over a matrix read from
the index once and kept (backends/_vectors.py), as the sqlite store does:
vec0's KNN is a scan as well, and a slower one per search at 10k memories. The
index's dimension is fixed when it is created; opening it with another is one
clear error naming both.

Python's own ``sqlite3`` often cannot load extensions (``enable_load_extension``
is missing, as on this project's machines): then an SQLite build that can
(``sqlean-py``, else ``pysqlite3``) is chosen automatically.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sqlite3
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any, TypeVar

import numpy  # imported now so a missing extra names its pip install
import sqlalchemy as sa
import sqlite_vec  # noqa: F401
from sqlalchemy.ext.asyncio import AsyncConnection

from memchat.engine.model import BackendError, ConfigError, Entry, UserKey

from ._vectors import UserMatrix
from .base import resolve_dimension
from .sql import VectorChange, short_identifier
from .sqlite import SQLiteStore

T = TypeVar("T")

ENV_DSN = "SQLITEVEC_MEMORY_DSN"
ENV_DIMENSION = "SQLITEVEC_DIMENSION"
#: Vectors per vec0 chunk: small, because every user's partition starts one.
CHUNK_SIZE = 128
EXTRA_HINT = "pip install 'memchat[sqlitevec]'"

_DIM_RE = re.compile(r"float\[(\d+)\]", re.IGNORECASE)


def extension_sqlite() -> Any:
    """A DB-API ``sqlite3`` module that can load extensions: the standard one
    when it can, else ``sqlean`` (sqlean-py), else ``pysqlite3``."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    for name in ("sqlean", "pysqlite3.dbapi2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module.Connection, "enable_load_extension"):
            return module
    raise ConfigError(
        "the sqlitevec backend needs an SQLite that can load extensions, and this Python's cannot: "
        f"{EXTRA_HINT} (it installs sqlean-py)"
    )


def _load_vec(conn: Any) -> None:
    try:
        import sqlite_vec
    except ImportError as exc:
        raise ConfigError(f"the sqlitevec backend needs the sqlite-vec package: {EXTRA_HINT}") from exc
    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


def _dbapi(sqlite_module: Any) -> Any:
    """SQLAlchemy's aiosqlite adapter over ``sqlite_module``, every connection
    with sqlite-vec loaded, and the module's own exception classes (so errors
    are wrapped by SQLAlchemy as usual)."""
    import aiosqlite
    from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi

    def connect(database: str, *, iter_chunk_size: int = 64, **kwargs: Any) -> Any:
        kwargs.pop("loop", None)

        def connector() -> Any:
            conn = sqlite_module.connect(database, **kwargs)
            _load_vec(conn)
            return conn

        return aiosqlite.Connection(connector, iter_chunk_size)

    shim = SimpleNamespace(
        connect=connect,
        Connection=aiosqlite.Connection,
        __version__=getattr(aiosqlite, "__version__", "0"),
    )
    for name in (
        "DatabaseError", "Error", "IntegrityError", "NotSupportedError", "OperationalError",
        "ProgrammingError", "InterfaceError", "Warning", "sqlite_version", "sqlite_version_info",
    ):  # fmt: skip
        setattr(shim, name, getattr(sqlite_module, name))
    return AsyncAdapt_aiosqlite_dbapi(shim, sqlite_module)  # type: ignore[arg-type]


def _blob(vector: Sequence[float]) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


class SQLiteVecStore(SQLiteStore):
    name = "sqlitevec"
    #: Vectors live in the vec0 index, made for one dimension.
    blob_vectors = False
    fixed_dimension = True
    env_dsn = ENV_DSN
    default_file = "memories-vec.db"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        dimension: int | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """``options``: the sqlite store's (``table``, ``timeout``, engine options)."""
        env = os.environ if env is None else env
        self.dimension = resolve_dimension(dimension, env, ENV_DIMENSION)
        super().__init__(dsn, env=env, **options)
        self._vec_name = short_identifier(f"{self.table.name}_vec", 64)

    def _sqlite_module(self) -> Any:
        return _dbapi(extension_sqlite())

    # -- keys ------------------------------------------------------------

    @staticmethod
    def _user_key(key: UserKey) -> str:
        return json.dumps([key.app, key.user], ensure_ascii=False)

    @staticmethod
    def _vec_key(key: UserKey, memory_id: str) -> str:
        return json.dumps([key.app, key.user, memory_id], ensure_ascii=False)

    # -- schema ----------------------------------------------------------

    async def _create_schema(self) -> None:
        async with self._write_engine.begin() as conn:
            await self._create_tables(conn)
            row = (
                await conn.exec_driver_sql(
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (self._vec_name,)
                )
            ).first()
            if row is None:
                await conn.exec_driver_sql(
                    f'CREATE VIRTUAL TABLE "{self._vec_name}" USING vec0('
                    "key text primary key, user_key text partition key, active integer, "
                    f"embedding float[{self.dimension}] distance_metric=cosine, chunk_size={CHUNK_SIZE})"
                )
                return
            found = _DIM_RE.search(row[0] or "")
            existing = int(found.group(1)) if found else None
            if existing != self.dimension:
                raise BackendError(
                    f"embedding dimension mismatch: the index {self._vec_name} in {self.path} holds "
                    f"{existing}-dimensional vectors but this store was set up for {self.dimension}; "
                    f"use an embedder of {existing} dimensions (and {ENV_DIMENSION}={existing}), "
                    "or another table or database file for the new dimension"
                )

    # -- Store -----------------------------------------------------------

    def describe(self) -> str:
        return f"{self.name} ({self.location}, {self.dimension}-dimensional vectors)"

    async def write_vector(self, conn: AsyncConnection, key: UserKey, change: VectorChange) -> None:
        """Keep the vec0 index beside the rows, in the same transaction."""
        vec = self._vec_name
        if change.kind == "put":
            vec_key = self._vec_key(key, change.memory_id)
            active = 1 if change.active else 0
            if change.vector is None:
                await conn.exec_driver_sql(f'UPDATE "{vec}" SET active = ? WHERE key = ?', (active, vec_key))
                return
            if len(change.vector) != self.dimension:
                raise BackendError(
                    f"embedding dimension mismatch: expected {self.dimension}, got {len(change.vector)}"
                )
            await conn.exec_driver_sql(f'DELETE FROM "{vec}" WHERE key = ?', (vec_key,))
            await conn.exec_driver_sql(
                f'INSERT INTO "{vec}" (key, user_key, active, embedding) VALUES (?, ?, ?, ?)',
                (vec_key, self._user_key(key), active, _blob(change.vector)),
            )
        elif change.kind == "remove":
            await conn.exec_driver_sql(
                f'DELETE FROM "{vec}" WHERE key = ?', (self._vec_key(key, change.memory_id),)
            )
        elif change.kind == "remove_user":
            await conn.exec_driver_sql(f'DELETE FROM "{vec}" WHERE user_key = ?', (self._user_key(key),))
        else:  # tombstone_user: vec0 cannot UPDATE through a partition-key filter, so one key at a time
            keys = (
                await conn.exec_driver_sql(
                    f'SELECT key FROM "{vec}" WHERE user_key = ? AND active = 1', (self._user_key(key),)
                )
            ).all()
            for (vec_key,) in keys:
                await conn.exec_driver_sql(f'UPDATE "{vec}" SET active = 0 WHERE key = ?', (vec_key,))

    async def _blob_candidates(self, conn: AsyncConnection, key: UserKey, query: Any, k: int) -> list[Entry]:
        """The user's nearest memories, exactly, by numpy over the user's vectors read
        from the vec0 index (``_stored_vectors``): once the keyword index is ready (it
        keeps the user's version), read at the first search and kept as the sqlite
        store keeps its matrix (this process's writes carry it along, another's move
        the version). vec0's own KNN is a scan as well, and at 10k memories it took
        about 10 ms more per search than the kept matrix (benchmarks/README.md);
        ranking here also breaks ties by ID, as every other backend does."""
        if self._index_ready:
            return await super()._blob_candidates(conn, key, query, k)
        # No version yet to keep a matrix at (the sqlite store's signature reads the
        # rows' embedding column, which this store leaves empty): rank them once.
        matrix = UserMatrix.from_blobs(await self._stored_vectors(conn, key), self.dimension)
        return await self._fetch_scored(conn, key, dict(await matrix.nearest_soon(query, k)))

    async def _stored_vectors(self, conn: AsyncConnection, key: UserKey) -> list[tuple[str, Any]]:
        """The user's active vectors from the vec0 index (float32 bytes, as stored)."""
        rows: Sequence[Any] = (
            await conn.exec_driver_sql(
                f'SELECT key, embedding FROM "{self._vec_name}" WHERE user_key = ? AND active = 1',
                (self._user_key(key),),
            )
        ).all()
        return [(json.loads(vec_key)[2], blob) for vec_key, blob in rows]

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        """The embeddings of ``ids`` that the vec0 index holds."""
        keys = {self._vec_key(key, mid): mid for mid in ids}
        vec = self._vec_name

        async def fetch(conn: AsyncConnection) -> dict[str, list[float]]:
            found: dict[str, list[float]] = {}
            wanted = list(keys)
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ", ".join("?" * len(batch))
                rows: Sequence[Any] = (
                    await conn.exec_driver_sql(
                        f'SELECT key, embedding FROM "{vec}" WHERE key IN ({marks})', tuple(batch)
                    )
                ).all()
                for vec_key, blob in rows:
                    found[keys[vec_key]] = numpy.frombuffer(bytes(blob), dtype="<f4").astype(float).tolist()
            return found

        return await self._read("reading the vectors", fetch) if ids else {}

    # -- embedder bookkeeping ----------------------------------------------

    async def _missing_keys(self, conn: AsyncConnection) -> list[tuple[str, str, str]]:
        """(app, user, id) of every row without a vector in the index, in that order."""
        t = self.table
        have = {r[0] for r in (await conn.exec_driver_sql(f'SELECT key FROM "{self._vec_name}"')).all()}
        rows = await conn.execute(
            sa.select(t.c.app_name, t.c.user_id, t.c.memory_id).order_by(
                t.c.app_name, t.c.user_id, t.c.memory_id
            )
        )
        return [
            (app, user, mid)
            for app, user, mid in rows.all()
            if json.dumps([app, user, mid], ensure_ascii=False) not in have
        ]

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        t = self.table

        async def fetch(conn: AsyncConnection) -> list[Entry]:
            keys = await self._missing_keys(conn)
            if limit > 0:
                keys = keys[:limit]
            found: list[Entry] = []
            for app, user, mid in keys:
                stmt = sa.select(*self._row_columns()).where(
                    t.c.app_name == app, t.c.user_id == user, t.c.memory_id == mid
                )
                row = (await conn.execute(stmt)).first()
                if row is not None:
                    found.append(self._entry(row))
            return found

        return await self._read("reading", fetch)

    async def count_missing_vectors(self) -> int:
        async def count(conn: AsyncConnection) -> int:
            return len(await self._missing_keys(conn))

        return await self._read("counting", count)

    async def clear_vectors(self) -> None:
        vec = self._vec_name
        stats = self.keyword_index.stats
        bump = sa.update(stats).values(version=stats.c.version + 1)  # other processes' kept matrices too

        async def forget(conn: AsyncConnection) -> None:
            await conn.exec_driver_sql(f'DELETE FROM "{vec}"')
            await conn.execute(bump)

        await self._write_all("forgetting the old vectors", forget)
        self._matrices.clear()
        self._entries.clear()
