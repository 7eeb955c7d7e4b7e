"""Sessions in the memories' SQL database: SQLite (the same file), MySQL/MariaDB
and PostgreSQL (the same database and schema), and their vector variants.

The session store borrows the memory store's SQLAlchemy engine and plumbing —
its connection pool, DSN, per-call timeout, error sentences (passwords
masked), deadlock retries and the per-user writer lock (``_begin_user``:
SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock, MySQL's lock row) — so
sessions and memories are configured once and behave alike. Three tables are
named after the memories table ``<t>``:

    <t>_sessions         one row per conversation: title, times, counts, model, backend
    <t>_session_records  its records in order (seq), each one JSON object,
                         with a case-folded copy of its text for search
    <t>_inputs           what was typed (↑/↓ history), newest 1000 per user

Appending one record is one transaction of three statements: read the
session's counts (under the user's writer lock, so two processes never take
the same position), insert the records, update the session row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.mysql import MEDIUMTEXT
from sqlalchemy.exc import SQLAlchemyError

from backends.sql import SQLStore, short_identifier
from backends.sqlite import SQLiteStore
from backends.sqlite import _install_transaction_control as install_transaction_control
from memchat.engine.model import UserKey, from_micros

from .model import SessionInfo, SessionNotFoundError, SessionRecord, micros, now_utc, storable
from .store import INPUT_HISTORY, check_title, search_text

T = TypeVar("T")

_TEXT = sa.Text().with_variant(MEDIUMTEXT(), "mysql", "mariadb")


def _session_key() -> list[sa.Column[Any]]:
    """The key both session tables start with: (app, user, session). New
    columns on each call, since a column belongs to one table."""
    return [
        sa.Column("app_name", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("session_id", sa.String(64), primary_key=True),
    ]


class SQLSessionStore:
    """Sessions beside the memories of ``store`` (a ``backends.sql.SQLStore``).
    ``owns_store``: close the memory store with this one (the CLI opens one
    just for sessions; the chat shares the memory service's)."""

    def __init__(self, store: SQLStore, *, owns_store: bool = False) -> None:
        self.store = store
        self.name = store.name
        self._owns_store = owns_store
        self._ready = False
        #: A SQLite file's own synchronous engine (see ``SQLiteFile``); None on a server.
        self._file: SQLiteFile | None = None
        base = store.table.name
        limit = store.max_table_name
        schema = store.table.schema
        options = _table_options(store)
        self.metadata = sa.MetaData()
        self.sessions = sa.Table(
            short_identifier(f"{base}_sessions", limit),
            self.metadata,
            *_session_key(),
            sa.Column("title", sa.String(255), nullable=False),
            sa.Column("created_at", sa.BigInteger, nullable=False),
            sa.Column("updated_at", sa.BigInteger, nullable=False),
            sa.Column("message_count", sa.Integer, nullable=False),
            sa.Column("record_count", sa.Integer, nullable=False),
            sa.Column("model", sa.String(255), nullable=False),
            sa.Column("backend", sa.String(64), nullable=False),
            sa.Index(
                short_identifier(f"idx_{base}_sessions_updated", limit), "app_name", "user_id", "updated_at"
            ),
            schema=schema,
            **options,
        )
        self.records_table = sa.Table(
            short_identifier(f"{base}_session_records", limit),
            self.metadata,
            *_session_key(),
            sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("kind", sa.String(16), nullable=False),
            sa.Column("payload", _TEXT, nullable=False),
            sa.Column("search_text", _TEXT, nullable=False),
            sa.Column("created_at", sa.BigInteger, nullable=False),
            schema=schema,
            **options,
        )
        self.inputs_table = sa.Table(
            short_identifier(f"{base}_inputs", limit),
            self.metadata,
            sa.Column(
                "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
            ),
            sa.Column("app_name", sa.String(255), nullable=False),
            sa.Column("user_id", sa.String(255), nullable=False),
            sa.Column("text", _TEXT, nullable=False),
            sa.Column("created_at", sa.BigInteger, nullable=False),
            sa.Index(short_identifier(f"idx_{base}_inputs_user", limit), "app_name", "user_id", "id"),
            schema=schema,
            **options,
        )

        # The append path's statements, built once (a message is saved often).
        s = self.sessions
        scope = sa.and_(
            s.c.app_name == sa.bindparam("app"),
            s.c.user_id == sa.bindparam("user"),
            s.c.session_id == sa.bindparam("sid"),
        )
        self._find_session = sa.select(*s.c).where(scope)
        counts = ("updated_at", "message_count", "record_count", "model", "backend")
        self._update_session = s.update().where(scope).values({c: sa.bindparam(f"new_{c}") for c in counts})

    @property
    def table_names(self) -> list[str]:
        return [t.name for t in self.metadata.sorted_tables]

    def describe(self) -> str:
        return f"{self.store.describe()}, table {self.sessions.name}"

    # -- plumbing --------------------------------------------------------

    async def open(self) -> None:
        if self._ready:
            return
        await self.store.open()
        collation = getattr(self.store, "collation", None)
        if collation:  # MySQL: app and user compare exactly, as in the memories table
            for table in self.metadata.sorted_tables:
                table.dialect_kwargs["mysql_collate"] = collation
        if isinstance(self.store, SQLiteStore) and self.store.path != ":memory:":
            self._file = SQLiteFile(self.store)
        for attempt in range(2):
            try:
                await self._run(
                    "creating the session tables", lambda conn: self.metadata.create_all(conn), write=True
                )
                break
            except Exception:
                if attempt:  # another process was creating them at the same moment: look again once
                    raise
        self._ready = True

    async def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._ready = False
        if self._owns_store:
            await self.store.close()

    async def _run(
        self, action: str, body: Callable[[sa.Connection], T], *, write: bool, key: UserKey | None = None
    ) -> T:
        """``body(connection)`` in one transaction: on a SQLite file in one hop to a
        worker thread; on a server through the memory store's async engine (its
        timeouts, retries and error sentences), after the user's writer lock."""
        if self._file is not None:
            return await self._file.run(action, body, write=write)
        if not write:
            return await self.store.run_read(action, lambda conn: conn.run_sync(body))
        return await self.store.run_write(action, lambda conn: conn.run_sync(body), key=key)

    async def _read(self, body: Callable[[sa.Connection], T]) -> T:
        await self.open()
        return await self._run("reading sessions", body, write=False)

    async def _write(self, key: UserKey, body: Callable[[sa.Connection], T]) -> T:
        await self.open()
        return await self._run("saving the session", body, write=True, key=key)

    def _user(self, table: sa.Table, key: UserKey) -> sa.ColumnElement[bool]:
        return sa.and_(table.c.app_name == key.app, table.c.user_id == key.user)

    def _session(self, table: sa.Table, key: UserKey, session_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(self._user(table, key), table.c.session_id == session_id)

    @staticmethod
    def _info(row: Any) -> SessionInfo:
        return SessionInfo(
            id=row.session_id,
            title=row.title,
            created_at=from_micros(row.created_at) or now_utc(),
            updated_at=from_micros(row.updated_at) or now_utc(),
            message_count=int(row.message_count),
            record_count=int(row.record_count),
            model=row.model,
            backend=row.backend,
        )

    # -- SessionStore ----------------------------------------------------

    async def append(
        self, key: UserKey, session: SessionInfo, records: Sequence[SessionRecord]
    ) -> SessionInfo:
        r = self.records_table
        scope = {"app": key.app, "user": key.user, "sid": session.id}

        def work(conn: sa.Connection) -> SessionInfo:
            row = conn.execute(self._find_session, scope).first()
            info = self._info(row) if row is not None else session
            base = info.record_count if row is not None else 0
            counted = (info.message_count if row is not None else 0) + sum(x.counted for x in records)
            if records:
                conn.execute(
                    r.insert(),
                    [
                        {
                            "app_name": key.app, "user_id": key.user, "session_id": session.id,
                            "seq": base + i, "kind": x.kind, "payload": x.payload(),
                            "search_text": search_text(x), "created_at": micros(x.created_at),
                        }
                        for i, x in enumerate(records)
                    ],
                )  # fmt: skip
            updated = records[-1].created_at if records else info.updated_at
            values: dict[str, Any] = {
                "updated_at": micros(updated),
                "message_count": counted,
                "record_count": base + len(records),
                "model": (session.model or info.model)[:255],
                "backend": (session.backend or info.backend)[:64],
            }
            if row is None:
                conn.execute(
                    self.sessions.insert(),
                    {
                        "app_name": key.app, "user_id": key.user, "session_id": session.id,
                        "title": storable(session.title)[:255], "created_at": micros(session.created_at),
                        **values,
                    },
                )  # fmt: skip
            else:
                conn.execute(self._update_session, {**scope, **{f"new_{k}": v for k, v in values.items()}})
            return SessionInfo(
                id=session.id, title=info.title, created_at=info.created_at, updated_at=updated,
                message_count=counted, record_count=base + len(records),
                model=values["model"], backend=values["backend"],
            )  # fmt: skip

        return await self._write(key, work)

    async def get(self, key: UserKey, session_id: str) -> SessionInfo | None:
        s = self.sessions

        def fetch(conn: sa.Connection) -> SessionInfo | None:
            row = (conn.execute(sa.select(*s.c).where(self._session(s, key, session_id)))).first()
            return self._info(row) if row is not None else None

        return await self._read(fetch)

    async def records(self, key: UserKey, session_id: str) -> list[SessionRecord]:
        r = self.records_table
        stmt = (
            sa.select(r.c.seq, r.c.payload, r.c.created_at)
            .where(self._session(r, key, session_id))
            .order_by(r.c.seq)
        )

        def fetch(conn: sa.Connection) -> list[SessionRecord]:
            rows = conn.execute(stmt)
            return [SessionRecord.from_payload(row.payload, row.created_at, row.seq) for row in rows]

        return await self._read(fetch)

    async def rename(self, key: UserKey, session_id: str, title: str) -> SessionInfo:
        title = check_title(title)
        s = self.sessions
        where = self._session(s, key, session_id)

        def work(conn: sa.Connection) -> SessionInfo:
            row = (conn.execute(sa.select(*s.c).where(where))).first()
            if row is None:
                raise SessionNotFoundError(session_id)
            conn.execute(s.update().where(where).values(title=title[:255]))
            return self._info(row).renamed(title)

        return await self._write(key, work)

    async def delete(self, key: UserKey, session_id: str) -> None:
        s, r = self.sessions, self.records_table

        def work(conn: sa.Connection) -> None:
            gone = conn.execute(s.delete().where(self._session(s, key, session_id)))
            if not gone.rowcount:
                raise SessionNotFoundError(session_id)
            conn.execute(r.delete().where(self._session(r, key, session_id)))

        await self._write(key, work)

    async def add_input(self, key: UserKey, text: str) -> None:
        i = self.inputs_table

        def work(conn: sa.Connection) -> None:
            conn.execute(
                i.insert().values(
                    app_name=key.app, user_id=key.user, text=storable(text), created_at=micros(now_utc())
                )
            )
            # The oldest beyond INPUT_HISTORY go; two steps, as MySQL cannot delete
            # from a table it selects from.
            cutoff = (
                conn.execute(
                    sa.select(i.c.id)
                    .where(self._user(i, key))
                    .order_by(i.c.id.desc())
                    .offset(INPUT_HISTORY)
                    .limit(1)
                )
            ).scalar()
            if cutoff is not None:
                conn.execute(i.delete().where(self._user(i, key), i.c.id <= cutoff))

        await self._write(key, work)

    async def inputs(self, key: UserKey, limit: int = INPUT_HISTORY) -> list[str]:
        if limit <= 0:
            return []
        i = self.inputs_table
        stmt = sa.select(i.c.text).where(self._user(i, key)).order_by(i.c.id.desc()).limit(limit)

        def fetch(conn: sa.Connection) -> list[str]:
            return [row.text for row in conn.execute(stmt)][::-1]

        return await self._read(fetch)

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, query: str = "", limit: int = 0) -> list[SessionInfo]:
        s, r = self.sessions, self.records_table
        stmt = sa.select(*s.c).where(self._user(s, key))
        if query:
            needle = query.casefold()
            holds = (
                sa.select(sa.literal(1))
                .where(
                    r.c.app_name == s.c.app_name,
                    r.c.user_id == s.c.user_id,
                    r.c.session_id == s.c.session_id,
                    r.c.search_text.contains(needle, autoescape=True),
                )
                .exists()
            )  # fmt: skip
            stmt = stmt.where(sa.or_(sa.func.lower(s.c.title).contains(needle, autoescape=True), holds))
        stmt = stmt.order_by(s.c.updated_at.desc(), s.c.session_id.desc())
        if limit > 0:
            stmt = stmt.limit(limit)

        def fetch(conn: sa.Connection) -> list[SessionInfo]:
            return [self._info(row) for row in conn.execute(stmt)]

        return await self._read(fetch)


def _table_options(store: SQLStore) -> dict[str, Any]:
    """MySQL's engine and character set, as the memories table has them."""
    if store.engine.dialect.name in ("mysql", "mariadb"):
        return {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
    return {}


class SQLiteFile:
    """The session tables of a SQLite file through a synchronous engine on the
    same file, with the memory store's locking (WAL, busy timeout, BEGIN
    IMMEDIATE for writes). A write is one hop to a worker thread for the whole
    transaction instead of one per statement: a message is saved in about a
    tenth of the time (``benchmarks/session_save.py``)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.engine = sa.create_engine(
            sa.URL.create("sqlite+pysqlite", database=store.path),
            # Connections move between worker threads; one transaction uses one at a time.
            connect_args={"timeout": store.timeout, "check_same_thread": False},
        )
        install_transaction_control(self.engine, wal=True, busy_timeout=store.timeout)
        self._writer = self.engine.execution_options(sqlite_immediate=True)

    def _call(self, body: Callable[[sa.Connection], T], write: bool) -> T:
        with (self._writer if write else self.engine).begin() as conn:
            return body(conn)

    async def run(self, action: str, body: Callable[[sa.Connection], T], *, write: bool) -> T:
        try:
            return await asyncio.to_thread(self._call, body, write)
        except (SQLAlchemyError, OSError) as exc:
            raise self.store.failure(action, exc) from exc

    def close(self) -> None:
        self.engine.dispose()
