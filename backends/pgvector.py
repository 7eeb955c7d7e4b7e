"""pgvector: the PostgreSQL store plus one embedding per memory.

Everything the ``postgres`` backend does holds here too (psycopg 3 async,
``pg_advisory_xact_lock`` per user, READ COMMITTED, the same error messages),
read from the ``PGVECTOR_*`` variables: ``PGVECTOR_DSN``, else
``PGVECTOR_HOST/PORT/USER/PASSWORD/DATABASE`` and ``PGVECTOR_SSLMODE``
(defaults localhost, 5432, postgres, "", memchat, disable; a missing database
is created when the account may).

The table is the postgres one with an ``embedding vector(D)`` column and an
HNSW index with ``vector_cosine_ops`` (m = 16, ef_construction = 64), so a
nearest-neighbour query is ``ORDER BY embedding <=> q``. On open the store
creates the ``vector`` extension if it is missing, and checks that an existing
table's column has the configured dimension (a mismatch is one BackendError
naming both numbers and the fix). Searches run with ``hnsw.iterative_scan``
(pgvector 0.8+), so filtering by user after the index scan still yields up to
``k`` rows when other users' memories crowd the nearest neighbours.

``put(entry, vector=None)`` leaves the stored embedding untouched; a new row
without one has a NULL embedding and is simply not a vector candidate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.types import UserDefinedType

from memchat.engine.model import BackendError, ConfigError, Entry, UserKey

from .base import checked_vector
from .postgres import (
    INSUFFICIENT_PRIVILEGE,
    PostgresStore,
    PostgresTarget,
    _sqlstate,
    parse_dsn,
    resolve_target,
)
from .sql import short_identifier

T = TypeVar("T")

ENV_DSN = "PGVECTOR_DSN"
ENV_PREFIX = "PGVECTOR"
#: The offline MiniLM embedder's dimension.
DEFAULT_DIMENSION = 384
#: pgvector's limits: a ``vector`` column holds at most 16000 dimensions, an
#: HNSW index on it at most 2000 (above that the store scans exactly).
MAX_DIMENSION = 16_000
MAX_HNSW_DIMENSION = 2_000
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: ``hnsw.ef_search`` is raised to 2·k for a search, within pgvector's bounds.
MIN_EF_SEARCH, MAX_EF_SEARCH = 40, 1_000

__all__ = ["DEFAULT_DIMENSION", "ENV_DSN", "PgVectorStore", "PostgresTarget", "parse_dsn", "resolve_target"]


class Vector(UserDefinedType):
    """pgvector's ``vector(n)``, sent as its text form ``[x,y,…]``."""

    cache_ok = True

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    def get_col_spec(self, **kw: Any) -> str:
        return f"vector({self.dimension})"

    def bind_processor(self, dialect: Any) -> Callable[[Any], str | None]:
        def process(value: Any) -> str | None:
            if value is None:
                return None
            return "[" + ",".join(repr(float(x)) for x in value) + "]"

        return process

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(bindvalue, self)

    def result_processor(self, dialect: Any, coltype: Any) -> Callable[[Any], list[float] | None]:
        def process(value: Any) -> list[float] | None:
            if value is None:
                return None
            return [float(x) for x in str(value).strip("[]").split(",") if x]

        return process

    class comparator_factory(UserDefinedType.Comparator):
        def cosine_distance(self, other: Any) -> sa.ColumnElement[float]:
            return cast("sa.ColumnElement[float]", self.op("<=>", return_type=sa.Float)(other))


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or "")[:3])


class PgVectorStore(PostgresStore):
    name = "pgvector"
    #: Vectors live in the ``vector(D)`` column (HNSW), made for one dimension.
    blob_vectors = False
    fixed_dimension = True
    env_prefix = ENV_PREFIX
    env_dsn = ENV_DSN

    def __init__(
        self,
        dsn: str | None = None,
        *,
        dimension: int = DEFAULT_DIMENSION,
        hnsw_m: int = HNSW_M,
        hnsw_ef_construction: int = HNSW_EF_CONSTRUCTION,
        **options: Any,
    ) -> None:
        """``options``: the postgres store's (``table``, ``schema``, ``env``, ``timeout``, engine options)."""
        if (
            isinstance(dimension, bool)
            or not isinstance(dimension, int)
            or not 0 < dimension <= MAX_DIMENSION
        ):
            raise ConfigError(
                f"invalid embedding dimension {dimension!r}: give the embedder's dimension, "
                f"a whole number from 1 to {MAX_DIMENSION} (384 for the offline MiniLM embedder)"
            )
        if not (
            2 <= hnsw_m <= 100 and 4 <= hnsw_ef_construction <= 1000 and hnsw_ef_construction >= 2 * hnsw_m
        ):
            raise ConfigError(
                "invalid HNSW parameters: m must be 2–100 and ef_construction 4–1000 and at least 2·m "
                f"(the defaults are m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION})"
            )
        super().__init__(dsn, **options)
        self.dimension = dimension
        t = self.table
        t.append_column(sa.Column("embedding", Vector(dimension), nullable=True))
        self.vector_table = t  # in the row, where the HNSW index reads them
        #: The HNSW index, or None above pgvector's 2000-dimension limit.
        self.index: sa.Index | None = None
        if dimension <= MAX_HNSW_DIMENSION:
            self.index = sa.Index(
                short_identifier(f"idx_{t.name}_embedding_hnsw"),
                t.c.embedding,
                postgresql_using="hnsw",
                postgresql_with={"m": hnsw_m, "ef_construction": hnsw_ef_construction},
                postgresql_ops={"embedding": "vector_cosine_ops"},
            )
        #: pgvector's version on the server, read at open.
        self.extension_version = ""

    def describe(self) -> str:
        where = f"{self.schema}.{self.table.name}" if self.schema else self.table.name
        return f"{self.name} ({self.location}, table {where}, {self.dimension} dimensions)"

    # -- schema ----------------------------------------------------------

    async def _create_schema(self) -> None:
        async with self.engine.begin() as conn:
            # One lock for the extension across every table: CREATE EXTENSION
            # IF NOT EXISTS is not safe against a concurrent twin.
            await self._advisory_lock(conn, "memchat-ddl", "extension", "vector")
            await self._ensure_extension(conn)
        await super()._create_schema()
        async with self.engine.connect() as conn:
            await self._check_embedding_column(conn)

    async def _ensure_extension(self, conn: AsyncConnection) -> None:
        query = sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        version = (await conn.execute(query)).scalar()
        if version is None:
            try:
                await conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
            except DBAPIError as exc:
                raise BackendError(self._extension_problem(exc)) from exc
            version = (await conn.execute(query)).scalar()
        self.extension_version = str(version or "")

    def _extension_problem(self, exc: BaseException) -> str:
        t = self.target
        text = str(getattr(exc, "orig", None) or exc)
        where = f"{self.name} backend at {self.location}"
        if _sqlstate(exc) == INSUFFICIENT_PRIVILEGE or "permission denied" in text:
            return (
                f"{where}: the vector extension is not enabled in database {t.database} and user "
                f"{t.user!r} may not create it: run CREATE EXTENSION vector; there once as a superuser "
                "(or the database owner), or connect as such an account"
            )
        if "is not available" in text or "could not open extension control file" in text:
            return (
                f"{where}: the server has no pgvector extension installed: install pgvector on it "
                f"(e.g. the postgresql-<version>-pgvector package or the pgvector/pgvector image), "
                f"or set {self._setting('HOST', 'PORT')} to a server that has it"
            )
        return self._error("creating the vector extension", exc).args[0]

    async def _check_embedding_column(self, conn: AsyncConnection) -> None:
        t = self.table
        relation = f'"{self.schema}"."{t.name}"' if self.schema else f'"{t.name}"'
        row = (
            await conn.execute(
                sa.text(
                    "SELECT a.atttypmod, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                    "WHERE a.attrelid = CAST(:rel AS regclass) AND a.attname = 'embedding' "
                    "AND NOT a.attisdropped"
                ),
                {"rel": relation},
            )
        ).first()
        where = f"{self.name} backend at {self.location}"
        if row is None or not str(row[1]).startswith("vector"):
            raise BackendError(
                f"{where}: table {t.name} exists but has no vector column 'embedding' (the postgres backend "
                "made it?): use another table for pgvector, or drop this one to let pgvector create it"
            )
        stored = int(row[0])
        if stored > 0 and stored != self.dimension:
            raise BackendError(
                f"{where}: embedding dimension mismatch: table {t.name} holds {stored}-dimension embeddings "
                f"but the embedder makes {self.dimension}-dimension ones: use the embedder that filled it "
                f"({stored} dimensions), or another table, or drop table {t.name} to start afresh"
            )

    # -- writes ----------------------------------------------------------

    def _check_vector(self, vector: Sequence[float]) -> list[float]:
        return checked_vector(vector, self.dimension)

    def _embedding_value(self, vector: Sequence[float]) -> Any:
        """The ``vector(D)`` column's value (the HNSW index reads it)."""
        return self._check_vector(vector)

    def _decode_vector(self, stored: Any) -> list[float] | None:
        """The ``vector(D)`` column arrives as floats (``Vector.result_processor``)."""
        return None if stored is None or len(stored) != self.dimension else list(stored)

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories nearest to ``vector``,
        best first, ``score`` = 1 − cosine distance (not clamped)."""
        if k <= 0:
            return []
        query = self._check_vector(vector)
        t = self.table
        distance = t.c.embedding.cosine_distance(query)
        stmt = (
            sa.select(*self._row_columns(), distance.label("distance"))
            .where(self._scope(key), t.c.deleted_at.is_(None), t.c.embedding.is_not(None))
            .order_by(distance)
            .limit(k)
        )
        ef_search = str(max(MIN_EF_SEARCH, min(MAX_EF_SEARCH, 2 * k)))
        settings = "SELECT set_config('hnsw.ef_search', :ef, true)"
        if _version(self.extension_version) >= (0, 8):
            # Keep scanning the index until k rows pass the user filter.
            settings += ", set_config('hnsw.iterative_scan', 'strict_order', true)"

        async def fetch(conn: AsyncConnection) -> list[Entry]:
            await conn.execute(sa.text(settings), {"ef": ef_search})
            rows = (await conn.execute(stmt)).all()
            return [self._entry(r).with_score(1.0 - float(r.distance)) for r in rows]

        found = await self._read("searching", fetch)
        # Equal distances in a stable order (the index leaves ties unordered).
        return sorted(found, key=lambda e: (-e.score, e.id))
