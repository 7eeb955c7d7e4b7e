"""mysqlvec: the MySQL/MariaDB store plus one embedding per memory.

The rows, locking and errors are the ``mysql`` backend's; the table gains an
``embedding`` column, written in the same transaction as the row:

* on a server with a native vector type (MariaDB ≥ 11.7, MySQL ≥ 9, detected
  at connect by probing its cosine distance function) a ``VECTOR(D)`` column,
  ranked by the server (``VEC_DISTANCE_COSINE`` / ``DISTANCE(…, 'COSINE')``);
* otherwise (MariaDB 10.x, MySQL 8) a ``BLOB`` of little-endian float32,
  ranked in numpy over the user's rows. The user's matrix is cached in this
  process: dropped by this process's writes of the user, and reused only
  while a cheap signature of the user's active rows (count, sum and max of
  ``updated_at``) is unchanged, so another process's write through the engine
  (which always moves ``updated_at`` when it stores a new vector) is seen at
  the next search.

A table made by the ``mysql`` backend gets the column added (its memories
have no embedding until re-added or updated: keyword search still finds them).
The index dimension is fixed by the first vector; another is one clear error.

Where to connect: the ``dsn`` argument, ``MYSQLVEC_DSN``, or the separate
variables ``MYSQLVEC_HOST/PORT/USER/PASSWORD/DATABASE`` (as ``mysql``'s).
``MYSQLVEC_DIMENSION`` sets the dimension (default 384, the offline embedder).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy  # noqa: F401  (imported now so a missing extra names its pip install)
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from memchat.engine.model import BackendError, Entry, UserKey

from .base import Capabilities, resolve_dimension
from .mysql import MySQLStore, lock_table_name, parse_dsn

T = TypeVar("T")

ENV_DSN = "MYSQLVEC_DSN"
ENV_DIMENSION = "MYSQLVEC_DIMENSION"
#: Users whose vector matrices are kept in memory (BLOB mode).
MATRIX_CACHE_USERS = 8

__all__ = ["MySQLVecStore", "lock_table_name", "parse_dsn"]

#: Native flavours: (vector from text, cosine distance of column and vector).
_FLAVOURS = {
    "mariadb": ("VEC_FromText", "VEC_DISTANCE_COSINE({col}, VEC_FromText(:q))"),
    "mysql": ("STRING_TO_VECTOR", "DISTANCE({col}, STRING_TO_VECTOR(:q), 'COSINE')"),
}
_PROBES = {
    "mariadb": "SELECT VEC_DISTANCE_COSINE(VEC_FromText('[1,0]'), VEC_FromText('[0,1]'))",
    "mysql": "SELECT DISTANCE(STRING_TO_VECTOR('[1,0]'), STRING_TO_VECTOR('[0,1]'), 'COSINE')",
}


class _NativeVector(sa.types.UserDefinedType):
    """``VECTOR(D)``, written from its text form '[x,y,…]'."""

    cache_ok = True

    def __init__(self, dimension: int, flavour: str) -> None:
        self.dimension = dimension
        self.flavour = flavour

    def get_col_spec(self, **_: Any) -> str:
        return f"VECTOR({self.dimension})"

    def bind_expression(self, bindvalue: Any) -> Any:
        return getattr(sa.func, _FLAVOURS[self.flavour][0])(bindvalue)


class _Float32Blob(sa.types.UserDefinedType):
    """A BLOB of little-endian float32, sent as hex through ``UNHEX`` (aiomysql
    0.3 cannot bind ``bytes`` parameters with PyMySQL ≥ 1.2)."""

    cache_ok = True

    def get_col_spec(self, **_: Any) -> str:
        return "BLOB"

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.func.UNHEX(bindvalue, type_=self)

    def bind_processor(self, dialect: Any) -> Any:
        def process(value: Any) -> Any:
            return value.hex() if isinstance(value, bytes | bytearray) else value

        return process


class _VecTransaction:
    def __init__(self, store: MySQLVecStore, inner: Any) -> None:
        self._store, self._inner = store, inner

    @property
    def _conn(self) -> AsyncConnection:
        return self._inner._conn

    async def get(self, memory_id: str) -> Entry | None:
        return await self._inner.get(memory_id)

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        self._store._matrices.pop(self._inner._key, None)
        if vector is None:
            await self._inner.put(entry)
            return
        if entry.app != self._inner._key.app or entry.user != self._inner._key.user:
            raise ValueError("an entry can only be written inside its own user's section")
        row = {**self._store._row(entry), "embedding": self._store._encode(vector)}
        await self._inner._conn.execute(self._store._upsert(row))

    async def remove(self, memory_id: str) -> None:
        self._store._matrices.pop(self._inner._key, None)
        await self._inner.remove(memory_id)

    async def count_active(self) -> int:
        return await self._inner.count_active()


class MySQLVecStore(MySQLStore):
    name = "mysqlvec"
    capabilities = Capabilities(vector_search=True, transactions=True, persistent=True, multi_process=True)
    env_prefix = "MYSQLVEC"
    env_dsn = ENV_DSN

    def __init__(
        self,
        dsn: str | None = None,
        *,
        table: str = "memories",
        dimension: int | None = None,
        native: bool | None = None,
        env: Mapping[str, str] | None = None,
        **engine_options: Any,
    ) -> None:
        env = os.environ if env is None else env
        self.dimension = resolve_dimension(dimension, env, ENV_DIMENSION)
        super().__init__(dsn, table=table, env=env, **engine_options)
        #: None: detect at connect; False: always BLOB + numpy; True: require the native type.
        self._want_native = native
        #: "mariadb", "mysql" (native vector type in use) or None (BLOB).
        self.flavour: str | None = None
        self._matrices: OrderedDict[UserKey, tuple[tuple[Any, ...], list[str], Any]] = OrderedDict()

    # -- schema ----------------------------------------------------------

    async def _probe_flavour(self, conn: AsyncConnection) -> str | None:
        for flavour, probe in _PROBES.items():
            try:
                async with conn.begin_nested():
                    await conn.execute(sa.text(probe))
                return flavour
            except sa.exc.DBAPIError:
                continue
        return None

    async def _existing_column(self, conn: AsyncConnection) -> str | None:
        row = (
            await conn.execute(
                sa.text(
                    "SELECT COLUMN_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t AND COLUMN_NAME = 'embedding'"
                ),
                {"t": self.table.name},
            )
        ).first()
        return None if row is None else str(row[0]).lower()

    async def _create_schema(self) -> None:
        async with self.engine.connect() as conn:
            existing = await self._existing_column(conn)
            flavour: str | None = None
            if existing is not None and existing.startswith("vector"):
                flavour = await self._probe_flavour(conn)
                if flavour is None:
                    raise BackendError(
                        f"{self.name} backend at {self.location}: table {self.table.name} has a VECTOR "
                        "column but the server has no cosine distance function for it"
                    )
            elif existing is None and self._want_native is not False:
                flavour = await self._probe_flavour(conn)
            if self._want_native and flavour is None:
                raise BackendError(
                    f"{self.name} backend at {self.location}: the server has no native vector type "
                    "(MariaDB 11.7+ or MySQL 9+ is needed); leave native unset to use BLOB vectors"
                )
            await conn.rollback()
        self.flavour = flavour
        column_type: sa.types.TypeEngine = (
            _NativeVector(self.dimension, flavour) if flavour else _Float32Blob()
        )
        if "embedding" in self.table.c:
            self.table.c.embedding.type = column_type
        else:
            self.table.append_column(sa.Column("embedding", column_type, nullable=True))
        await super()._create_schema()
        async with self.engine.connect() as conn:
            if await self._existing_column(conn) is None:
                # A table made by the mysql backend: add the column (DDL commits by itself).
                spec = f"VECTOR({self.dimension})" if flavour else "BLOB"
                alter = f"ALTER TABLE `{self.table.name}` ADD COLUMN embedding {spec} NULL"
                await conn.execute(sa.text(alter))
            await self._check_dimension(conn, await self._existing_column(conn) or "")
            await conn.rollback()

    async def _check_dimension(self, conn: AsyncConnection, column_type: str) -> None:
        existing: int | None = None
        if column_type.startswith("vector("):
            existing = int(column_type[len("vector(") :].rstrip(")"))
        else:
            t = self.table
            length = (
                await conn.execute(
                    sa.select(sa.func.length(t.c.embedding)).where(t.c.embedding.is_not(None)).limit(1)
                )
            ).scalar()
            if length is not None:
                existing = int(length) // 4
        if existing is not None and existing != self.dimension:
            raise BackendError(
                f"embedding dimension mismatch: table {self.table.name} at {self.location} holds "
                f"{existing}-dimensional vectors but this store was set up for {self.dimension}; "
                f"use an embedder of {existing} dimensions (and {ENV_DIMENSION}={existing}), "
                "or another table for the new dimension"
            )

    # -- vectors ---------------------------------------------------------

    def _encode(self, vector: Sequence[float]) -> Any:
        if len(vector) != self.dimension:
            raise BackendError(f"embedding dimension mismatch: expected {self.dimension}, got {len(vector)}")
        if self.flavour:
            return "[" + ",".join(f"{float(x):.9g}" for x in vector) + "]"
        import numpy as np

        return np.asarray(vector, dtype="<f4").tobytes()

    def describe(self) -> str:
        return f"{self.name} ({self.location}, {self.dimension}-dimensional vectors)"

    async def atomic(self, key: UserKey, work: Callable[[Any], Awaitable[T]]) -> T:
        return await super().atomic(key, lambda tx: work(_VecTransaction(self, tx)))

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        self._matrices.pop(key, None)
        return await super().clear(key, deleted_at=deleted_at)

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        if k <= 0:
            return []
        if len(vector) != self.dimension:
            raise BackendError(f"embedding dimension mismatch: expected {self.dimension}, got {len(vector)}")
        await self.open()
        if self.flavour:
            return await self._read("searching", lambda conn: self._native_candidates(conn, key, vector, k))
        return await self._read("searching", lambda conn: self._blob_candidates(conn, key, vector, k))

    def _active(self, key: UserKey) -> sa.ColumnElement[bool]:
        t = self.table
        return sa.and_(self._scope(key), t.c.deleted_at.is_(None), t.c.embedding.is_not(None))

    async def _native_candidates(
        self, conn: AsyncConnection, key: UserKey, vector: Sequence[float], k: int
    ) -> list[Entry]:
        t = self.table
        distance = sa.literal_column(_FLAVOURS[self.flavour or "mariadb"][1].format(col="embedding"))
        stmt = (
            sa.select(t.c.memory_id, distance.label("distance"))
            .where(self._active(key))
            .order_by(sa.text("distance"))
            .limit(int(k))
        )
        rows = (await conn.execute(stmt, {"q": self._encode(vector)})).all()
        scores = {r.memory_id: 1.0 - float(r.distance) for r in rows}
        return await self._fetch(conn, key, scores)

    async def _blob_candidates(
        self, conn: AsyncConnection, key: UserKey, vector: Sequence[float], k: int
    ) -> list[Entry]:
        import numpy as np

        t = self.table
        signature = tuple(
            (
                await conn.execute(
                    sa.select(
                        sa.func.count(),
                        sa.func.coalesce(sa.func.sum(t.c.updated_at), 0),
                        sa.func.coalesce(sa.func.max(t.c.updated_at), 0),
                    ).where(self._active(key))
                )
            ).one()
        )
        cached = self._matrices.get(key)
        if cached is not None and cached[0] == signature:
            self._matrices.move_to_end(key)
            ids, matrix = cached[1], cached[2]
        else:
            stmt = sa.select(t.c.memory_id, t.c.embedding).where(self._active(key))
            rows = (await conn.execute(stmt)).all()
            ids = [r.memory_id for r in rows]
            width = self.dimension * 4
            good = [i for i, r in enumerate(rows) if r.embedding is not None and len(r.embedding) == width]
            if len(good) != len(rows):
                ids = [ids[i] for i in good]
            if ids:
                matrix = np.frombuffer(b"".join(rows[i].embedding for i in good), dtype="<f4")
                matrix = matrix.reshape(len(ids), self.dimension)
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                matrix = matrix / np.clip(norms, 1e-12, None)
            else:
                matrix = np.zeros((0, self.dimension), dtype=np.float32)
            self._matrices[key] = (signature, ids, matrix)
            self._matrices.move_to_end(key)
            while len(self._matrices) > MATRIX_CACHE_USERS:
                self._matrices.popitem(last=False)
        if not ids:
            return []
        query = np.asarray(vector, dtype=np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        sims = matrix @ query
        k = min(int(k), len(ids))
        best = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        best = best[np.lexsort((best, -sims[best]))]
        scores = {ids[i]: float(sims[i]) for i in best}
        return await self._fetch(conn, key, scores)

    async def _fetch(self, conn: AsyncConnection, key: UserKey, scores: dict[str, float]) -> list[Entry]:
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
