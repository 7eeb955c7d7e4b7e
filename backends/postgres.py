"""PostgreSQL 12+ through SQLAlchemy and psycopg 3 (async).

Where to connect comes from, in order: the ``dsn`` argument, ``POSTGRES_DSN``
(a URL ``postgres://user:pass@host:5432/db?sslmode=disable`` or a libpq
string ``host=… port=… dbname=… user=… password=… sslmode=…``), then the
reference's separate variables ``PG_HOST/PORT/USER/PASSWORD/DATABASE`` and
``PG_SSLMODE`` (defaults localhost, 5432, postgres, "", memchat, disable).
A database that does not exist is created on first connect when the account
may (CREATE DATABASE); otherwise the error says how to create it.

Topics and participants are JSONB; each memory's embedding is a float32
BYTEA in ``<table>_vectors`` beside the rows, ranked exactly in numpy
(``backends/sql.py``; a table whose rows hold them, an older memchat's, has
them moved beside it on open and is rewritten with VACUUM FULL). The
table (optionally in a schema) is created on first use. A user's writers are serialised inside the transaction
by ``pg_advisory_xact_lock`` on a 64-bit hash of (schema, table, app, user),
released by COMMIT or ROLLBACK; transactions run at READ COMMITTED, so every
statement after the lock sees what the previous writer committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.dialects.postgresql import BYTEA, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from memchat.engine.model import BackendError, ConfigError, UserKey

from ._sql_server import ServerSQLStore, env_setting
from ._sql_server import resolve_target as resolve_server_target
from .base import abort_socket
from .sql import lock_key, validate_table_name

ENV_DSN = "POSTGRES_DSN"
#: Rows a process writes before it analyzes the tables again (or a tenth of them, if more).
ANALYZE_AFTER = 1000

log = logging.getLogger(__name__)
DEFAULT_HOST = "localhost"
DEFAULT_PORT = 5432
DEFAULT_USER = "postgres"
DEFAULT_DATABASE = "memchat"
#: Where CREATE DATABASE is sent when the target database is missing.
MAINTENANCE_DATABASE = "postgres"
DEFAULT_SSLMODE = "disable"
#: The parts of the timeout the server's own lock and statement timeouts get
#: (a lock wait is also a statement: its own reason must come first).
SERVER_SHARES = (0.8, 0.9)
#: libpq's sslmode values.
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
MAX_IDENTIFIER = 63

_URL = re.compile(r"^(?:postgres|postgresql)(?:\+[a-z0-9_]+)?://", re.IGNORECASE)

#: SQLSTATEs the messages are chosen by.
INVALID_PASSWORD = "28P01"
INVALID_AUTHORIZATION = "28000"
INVALID_CATALOG = "3D000"
INSUFFICIENT_PRIVILEGE = "42501"
RETRYABLE = {"40P01", "40001"}  # deadlock, serialization failure
SERVER_GOING_AWAY = {"57P01", "57P02"}  # admin shutdown, crash shutdown
CANNOT_CONNECT_NOW = "57P03"  # starting up, shutting down, in recovery
LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout
QUERY_CANCELED = "57014"  # statement_timeout (or a cancel request)


@cache
def _libpq_keywords() -> frozenset[str]:
    return frozenset(o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults())


@dataclass(frozen=True, slots=True)
class PostgresTarget:
    """libpq connection parameters (``host``, ``port``, ``user``, ``password``,
    ``dbname``, ``sslmode`` …); the password never leaves this object except
    to the driver."""

    params: dict[str, str] = field(default_factory=dict)

    @property
    def user(self) -> str:
        # libpq's default when none is given: $PGUSER, else the OS user.
        return self.params.get("user") or os.environ.get("PGUSER") or getpass.getuser()

    @property
    def password(self) -> str:
        return self.params.get("password", "")

    @property
    def database(self) -> str:
        return self.params.get("dbname") or os.environ.get("PGDATABASE") or self.user

    @property
    def address(self) -> str:
        hosts = (self.params.get("host") or self.params.get("hostaddr") or "local socket").split(",")
        ports = (self.params.get("port") or str(DEFAULT_PORT)).split(",")
        ports += [ports[-1]] * (len(hosts) - len(ports))
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))

    def location(self) -> str:
        """``user@host:port/dbname``; a password shows as ``***``."""
        auth = f"{self.user}:***" if self.password else self.user
        return f"{auth}@{self.address}/{self.database}"


def _check(params: dict[str, str], source: str) -> PostgresTarget:
    unknown = sorted(set(params) - _libpq_keywords())
    if unknown:
        raise ConfigError(
            f"{source} has the unknown option {unknown[0]!r}: use libpq names such as "
            "host, port, dbname, user, password, sslmode"
        )
    for port in filter(None, params.get("port", "").split(",")):
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{source} has an invalid port {port!r}: give a number such as 5432")
    check_sslmode(params.get("sslmode"), source)
    return PostgresTarget(params)


def check_sslmode(mode: str | None, source: str) -> None:
    """A ConfigError unless ``mode`` is None or one of libpq's sslmodes."""
    if mode is not None and mode not in SSLMODES:
        raise ConfigError(f"{source} has an invalid sslmode {mode!r}: use one of {', '.join(SSLMODES)}")


def parse_dsn(dsn: str, source: str = ENV_DSN) -> PostgresTarget:
    """A target from a URL (``postgres://`` or ``postgresql://``) or a libpq
    keyword string, read by libpq's rules (``psycopg.conninfo``). Parts left
    out keep libpq's defaults. Error messages name ``source`` but never quote
    the DSN or the parser's words about it (they may hold a password)."""
    text = dsn.strip()
    if not text:
        raise ConfigError(f"{source} is empty: give postgres://user:password@host:5432/database")
    if "://" in text:
        scheme = text.split("://", 1)[0]
        if not _URL.match(text):
            raise ConfigError(
                f"{source} has the scheme {scheme!r}: write postgres://user:password@host:5432/db"
            )
        text = _URL.sub(scheme.split("+", 1)[0].lower() + "://", text, count=1)  # drop a +driver suffix
    try:
        params = conninfo_to_dict(text)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(_conninfo_problem(str(exc), text, source)) from None
    return _check({k: str(v) for k, v in params.items() if v is not None}, source)


def _conninfo_problem(reason: str, text: str, source: str) -> str:
    """One sentence for libpq's complaint (``reason``) about the DSN ``text``,
    naming only an option's name: libpq's own words may quote a value, the password too."""
    option = re.search(
        r'(?:invalid connection option|invalid URI query parameter:) "([A-Za-z0-9_]+)"', reason
    )
    if option:
        return (
            f"{source} has the unknown option {option.group(1)!r}: use libpq names such as "
            "host, port, dbname, user, password, sslmode"
        )
    if "unterminated quoted string" in reason:
        return f"{source} has an unterminated quoted value: close the quote (password='a b')"
    if 'missing "="' in reason and "=" not in text:
        return (
            f"{source} is neither a postgres:// URL nor a libpq string "
            "(host=… port=… dbname=… user=… password=… sslmode=…)"
        )
    if 'missing "="' in reason or "invalid connection option" in reason:
        return (
            f"{source} is not a valid libpq string: expected key=value "
            "(quote values with spaces: password='a b')"
        )
    return (
        f"{source} is not a valid PostgreSQL DSN: write postgres://user:password@host:5432/database "
        "(percent-encode special characters) or host=… port=… dbname=… user=… password=…"
    )


def target_from_env(env: Mapping[str, str], prefix: str = "PG") -> PostgresTarget:
    """The reference's separate variables ``<prefix>_HOST`` … plus ``<prefix>_SSLMODE``."""

    def get(name: str, default: str) -> str:
        return env_setting(env, prefix, name, default)

    params = {
        "host": get("HOST", DEFAULT_HOST),
        "port": get("PORT", str(DEFAULT_PORT)),
        "user": get("USER", DEFAULT_USER),
        "dbname": get("DATABASE", DEFAULT_DATABASE),
        "sslmode": get("SSLMODE", DEFAULT_SSLMODE),
    }
    if get("PASSWORD", ""):
        params["password"] = get("PASSWORD", "")
    if not params["port"].isdigit() or not 0 < int(params["port"]) < 65536:
        raise ConfigError(f"{prefix}_PORT has an invalid port {params['port']!r}: give a number such as 5432")
    check_sslmode(params["sslmode"], f"{prefix}_SSLMODE")
    return PostgresTarget(params)


def resolve_target(
    dsn: str | None, env: Mapping[str, str], prefix: str = "PG", env_dsn: str = ENV_DSN
) -> PostgresTarget:
    """``dsn`` > ``$POSTGRES_DSN`` > ``$PG_HOST`` … > defaults."""
    from_env = partial(target_from_env, prefix=prefix)
    return resolve_server_target(dsn, env, env_dsn, "the PostgreSQL DSN", parse_dsn, from_env)


def _sqlstate(exc: BaseException) -> str | None:
    orig = getattr(exc, "orig", None) or exc
    return getattr(orig, "sqlstate", None)


def _session_options(timeout: float, given: str | None) -> str:
    """libpq ``options``: lock and statement timeouts a little under ``timeout``,
    so the server ends a long lock wait with its own reason before the call's
    deadline (what the DSN gives comes after, so it wins)."""
    lock, statement = (max(1, math.floor(timeout * share * 1000)) for share in SERVER_SHARES)
    ours = f"-c lock_timeout={lock} -c statement_timeout={statement}"
    return f"{ours} {given}" if given else ours


class PostgresStore(ServerSQLStore):
    name = "postgres"
    max_table_name = MAX_IDENTIFIER
    bounded_calls = True
    server_kind = "PostgreSQL server"
    #: The environment variables read: ``<env_prefix>_HOST`` … and ``env_dsn``.
    env_prefix = "PG"
    env_dsn = ENV_DSN

    def __init__(
        self,
        dsn: str | None = None,
        *,
        table: str = "memories",
        schema: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        dimension: int | None = None,
        **engine_options: Any,
    ) -> None:
        from .base import resolve_timeout

        self.target = self._resolve(dsn, env, resolve_target)
        self.schema = None if schema is None else validate_table_name(schema, MAX_IDENTIFIER, "schema name")
        seconds = resolve_timeout(timeout)
        connect_args: dict[str, Any] = {
            # libpq's own bound (whole seconds, at least 2); the call's deadline is the real one.
            "connect_timeout": max(2, math.ceil(seconds)),
            "client_encoding": "utf8",
            **self.target.params,
            "options": _session_options(seconds, self.target.params.get("options")),
            # No server-side prepared statements: psycopg prepares a query on its fifth
            # run, and the server then keeps the plan made for the table as it was. A
            # table filled from empty kept a sequential scan for every lookup by key
            # (30 ms each at 74k rows, a 100k fill past 30 minutes) wherever nothing
            # analyzed it (autovacuum off). Planning each query costs ~0.1 ms.
            "prepare_threshold": None,
            **engine_options.pop("connect_args", {}),
        }
        connect_args.setdefault("async_creator_fn", self._create_connection)
        engine_options.setdefault("pool_pre_ping", True)
        engine_options.setdefault("isolation_level", "READ COMMITTED")
        engine = create_async_engine("postgresql+psycopg://", connect_args=connect_args, **engine_options)
        location = self.target.location()
        super().__init__(
            engine,
            table=table,
            location=location,
            schema=self.schema,
            secret=self.target.password,
            timeout=seconds,
            dimension=dimension,
        )
        #: The schema the table really lives in (``current_schema()`` when none
        #: is given), so every store on one table takes the same locks.
        self._lock_schema = self.schema or ""
        #: Rows this process wrote since its last ANALYZE, and the table's rows then.
        self._written_since_analyze = 0
        self._analyzed_rows = 0
        self._analysis: asyncio.Task[None] | None = None

    def _json_type(self) -> sa.types.TypeEngine:
        return JSONB()

    def _blob_type(self) -> sa.types.TypeEngine:
        return BYTEA()

    # -- timeouts --------------------------------------------------------

    def _create_connection(self, *args: Any, **kwargs: Any) -> Any:
        return self._connect_bounded(lambda: self._connect_creating_database(*args, **kwargs))

    async def _connect_creating_database(self, *args: Any, **kwargs: Any) -> Any:
        """Connect; when the database does not exist, create it (if this account may) and
        connect again, so `--memory postgres` works on a fresh server. If it may not, the
        original "does not exist" error stands and says how to create it."""
        try:
            return await psycopg.AsyncConnection.connect(*args, **kwargs)
        except psycopg.OperationalError as exc:
            if _sqlstate(exc) != INVALID_CATALOG and not re.search(r'database ".*" does not exist', str(exc)):
                raise
            if not await self._create_database(kwargs):
                raise
        return await psycopg.AsyncConnection.connect(*args, **kwargs)

    async def _create_database(self, params: dict[str, Any]) -> bool:
        """CREATE DATABASE for the target; False when the server refuses it."""
        name = params.get("dbname") or self.target.database
        admin = {k: v for k, v in params.items() if k != "async_creator_fn"}
        admin["dbname"] = MAINTENANCE_DATABASE
        try:
            async with await psycopg.AsyncConnection.connect(**admin, autocommit=True) as conn:
                await conn.execute(
                    pg_sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(
                        pg_sql.Identifier(name)
                    )
                )
        except pg_errors.DuplicateDatabase:
            return True  # another process created it first
        except psycopg.Error:
            return False
        return True

    def _abort_connection(self, driver_connection: Any) -> None:
        pgconn = getattr(driver_connection, "pgconn", None)
        if pgconn is not None and not driver_connection.closed:
            with contextlib.suppress(Exception):  # already finished: nothing to shut down
                abort_socket(pgconn.socket)

    def _server_address(self) -> str:
        return self.target.address

    # -- schema ----------------------------------------------------------

    async def _create_schema(self) -> None:
        async with self.engine.begin() as conn:
            if not self.schema:
                current = (await conn.execute(sa.text("SELECT current_schema()"))).scalar()
                self._lock_schema = current or ""
            # DDL is transactional here: processes creating tables (or the
            # schema) in one schema queue on this lock.
            await self._advisory_lock(conn, "memchat-ddl", self._lock_schema)
            encoding = (await conn.execute(sa.text("SHOW server_encoding"))).scalar()
            if encoding not in ("UTF8", "SQL_ASCII"):
                raise BackendError(
                    f"{self.name} backend at {self.location}: database {self.target.database} uses the "
                    f"{encoding} encoding, which cannot hold every memory: create it with ENCODING 'UTF8'"
                )
            if self.schema:
                exists = (
                    await conn.execute(
                        sa.text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": self.schema}
                    )
                ).first()
                if exists is None:
                    await conn.execute(sa.schema.CreateSchema(self.schema))
            await self._create_tables(conn)
        if self._vectors_moved:
            # Dropping a column leaves its bytes in every row until the row is rewritten.
            await self._analyze(vacuum=True, full=True)
        known = await self._planner_rows()
        if known is not None and known < 0 and await self._holds_rows():
            await self._analyze()  # never analyzed, and nothing runs autovacuum here
            self._start_maintenance()
        else:
            self._analyzed_rows = max(known or 0, 0)

    # -- planner statistics ---------------------------------------------------

    def _after_section(self, rows: int) -> None:
        """Analyze the tables once this process has written a tenth of what they held
        at the last analysis (at least ``ANALYZE_AFTER`` rows), as autovacuum does
        where it runs: without statistics the planner reads a lookup of a few memories
        by ID as a scan of every memory of the user (111 ms against 0.06 ms at 100k).
        The analysis runs beside the writes, not inside the one that crossed the line
        (0.1-0.4 s at 100k)."""
        self._written_since_analyze += rows
        if self._written_since_analyze < max(ANALYZE_AFTER, self._analyzed_rows // 10):
            return
        self._start_maintenance()

    def _start_maintenance(self) -> None:
        """VACUUM (ANALYZE) the tables in the background, unless it runs already."""
        if self._analysis is None or self._analysis.done():
            self._written_since_analyze = 0
            self._analysis = asyncio.get_running_loop().create_task(self._maintain_quietly())

    async def _maintain_quietly(self) -> None:
        try:
            await self._analyze(vacuum=True)
        except Exception as exc:  # a background job: nobody is there to hear it fail
            log.debug("VACUUM failed: %s", exc)

    async def _analysis_done(self) -> None:
        """Wait for a running analysis (close does, so no task outlives the engine)."""
        if self._analysis is not None:
            await asyncio.gather(self._analysis, return_exceptions=True)
            self._analysis = None

    async def close(self) -> None:
        await self._analysis_done()
        await super().close()

    async def _holds_rows(self) -> bool:
        try:
            async with self.engine.connect() as conn:
                found = await conn.execute(sa.select(sa.literal(1)).select_from(self.table).limit(1))
                return found.first() is not None
        except SQLAlchemyError:
            return False

    async def _planner_rows(self) -> int | None:
        """The memories table's row count as the planner knows it (-1: never analyzed)."""
        name = self.engine.dialect.identifier_preparer.format_table(self.table)
        try:
            async with self.engine.connect() as conn:
                found = await conn.execute(
                    sa.text("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(:name)"),
                    {"name": name},
                )
                value = found.scalar()
        except SQLAlchemyError:
            return None
        return None if value is None else int(value)

    async def _analyze(self, *, vacuum: bool = False, full: bool = False) -> None:
        """ANALYZE the store's tables (``vacuum``: VACUUM (ANALYZE), which also marks
        the pages all of whose rows every reader sees, so reading a term's postings
        stays in the key's index instead of visiting a heap page per posting; ``full``:
        the memories table alone, rewritten). A failure (not the tables' owner, a busy
        server) only leaves them as they were."""
        index = self.keyword_index
        tables = [self.table] if full else [self.table, index.terms, index.docs, index.stats]
        if self.vector_table is not None and self.vector_table is not self.table and not full:
            tables.append(self.vector_table)
        names = ", ".join(self.engine.dialect.identifier_preparer.format_table(t) for t in tables)
        statement = f"ANALYZE {names}"
        if vacuum or full:
            statement = f"VACUUM ({'FULL, ' if full else ''}ANALYZE) {names}"
        try:
            async with self.engine.connect() as conn:
                # VACUUM runs outside any transaction.
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.execute(sa.text(statement))
        except SQLAlchemyError as exc:
            log.debug("%s failed: %s", statement, exc)
            return
        self._analyzed_rows = max(await self._planner_rows() or 0, 0)

    @staticmethod
    async def _advisory_lock(conn: AsyncConnection, *parts: str) -> None:
        await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(*parts)})

    # -- hooks -----------------------------------------------------------

    async def _begin_user(self, conn: AsyncConnection, key: UserKey) -> None:
        await self._advisory_lock(conn, "memchat", self._lock_schema, self.table.name, key.app, key.user)

    def _upsert_into(self, table: sa.Table, row: dict[str, Any], keys: Sequence[str]) -> sa.Executable:
        stmt = pg_insert(table).values(**row)
        return stmt.on_conflict_do_update(
            index_elements=list(keys), set_={k: stmt.excluded[k] for k in row if k not in keys}
        )

    def _is_retryable(self, exc: BaseException) -> bool:
        return _sqlstate(exc) in RETRYABLE

    def _is_connection_lost(self, exc: BaseException) -> bool:
        if super()._is_connection_lost(exc):
            return True
        orig = getattr(exc, "orig", None) or exc
        state = _sqlstate(exc)
        return isinstance(orig, psycopg.OperationalError) and (state is None or state in SERVER_GOING_AWAY)

    def _explain(self, exc: BaseException) -> str:
        state = _sqlstate(exc)
        orig = getattr(exc, "orig", None) or exc
        text = str(orig)
        t = self.target
        if (
            state == INVALID_PASSWORD
            or "password authentication failed" in text
            or "no password supplied" in text
        ):
            return (
                f"access denied for user {t.user!r}: the password is wrong or missing; "
                f"set {self._setting('USER', 'PASSWORD')} to a valid account"
            )
        if (
            state == INVALID_AUTHORIZATION
            or "no pg_hba.conf entry" in text
            or re.search(r'role ".*" does not exist', text)
        ):
            return (
                f"the server refused user {t.user!r} (the role does not exist or pg_hba.conf rejects it): "
                f"create the role, or set {self._setting('USER', 'PASSWORD')} to a valid account"
            )
        if state == INVALID_CATALOG or re.search(r'database ".*" does not exist', text):
            return (
                f"database {t.database} does not exist: create it "
                f'(CREATE DATABASE "{t.database}") or set {self._setting("DATABASE")}'
            )
        if state == INSUFFICIENT_PRIVILEGE or "permission denied" in text:
            reason = text.strip().splitlines()[0].removeprefix("connection failed: ")
            return (
                f"permission denied for user {t.user!r} ({reason}): grant it CONNECT on the database and "
                f"USAGE, CREATE on the schema (or create the table as its owner), or use another account"
            )
        if any(
            s in text
            for s in (
                "Connection refused",
                "could not connect",
                "failed to resolve host",
                "timeout expired",
                "No such file or directory",
                "Network is unreachable",
                "No route to host",
            )
        ):
            return (
                f"cannot connect to the server at {t.address} (it is down or unreachable): start it, "
                f"or set {self._setting('HOST', 'PORT')} to a running PostgreSQL"
            )
        if "SSL" in text and text.startswith("connection "):
            mode = t.params.get("sslmode", "prefer")
            reason = _connect_reason(text)
            if "does not support SSL" in text:
                return (
                    f"the server at {t.address} does not support SSL, but sslmode={mode} requires it: "
                    f"set {self._setting('SSLMODE')} to disable or prefer, or enable SSL on the server"
                )
            return (
                f"the SSL connection to {t.address} failed ({reason}): check {self._setting('SSLMODE')} "
                "and the server's certificate"
            )
        if state == LOCK_NOT_AVAILABLE:
            return (
                f"another writer of this user held its lock for more than {self.timeout:g} s: "
                "try again, or raise --timeout"
            )
        if state == QUERY_CANCELED and "statement timeout" in text:
            return (
                f"the server stopped a statement that ran for more than {self.timeout:g} s: "
                "try again, or raise --timeout"
            )
        if state == CANNOT_CONNECT_NOW or "the database system is" in text:
            return (
                f"the server at {t.address} is starting up, shutting down or recovering: "
                "try again in a moment"
            )
        if text.startswith(("connection failed:", "connection is bad:")):
            # Refused while connecting: the server's (or libpq's) own reason.
            return f"cannot connect to the server at {t.address}: {_connect_reason(text)}"
        if self._is_connection_lost(exc):
            return (
                f"the connection to {t.address} was lost (the server went away or restarted); "
                "the next call reconnects once the server is back"
            )
        return super()._explain(exc)


def _connect_reason(text: str) -> str:
    """libpq's reason from a connection error, without its "connection to
    server at …, port … failed:" preamble (the message names the address)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else text
    first = re.sub(r"^connection (failed|is bad):\s*", "", first)
    first = re.sub(r"^connection to server (at|on) .*? failed:\s*", "", first)
    return (first or "no reason given").rstrip(".")
