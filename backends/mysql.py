"""MySQL 8+ and MariaDB 10.6+ through SQLAlchemy and aiomysql.

Where to connect comes from, in order: the ``dsn`` argument, ``MYSQL_DSN``
(a URL ``mysql://user:pass@host:3306/db`` or the Go driver's
``user:pass@tcp(host:3306)/db?parseTime=true&charset=utf8mb4``), then the
reference's separate variables ``MYSQL_HOST/PORT/USER/PASSWORD/DATABASE``
(defaults localhost, 3306, root, "", memchat). A database that does not exist
is created on first connect when the account may (CREATE DATABASE … utf8mb4).

Text is utf8mb4 on the connection and in the tables, with a binary NO PAD
collation (``utf8mb4_0900_bin`` on MySQL, ``utf8mb4_nopad_bin`` on MariaDB),
so emoji round-trip and app/user names compare exactly: 'Alice' ≠ 'alice'
and 'a' ≠ 'a '. The tables are created on first use.

A user's writers are serialised by a lock row in ``<table>_locks``: every
atomic section starts with ``INSERT … ON DUPLICATE KEY UPDATE`` on the row of
its (app, user), which holds InnoDB's exclusive row lock until COMMIT or
ROLLBACK — in any process, on any machine. The limit check and the insert
therefore run under one lock, in one transaction.

Each memory's embedding is a float32 BLOB (sent as hex through ``UNHEX``) in
``<table>_vectors`` beside the rows, ranked exactly in numpy
(``backends/sql.py``); a table whose rows hold them (an older memchat's) has
them moved beside it when it is opened.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import aiomysql  # (imported now so a missing driver names its pip install)
import pymysql
import sqlalchemy as sa
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from memchat.engine.model import BackendError, ConfigError, UserKey

from ._sql_server import ServerSQLStore, env_setting
from ._sql_server import resolve_target as resolve_server_target
from .base import resolve_timeout
from .sql import short_identifier

ENV_DSN = "MYSQL_DSN"
DEFAULT_HOST = "localhost"
DEFAULT_PORT = 3306
DEFAULT_USER = "root"
DEFAULT_DATABASE = "memchat"
#: TLS options of the DSNs people write (Go's tls=, MySQL's ssl-mode=…): not
#: supported, so refused rather than silently ignored (unless they say "off").
TLS_OPTIONS = frozenset(
    {"tls", "ssl", "sslmode", "ssl-mode", "ssl_mode", "ssl-ca", "ssl_ca", "ssl-cert", "ssl_cert",
     "ssl-key", "ssl_key", "ssl-verify-server-cert", "ssl_verify_cert", "ssl_verify_identity"}
)  # fmt: skip
TLS_OFF = frozenset({"false", "0", "off", "disabled", "disable"})
#: Binary, NO PAD collations (exact comparison, trailing spaces significant),
#: best first; ``utf8mb4_bin`` (PAD SPACE) only if the server has neither.
EXACT_COLLATIONS = ("utf8mb4_0900_bin", "utf8mb4_nopad_bin", "utf8mb4_bin")

#: group_concat_max_len for this store's sessions (1 GiB; the server's packet size
#: still bounds one result, and a cut result is detected and read row by row).
_GROUP_CONCAT_MAX = 1 << 30
_URL_SCHEMES = {"mysql", "mariadb", "mysql+aiomysql", "mysql+pymysql", "mariadb+aiomysql", "mariadb+pymysql"}

#: MySQL error codes the messages are chosen by.
ACCESS_DENIED = 1045
DB_ACCESS_DENIED = 1044
UNKNOWN_DATABASE = 1049
TABLE_ACCESS_DENIED = 1142
COLUMN_ACCESS_DENIED = 1143
LOCK_WAIT_TIMEOUT = 1205
DEADLOCK = 1213
CANNOT_CONNECT = {2002, 2003, 2005}
CONNECTION_LOST = {2006, 2013, 2055}


@dataclass(frozen=True, slots=True)
class MySQLTarget:
    """Where a MySQL store connects; ``password`` never leaves this object
    except to the driver."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    user: str = DEFAULT_USER
    password: str = ""
    database: str = DEFAULT_DATABASE
    unix_socket: str | None = None

    @property
    def address(self) -> str:
        if self.unix_socket:
            return f"unix({self.unix_socket})"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def location(self) -> str:
        """``user@host:port/database``; a password shows as ``***``."""
        auth = f"{self.user}:***" if self.password else self.user
        return f"{auth}@{self.address}/{self.database}"

    def connect_args(self, timeout: float | None = None) -> dict[str, Any]:
        seconds = resolve_timeout(timeout)
        args: dict[str, Any] = {
            "user": self.user,
            "password": self.password,
            "db": self.database,
            "charset": "utf8mb4",
            "connect_timeout": seconds,
            # Lock waits end on the server a little before the call's deadline,
            # with its own reason (whole seconds, at least 1).
            "init_command": (
                f"SET SESSION innodb_lock_wait_timeout = {_lock_wait(seconds)}, "
                f"lock_wait_timeout = {_lock_wait(seconds)}, "
                # A common term's postings come back joined in one GROUP_CONCAT
                # (sql_index.py): the default cap (1 MB on MariaDB, 1 KB on MySQL)
                # would cut them short, and the search would read them row by row.
                f"group_concat_max_len = {_GROUP_CONCAT_MAX}"
            ),
        }
        if self.unix_socket:
            args["unix_socket"] = self.unix_socket
        else:
            args["host"], args["port"] = self.host, self.port
        return args


class Float32Blob(sa.types.UserDefinedType):
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


def _lock_wait(timeout: float) -> int:
    return max(1, math.floor(timeout * 0.9))


def _port(value: str, source: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise ConfigError(f"{source} has an invalid port {value!r}: give a number such as 3306")
    return port


def _split_host_port(address: str, source: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]:port`` → (host, port)."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, _port(rest[1:], source) if rest.startswith(":") else DEFAULT_PORT
    if address.count(":") == 1:
        host, _, port = address.partition(":")
        return host or "127.0.0.1", _port(port, source)
    return address or "127.0.0.1", DEFAULT_PORT


def parse_dsn(dsn: str, source: str = ENV_DSN) -> MySQLTarget:
    """A target from a URL (``mysql://user:pass@host:port/db``) or the Go
    driver's DSN (``user:pass@tcp(host:port)/db?params``). ``source`` names
    where the DSN came from, for the error message (which never quotes it:
    it may hold a password)."""
    text = dsn.strip()
    if not text:
        raise ConfigError(f"{source} is empty: give mysql://user:password@host:3306/database")
    target = _parse_url(text, source) if "://" in text else _parse_go_dsn(text, source)
    if not target.database:
        raise ConfigError(f"{source} names no database: end it with /<database>, e.g. …:3306/memchat")
    return target


def _parse_url(text: str, source: str) -> MySQLTarget:
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError:
        raise ConfigError(
            f"{source} is not a valid URL (check the port and percent-encode special characters "
            "in the password): write mysql://user:password@host:3306/database"
        ) from None
    if url.scheme.lower() not in _URL_SCHEMES:
        raise ConfigError(
            f"{source} has the scheme {url.scheme!r}, not mysql: write mysql://user:password@host:3306/database"
        )
    query = dict(parse_qsl(url.query))
    _refuse_tls(query, source)
    return MySQLTarget(
        host=url.hostname or DEFAULT_HOST,
        port=port or DEFAULT_PORT,
        user=unquote(url.username) if url.username else DEFAULT_USER,
        password=unquote(url.password) if url.password else "",
        database=unquote(url.path.lstrip("/")),
        unix_socket=query.get("unix_socket") or None,
    )


def _parse_go_dsn(text: str, source: str) -> MySQLTarget:
    # As go-sql-driver/mysql: the last '/' starts the database name, the last
    # '@' before it ends the credentials, the first ':' splits user and password.
    slash = text.rfind("/")
    if slash < 0:
        raise ConfigError(
            f"{source} is neither a mysql:// URL nor a Go MySQL DSN "
            "(user:password@tcp(host:3306)/database): the '/' before the database name is missing"
        )
    head, tail = text[:slash], text[slash + 1 :]
    database = unquote(tail.split("?", 1)[0])
    _refuse_tls(dict(parse_qsl(tail.partition("?")[2])), source)
    user, password, address = DEFAULT_USER, "", head
    at = head.rfind("@")
    if at >= 0:
        credentials, address = head[:at], head[at + 1 :]
        name, _, password = credentials.partition(":")
        user = name or DEFAULT_USER
    match = re.fullmatch(r"(?P<net>[A-Za-z0-9]*)(?:\((?P<addr>[^()]*)\))?", address)
    if match is None:
        raise ConfigError(
            f"{source} has an unreadable address part: write user:password@tcp(host:3306)/database "
            "(and URL-escape '/' in parameter values)"
        )
    net, addr = (match["net"] or "tcp").lower(), match["addr"] or ""
    if net == "unix":
        return MySQLTarget(
            user=user, password=password, database=database, unix_socket=addr or "/tmp/mysql.sock"
        )
    if net not in ("tcp", "tcp4", "tcp6"):
        raise ConfigError(f"{source} uses the network {net!r}: use tcp(host:port) or unix(/path/to/socket)")
    host, port = _split_host_port(addr or "127.0.0.1:3306", source)
    return MySQLTarget(host=host, port=port, user=user, password=password, database=database)


def _refuse_tls(query: Mapping[str, str], source: str) -> None:
    for key, value in query.items():
        if key.lower() in TLS_OPTIONS and value.strip().lower() not in TLS_OFF:
            raise ConfigError(
                f"{source} asks for TLS ({key}=…), which the MySQL backends do not support yet: "
                "remove the option (the connection is then not encrypted) or reach the server through "
                "a local socket or a tunnel"
            )


def target_from_env(env: Mapping[str, str], prefix: str = "MYSQL") -> MySQLTarget:
    """The reference's separate variables, ``<prefix>_HOST`` … ``<prefix>_DATABASE``."""

    def get(name: str, default: str) -> str:
        return env_setting(env, prefix, name, default)

    return MySQLTarget(
        host=get("HOST", DEFAULT_HOST),
        port=_port(get("PORT", str(DEFAULT_PORT)), f"{prefix}_PORT"),
        user=get("USER", DEFAULT_USER),
        password=get("PASSWORD", ""),
        database=get("DATABASE", DEFAULT_DATABASE),
    )


def resolve_target(
    dsn: str | None, env: Mapping[str, str], prefix: str = "MYSQL", env_dsn: str = ENV_DSN
) -> MySQLTarget:
    """``dsn`` > ``$MYSQL_DSN`` > ``$MYSQL_HOST`` … > defaults."""
    from_env = partial(target_from_env, prefix=prefix)
    return resolve_server_target(dsn, env, env_dsn, "the MySQL DSN", parse_dsn, from_env)


def lock_table_name(table: str) -> str:
    return short_identifier(f"{table}_locks", 64)


def _error_code(exc: BaseException) -> int | None:
    orig = getattr(exc, "orig", None) or exc
    args = getattr(orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _server_message(exc: BaseException) -> str:
    """The server's own text of a driver error, without the code tuple."""
    orig = getattr(exc, "orig", None) or exc
    args: tuple[Any, ...] = getattr(orig, "args", ())
    text = args[1] if len(args) > 1 and isinstance(args[1], str) else str(orig)
    return text.strip().splitlines()[0] if text.strip() else type(orig).__name__


async def _connect(*args: Any, **kwargs: Any) -> aiomysql.Connection:
    """``aiomysql.connect``, closing the half-made connection when it is
    interrupted (a server that accepts but never greets us)."""
    connection = aiomysql.Connection(*args, **kwargs)
    try:
        await connection._connect()
    except BaseException:
        connection.close()
        raise
    return connection


async def _connect_creating_database(*args: Any, **kwargs: Any) -> aiomysql.Connection:
    """Connect; when the database does not exist, create it (if this account may) and connect
    again, so `--memory mysql` works on a fresh server. If it may not, the original "unknown
    database" error stands and says how to create it."""
    try:
        return await _connect(*args, **kwargs)
    except pymysql.err.OperationalError as exc:
        name = kwargs.get("db")
        if not name or not exc.args or exc.args[0] != UNKNOWN_DATABASE:
            raise
        try:
            admin = await _connect(*args, **{**kwargs, "db": None})
            try:
                async with admin.cursor() as cursor:
                    quoted = "`" + name.replace("`", "``") + "`"
                    await cursor.execute(f"CREATE DATABASE IF NOT EXISTS {quoted} CHARACTER SET utf8mb4")
            finally:
                admin.close()
        except pymysql.err.MySQLError:
            raise exc from None
    return await _connect(*args, **kwargs)


class MySQLStore(ServerSQLStore):
    name = "mysql"
    max_table_name = 64
    postings_apart = False  # one aggregate is faster here (sql_index.py)
    bounded_calls = True
    server_kind = "MySQL/MariaDB server"
    #: The environment variables read: ``<env_prefix>_HOST`` … and ``env_dsn``.
    env_prefix = "MYSQL"
    env_dsn = ENV_DSN

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
        self.target = self._resolve(dsn, env, resolve_target)
        seconds = resolve_timeout(timeout)
        connect_args = {**self.target.connect_args(seconds), **engine_options.pop("connect_args", {})}
        connect_args.setdefault("async_creator_fn", self._create_connection)
        engine_options.setdefault("pool_pre_ping", True)
        engine_options.setdefault("pool_recycle", 3600)
        engine = create_async_engine("mysql+aiomysql://", connect_args=connect_args, **engine_options)
        super().__init__(
            engine,
            table=table,
            location=self.target.location(),
            secret=self.target.password,
            timeout=seconds,
            dimension=dimension,
            mysql_engine="InnoDB",
            mysql_charset="utf8mb4",
        )
        self.locks = sa.Table(
            lock_table_name(self.table.name),
            self.metadata,
            sa.Column("app_name", sa.String(255), primary_key=True),
            sa.Column("user_id", sa.String(255), primary_key=True),
            mysql_engine="InnoDB",
            mysql_charset="utf8mb4",
        )
        self.collation: str | None = None

    # -- timeouts --------------------------------------------------------

    def _create_connection(self, *args: Any, **kwargs: Any) -> Any:
        return self._connect_bounded(lambda: _connect_creating_database(*args, **kwargs))

    def _abort_connection(self, driver_connection: Any) -> None:
        writer = getattr(driver_connection, "_writer", None)
        if writer is not None:
            writer.transport.abort()

    def _server_address(self) -> str:
        return self.target.address

    @property
    def _schema_lock_timeout(self) -> int:
        """Seconds GET_LOCK waits for another process creating the tables:
        within the call's own timeout, so the server says why."""
        return max(1, int(self.timeout * 0.8))

    # -- schema ----------------------------------------------------------

    async def _create_schema(self) -> None:
        # DDL commits implicitly in MySQL, so the processes racing to create
        # the tables are serialised by a named (session) lock instead.
        lock_name = (
            "memchat:"
            + hashlib.sha1(
                f"{self.target.database}\0{self.table.name}".encode(), usedforsecurity=False
            ).hexdigest()
        )
        async with self.engine.connect() as conn:
            self.collation = await self._exact_collation(conn)
            for table in self.metadata.sorted_tables:
                table.dialect_kwargs["mysql_collate"] = self.collation
            got = (
                await conn.execute(
                    sa.text("SELECT GET_LOCK(:name, :timeout)"),
                    {"name": lock_name, "timeout": self._schema_lock_timeout},
                )
            ).scalar()
            if got != 1:
                raise BackendError(
                    f"{self.name} backend at {self.location}: another process held the table-creation "
                    f"lock for {self._schema_lock_timeout} s; try again, raise --timeout, or create "
                    f"`{self.table.name}` by hand"
                )
            try:
                await self._create_tables(conn)  # DDL: commits by itself
                await conn.commit()
            finally:
                await conn.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": lock_name})

    @staticmethod
    async def _exact_collation(conn: AsyncConnection) -> str:
        rows = await conn.execute(
            sa.text("SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN :names")
            .bindparams(sa.bindparam("names", expanding=True))
            .columns(COLLATION_NAME=sa.String),
            {"names": list(EXACT_COLLATIONS)},
        )
        have = {r[0] for r in rows}
        return next((c for c in EXACT_COLLATIONS if c in have), "utf8mb4_bin")

    # -- hooks -----------------------------------------------------------

    async def _begin_user(self, conn: AsyncConnection, key: UserKey) -> None:
        # The first statement of the transaction: takes (and creates on first
        # use) the user's lock row, held until COMMIT/ROLLBACK.
        stmt = mysql_insert(self.locks).values(app_name=key.app, user_id=key.user)
        await conn.execute(stmt.on_duplicate_key_update(user_id=self.locks.c.user_id))

    def _blob_type(self) -> sa.types.TypeEngine:
        return Float32Blob()

    def _drop_embedding_column(self, table: str) -> str:
        # FORCE rebuilds the table: InnoDB drops a column instantly, leaving its bytes in every row.
        return f"ALTER TABLE {table} DROP COLUMN embedding, FORCE"

    def _upsert_into(self, table: sa.Table, row: dict[str, Any], keys: Sequence[str]) -> sa.Executable:
        stmt = mysql_insert(table).values(**row)
        return stmt.on_duplicate_key_update({k: stmt.inserted[k] for k in row if k not in keys})

    def _is_retryable(self, exc: BaseException) -> bool:
        return _error_code(exc) == DEADLOCK

    def _is_connection_lost(self, exc: BaseException) -> bool:
        code = _error_code(exc)
        return super()._is_connection_lost(exc) or code in CANNOT_CONNECT or code in CONNECTION_LOST

    def _explain(self, exc: BaseException) -> str:
        code = _error_code(exc)
        t = self.target
        if code in CANNOT_CONNECT or (code is None and isinstance(getattr(exc, "orig", exc), OSError)):
            return (
                f"cannot connect to the server at {t.address} (it is down or unreachable): start it, "
                f"or set {self._setting('HOST', 'PORT')} to a running MySQL/MariaDB"
            )
        if code == ACCESS_DENIED:
            return (
                f"access denied for user {t.user!r}: the password is wrong or the user does not exist; "
                f"set {self._setting('USER', 'PASSWORD')} to a valid account"
            )
        if code == UNKNOWN_DATABASE:
            return (
                f"database {t.database} does not exist: create it "
                f"(CREATE DATABASE `{t.database}` CHARACTER SET utf8mb4) or set {self._setting('DATABASE')}"
            )
        if code == DB_ACCESS_DENIED:
            # MySQL answers this, not 1049, when the user may not see whether it exists.
            return (
                f"permission denied: user {t.user!r} may not use database {t.database} (or it does not "
                f"exist); create it and grant it (GRANT ALL ON `{t.database}`.* TO '{t.user}'), "
                f"or set {self._setting('USER', 'DATABASE')} to an account and database that work"
            )
        if code in (TABLE_ACCESS_DENIED, COLUMN_ACCESS_DENIED):
            return (
                f"permission denied: {_server_message(exc).rstrip('.')}; grant user {t.user!r} "
                f"SELECT, INSERT, UPDATE, DELETE, CREATE and INDEX on `{t.database}`.* or use another account"
            )
        if code in CONNECTION_LOST:
            return (
                f"the connection to {t.address} was lost (the server went away or restarted); "
                "the next call reconnects once the server is back"
            )
        if code == LOCK_WAIT_TIMEOUT:
            return (
                f"another writer of this user held its lock for more than {self.timeout:g} s: "
                "try again, or raise --timeout"
            )
        return _server_message(exc) if code is not None else super()._explain(exc)
