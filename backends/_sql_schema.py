"""The SQL family's tables and names: the memories table, the per-table
records table, and the identifier rules every dialect shares (reference §4.0)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.mysql import MEDIUMTEXT

from memchat.engine.model import ConfigError

from .base import DEFAULT_VECTOR_DIMENSION

_TABLE_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

#: The table of small per-store records (``read_meta`` / ``write_meta``), shared by every memories table.
META_TABLE = "memchat_meta"
#: The columns that name one memory, in the memories table and every table keyed like it.
MEMORY_KEY = ("app_name", "user_id", "memory_id")
#: The table beside a memories table ``<name>`` that holds its vectors: ``<name>_vectors``.
VECTORS_SUFFIX = "_vectors"


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
    table = sa.Table(
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
        schema=schema,
        **table_options,
    )
    newest_index(table)
    event_time_index(table)
    return table


def vectors_table(
    metadata: sa.MetaData,
    memories: sa.Table,
    blob_type: sa.types.TypeEngine,
    *,
    schema: str | None = None,
    **table_options: Any,
) -> sa.Table:
    """One row per memory that has a vector, keyed as the memories are: the float32
    vector kept out of the memory's row, so the rows a search reads stay small (at
    100k memories on MariaDB, the vectors made the memories table 265 MB, twice the
    default buffer pool, and the few hundred rows a hybrid search reads came from
    pages the pool no longer held)."""
    return sa.Table(
        short_identifier(f"{memories.name}{VECTORS_SUFFIX}"),
        metadata,
        sa.Column("app_name", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("memory_id", sa.String(64), primary_key=True),
        sa.Column("embedding", blob_type, nullable=False),
        schema=schema,
        **table_options,
    )


def newest_index(table: sa.Table) -> sa.Index:
    """The user's memories in the order ``read`` returns them (updated_at desc,
    created_at desc, memory_id asc: backends/_ordering.py), so reading the newest N
    walks N index entries instead of sorting every memory of the user (MariaDB
    sorted all 10,000 of them to return 10: 18 ms). Tables made before it get it
    on open (``SQLStore._ensure_indexes``); their older index on
    (app_name, user_id, updated_at) is left, for an older memchat."""
    for index in table.indexes:
        if index.name == newest_index_name(table.name):
            return index
    t = table.c
    return sa.Index(
        newest_index_name(table.name),
        t.app_name,
        t.user_id,
        t.updated_at.desc(),
        t.created_at.desc(),
        t.memory_id,
    )


def event_time_index(table: sa.Table) -> sa.Index:
    """The user's memories by event_time, so the memories of the period a query
    names (``memories_in_periods``) are an index range, not a read of every memory
    of the user. Tables made before it get it on open (``SQLStore._ensure_indexes``)."""
    name = short_identifier(f"idx_{table.name}_user_event_time")
    for index in table.indexes:
        if index.name == name:
            return index
    t = table.c
    return sa.Index(name, t.app_name, t.user_id, t.event_time)


def newest_index_name(table_name: str) -> str:
    return short_identifier(f"idx_{table_name}_user_newest")


def check_dimension(dimension: int | None) -> int:
    if dimension is None:
        return DEFAULT_VECTOR_DIMENSION
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0:
        raise ConfigError(
            f"invalid embedding dimension {dimension!r}: give the embedder's dimension, "
            "a positive whole number such as 384"
        )
    return dimension


def json_list(value: Any) -> tuple[str, ...]:
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
