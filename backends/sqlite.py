"""SQLite: the embedded default. One file in the user data directory.

Writers take SQLite's write lock up front (``BEGIN IMMEDIATE``) and wait for
it (busy timeout), and the database runs in WAL mode, so several processes
can share one file and no write is lost; readers never block writers.

Each memory's embedding is a float32 BLOB in ``<table>_vectors`` beside the
rows, ranked exactly in numpy (``backends/sql.py``); a file whose rows hold
them (an older memchat's) has them moved beside the rows when it is opened.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import StaticPool

from memchat.engine.model import ConfigError

from .base import resolve_timeout
from .sql import SQLStore

ENV_DSN = "SQLITE_MEMORY_DSN"


def default_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memchat", appauthor=False) / "memories.db"


def parse_dsn(dsn: str) -> str:
    """A file path (or ``:memory:``) from any of the DSN spellings people use:
    ``sqlite:///path``, ``sqlite+aiosqlite:///path``, the reference's
    ``file:memories.db?_busy_timeout=5000``, or a bare path."""
    text = dsn.strip()
    if not text:
        raise ConfigError(f"{ENV_DSN} is empty: give a file path such as sqlite:///memories.db")
    for prefix in ("sqlite+aiosqlite://", "sqlite+pysqlite://", "sqlite://"):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            if not rest:
                return ":memory:"
            if not rest.startswith("/"):
                raise ConfigError(
                    f"invalid SQLite DSN {dsn!r}: write sqlite:///relative.db or sqlite:////abs.db"
                )
            text = rest[1:] or ":memory:"
            break
    else:
        if text.startswith("file:"):
            text = text[len("file:") :]
    path = unquote(text.split("?", 1)[0])
    return path or ":memory:"


class SQLiteStore(SQLStore):
    name = "sqlite"
    #: The variable read for the DSN, and the file used when there is none.
    env_dsn = ENV_DSN
    default_file = "memories.db"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        table: str = "memories",
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        dimension: int | None = None,
        **engine_options: Any,
    ) -> None:
        env = os.environ if env is None else env
        seconds = resolve_timeout(timeout)
        dsn = dsn or env.get(self.env_dsn) or ""
        if dsn:
            path = parse_dsn(dsn)
        else:
            default = default_path().with_name(self.default_file)
            default.parent.mkdir(parents=True, exist_ok=True)
            path = str(default)
        self.path = path
        # module=None: the driver's own sqlite3 (SQLAlchemy imports it).
        module = self._sqlite_module()
        if path == ":memory:":
            engine = create_async_engine(
                "sqlite+aiosqlite://",
                module=module,
                poolclass=StaticPool,
                connect_args={"check_same_thread": False},
            )
        else:
            engine = create_async_engine(
                sa.URL.create("sqlite+aiosqlite", database=path),
                module=module,
                # How long a writer waits for another process's write lock.
                connect_args={"timeout": seconds},
                **engine_options,
            )
        _install_transaction_control(engine.sync_engine, wal=path != ":memory:", busy_timeout=seconds)
        super().__init__(engine, table=table, location=path, timeout=seconds, dimension=dimension)
        self._write_engine = engine.execution_options(sqlite_immediate=True)

    def _sqlite_module(self) -> Any:
        """The DB-API module the engine drives, or None for aiosqlite's default
        (sqlitevec's loads its extension into every connection)."""
        return None

    async def open(self) -> None:
        if not self._schema_ready and self.path != ":memory:" and not self.path.startswith("file:"):
            folder = Path(self.path).expanduser().parent
            if not folder.is_dir():
                # Said before aiosqlite starts: its worker thread outlives a failed
                # connect and would print a traceback if the event loop closed first.
                raise self._error("opening the database", FileNotFoundError("unable to open database file"))
        try:
            await super().open()
        except Exception:
            # The same race for any other failed connect: let aiosqlite's thread
            # finish its stop (posted to this loop) before the caller can close the loop.
            await asyncio.sleep(0.05)
            raise

    def _upsert_into(self, table: sa.Table, row: dict[str, Any], keys: Sequence[str]) -> sa.Executable:
        stmt = sqlite_insert(table).values(**row)
        return stmt.on_conflict_do_update(
            index_elements=list(keys), set_={k: stmt.excluded[k] for k in row if k not in keys}
        )

    def _explain(self, exc: BaseException) -> str:
        text = super()._explain(exc)
        if "unable to open database file" in text:
            return (
                f"cannot open {self.path}: its folder is missing or not writable; "
                f"create it or set {self.env_dsn} to a writable file"
            )
        if "database is locked" in text:
            return (
                f"{self.path} stayed locked by another process for {self.timeout:g} s: "
                "try again, or raise --timeout"
            )
        return text


def _switch_to_wal(cursor: Any, busy_timeout: float) -> None:
    """Put the file in WAL mode (once per file: the mode is stored in it).

    Switching needs the file to itself, and SQLite may answer "database is
    locked" at once, without waiting out the busy timeout, when another process
    opens the same new file at that moment: so look first, and retry within the
    timeout."""
    import time

    deadline = time.monotonic() + max(busy_timeout, 1.0)
    while True:
        try:
            cursor.execute("PRAGMA journal_mode")
            row = cursor.fetchone()
            if row is None or str(row[0]).lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as exc:
            if "locked" not in str(exc).lower() or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _install_transaction_control(sync_engine: sa.Engine, *, wal: bool, busy_timeout: float) -> None:
    """Take transaction control from the driver so that a write section can
    start with BEGIN IMMEDIATE (the write lock is taken before the first read,
    so two processes cannot both read-then-write the same user)."""

    @sa.event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {max(1, round(busy_timeout * 1000))}")
        if wal:
            _switch_to_wal(cursor, busy_timeout)
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @sa.event.listens_for(sync_engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
