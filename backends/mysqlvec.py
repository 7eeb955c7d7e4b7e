"""mysqlvec: the MySQL/MariaDB store plus one embedding per memory.

The rows, locking and errors are the ``mysql`` backend's; each memory's
embedding is written in the same transaction as its row:

* on a server with a native vector type (MariaDB ≥ 11.7, MySQL ≥ 9, detected
  at connect by probing its cosine distance function) into a ``VECTOR(D)``
  column of the row, ranked by the server (``VEC_DISTANCE_COSINE`` /
  ``DISTANCE(…, 'COSINE')``);
* otherwise (MariaDB 10.x, MySQL 8) as the ``mysql`` backend keeps it: a
  ``BLOB`` of little-endian float32 in ``<table>_vectors`` beside the rows,
  ranked exactly in numpy over a per-user cache (``backends/sql.py``), so a
  table made by the ``mysql`` backend is used as it is. A table that is
  already BLOB (vectors beside it, or an older memchat's ``embedding`` BLOB
  column, moved beside on open) stays BLOB on a server that gains the type.

The dimension is fixed (``MYSQLVEC_DIMENSION``, or the first vector of a BLOB
table); another is one clear error.

Where to connect: the ``dsn`` argument, ``MYSQLVEC_DSN``, or the separate
variables ``MYSQLVEC_HOST/PORT/USER/PASSWORD/DATABASE`` (as ``mysql``'s).
``MYSQLVEC_DIMENSION`` sets the dimension (default 384, the offline embedder).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy  # noqa: F401  (imported now so a missing extra names its pip install)
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from memchat.engine.model import BackendError, Entry, UserKey

from .base import checked_vector, resolve_dimension
from .mysql import MySQLStore, lock_table_name, parse_dsn

ENV_DSN = "MYSQLVEC_DSN"
ENV_DIMENSION = "MYSQLVEC_DIMENSION"

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


class MySQLVecStore(MySQLStore):
    name = "mysqlvec"
    fixed_dimension = True
    env_prefix = "MYSQLVEC"
    env_dsn = ENV_DSN

    def __init__(
        self,
        dsn: str | None = None,
        *,
        dimension: int | None = None,
        native: bool | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        """``options``: the mysql store's (``table``, ``timeout``, engine options)."""
        env = os.environ if env is None else env
        self.dimension = resolve_dimension(dimension, env, ENV_DIMENSION)
        super().__init__(dsn, env=env, **options)
        #: None: detect at connect; False: always BLOB + numpy; True: require the native type.
        self._want_native = native
        #: "mariadb", "mysql" (native vector type in use) or None (BLOB).
        self.flavour: str | None = None

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

    async def _has_vectors_table(self, conn: AsyncConnection) -> bool:
        v = self._vector_holder()
        return await conn.run_sync(lambda sync: sa.inspect(sync).has_table(v.name, schema=v.schema))

    async def _create_schema(self) -> None:
        async with self.engine.connect() as conn:
            existing = await self._existing_column(conn)
            if existing is None and not self.vectors_in_row and await self._has_vectors_table(conn):
                existing = "blob"  # vectors beside the rows already: BLOB, whatever the server has
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
        if flavour and not self.vectors_in_row:
            # The server ranks the vectors: they go in a column of the row, not beside it.
            self.metadata.remove(self._vector_holder())
            native = _NativeVector(self.dimension, flavour)
            self.table.append_column(sa.Column("embedding", native, nullable=True))
            self.vector_table = self.table
        # Creates the tables, adds the column to a table made before vectors existed
        # (native), or moves an older memchat's BLOB column beside the rows.
        await super()._create_schema()
        async with self.engine.connect() as conn:
            await self._check_dimension(conn, await self._existing_column(conn) or "")
            await conn.rollback()

    async def _check_dimension(self, conn: AsyncConnection, column_type: str) -> None:
        existing: int | None = None
        if column_type.startswith("vector("):
            existing = int(column_type[len("vector(") :].rstrip(")"))
        else:
            v = self._vector_holder()
            length = (
                await conn.execute(
                    sa.select(sa.func.length(v.c.embedding)).where(v.c.embedding.is_not(None)).limit(1)
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
        if not self.flavour:
            return super()._encode(vector)
        values = checked_vector(vector, self.dimension)
        return "[" + ",".join(f"{x:.9g}" for x in values) + "]"

    def describe(self) -> str:
        return f"{self.name} ({self.location}, {self.dimension}-dimensional vectors)"

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        if k <= 0:
            return []
        await self.open()
        if not self.flavour:
            return await super().vector_candidates(key, vector, k)
        if len(vector) != self.dimension:
            raise BackendError(f"embedding dimension mismatch: expected {self.dimension}, got {len(vector)}")
        return await self._read("searching", lambda conn: self._native_candidates(conn, key, vector, k))

    async def _native_candidates(
        self, conn: AsyncConnection, key: UserKey, vector: Sequence[float], k: int
    ) -> list[Entry]:
        t = self.table
        distance: sa.ColumnClause[Any] = sa.literal_column(
            _FLAVOURS[self.flavour or "mariadb"][1].format(col="embedding")
        )
        stmt = (
            sa.select(t.c.memory_id, distance.label("distance"))
            .where(self._with_vector(key))
            .order_by(sa.text("distance"))
            .limit(int(k))
        )
        rows = (await conn.execute(stmt, {"q": self._encode(vector)})).all()
        scores = {r.memory_id: 1.0 - float(r.distance) for r in rows}
        return await self._fetch_scored(conn, key, scores)
