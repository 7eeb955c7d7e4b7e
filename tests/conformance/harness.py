"""How the conformance suite reaches each backend.

A harness gives every test its own empty namespace on a backend (a fresh
file, database table, key prefix…) and can build any number of store objects
on that same namespace, in this process or from a picklable spec in another.
Adding a backend to the suite = adding one harness here; the tests stay as
they are.
"""

from __future__ import annotations

import atexit
import importlib
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends import create
from backends.base import Store

#: Every name this session hands out on a shared server starts with this: the
#: process ID lets a later session on the same machine tell the leftovers of a
#: killed session (its process gone) from those of one still running.
SESSION_TAG = f"{os.getpid()}_"


def _session_alive(tag: str) -> bool:
    """Whether the test session that handed out names tagged ``tag`` still runs."""
    try:
        os.kill(int(tag), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


@dataclass
class Harness:
    name: str
    #: Options for ``backends.create`` naming this test's namespace.
    options: dict[str, Any] = field(default_factory=dict)
    #: Stores without shared storage (inmemory) hand out one instance.
    shared_instance: Store | None = None

    def make_store(self) -> Store:
        if self.shared_instance is not None:
            return self.shared_instance
        return create(self.name, **self.options)

    def spec(self) -> tuple[str, dict[str, Any]]:
        """Picklable recipe another OS process can pass to ``create``."""
        return self.name, dict(self.options)


def _inmemory(tmp_path: Path) -> Harness:
    return Harness("inmemory", shared_instance=create("inmemory"))


def _sqlite(tmp_path: Path) -> Harness:
    return Harness("sqlite", {"dsn": f"sqlite:///{tmp_path / f'mem-{uuid.uuid4().hex[:8]}.db'}"})


#: (url, key prefix) of every Redis namespace handed out; deleted at the session's end.
_REDIS_NAMESPACES: list[tuple[str, str]] = []


def _redis(tmp_path: Path) -> Harness:

    from tests.support import require

    try:
        from backends.redis import mask_url
    except ImportError:
        require(False, "the redis package is not installed: pip install 'memchat[redis]'")
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    require(_redis_reachable(url), f"Redis is not reachable at {mask_url(url)}: start it or set REDIS_URL")
    if url not in _SWEPT:
        _SWEPT.add(url)
        _redis_sweep(url)
    prefix = f"memchat-test:{SESSION_TAG}{uuid.uuid4().hex[:16]}:"
    _REDIS_NAMESPACES.append((url, prefix))
    return Harness("redis", {"url": url, "key_prefix": prefix})


def _redis_reachable(url: str) -> bool:
    import redis

    try:
        with redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as client:
            return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


#: Servers whose leftovers from killed sessions this session has deleted.
_SWEPT: set[str] = set()
_LEFTOVER = re.compile(r"memchat[-_]test[:_](\d+)_")


def _leftover(name: str) -> bool:
    """Whether ``name`` was handed out by a test session that has ended without
    cleaning up (killed: its process is gone)."""
    match = _LEFTOVER.match(name)
    return match is not None and not _session_alive(match.group(1))


def _redis_sweep(url: str) -> None:
    """Delete the keys killed test sessions left on this (loopback) server."""
    import redis

    from memchat.net import is_loopback

    try:
        with redis.Redis.from_url(url, decode_responses=True, socket_timeout=2) as client:
            if not is_loopback(client.connection_pool.connection_kwargs.get("host", "")):
                return
            keys = [k for k in client.scan_iter(match="memchat-test:*", count=1000) if _leftover(k)]
            for i in range(0, len(keys), 500):
                client.delete(*keys[i : i + 500])
    except (redis.RedisError, OSError):
        pass


def _redis_cleanup() -> None:
    """Delete the keys of every namespace this process handed out."""
    import redis

    for url in {u for u, _ in _REDIS_NAMESPACES}:
        prefixes = tuple(p for u, p in _REDIS_NAMESPACES if u == url)
        try:
            with redis.Redis.from_url(url, decode_responses=True, socket_timeout=2) as client:
                found = client.scan_iter(match="memchat-test:*", count=1000)
                keys = [k for k in found if k.startswith(prefixes)]
                for i in range(0, len(keys), 500):
                    client.delete(*keys[i : i + 500])
        except (redis.RedisError, OSError):
            pass


#: (backend, DSN, table) of every SQL-server table handed out; dropped at the session's end.
_SQL_TABLES: list[tuple[str, str, str]] = []
_SQL_REACHABLE: dict[tuple[str, str], str | None] = {}


def _mysql(tmp_path: Path) -> Harness:
    return _sql_server("mysql", "MEMCHAT_TEST_MYSQL_DSN", "mysql://root@127.0.0.1:3306/test", "MariaDB")


def _mysqlvec(tmp_path: Path) -> Harness:
    """mysqlvec on the same test server as mysql (BLOB vectors on MariaDB < 11.7)."""
    return _sql_server("mysqlvec", "MEMCHAT_TEST_MYSQL_DSN", "mysql://root@127.0.0.1:3306/test", "MariaDB")


def _sqlitevec(tmp_path: Path) -> Harness:
    from tests.support import require

    problem = _import_problem("sqlitevec")
    if problem is None:
        try:
            from backends.sqlitevec import extension_sqlite

            extension_sqlite()
        except Exception as exc:
            problem = str(exc)
    require(problem is None, problem or "")
    return Harness("sqlitevec", {"dsn": f"sqlite:///{tmp_path / f'vec-{uuid.uuid4().hex[:8]}.db'}"})


def _postgres(tmp_path: Path) -> Harness:
    return _sql_server(
        "postgres", "MEMCHAT_TEST_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/test", "PostgreSQL"
    )


def _sql_server(name: str, env: str, default: str, product: str) -> Harness:
    """A uniquely named table on the test database of a running server."""

    from tests.support import require

    dsn = os.environ.get(env) or default
    if (name, dsn) not in _SQL_REACHABLE:
        _SQL_REACHABLE[name, dsn] = _sql_unreachable(name, dsn, product, env)
    problem = _SQL_REACHABLE[name, dsn]
    require(problem is None, problem or "")
    if (sweep := f"{name} {dsn}") not in _SWEPT:
        _SWEPT.add(sweep)
        _sql_sweep(name, dsn)
    table = f"memchat_test_{SESSION_TAG}{uuid.uuid4().hex[:16]}"
    _SQL_TABLES.append((name, dsn, table))
    return Harness(name, {"dsn": dsn, "table": table})


def _sql_unreachable(name: str, dsn: str, product: str, env: str) -> str | None:
    """None if the server answers, else why not (the password masked)."""
    from backends import store_class

    try:
        module = importlib.import_module(store_class(name).__module__)
    except Exception as exc:  # the driver is not installed
        return str(exc)
    target = module.parse_dsn(dsn, env)
    try:
        _sql_connect(name, target).close()
    except Exception:
        return f"{product} is not reachable at {target.location()}: start it or set {env}"
    return None


def _sql_sweep(name: str, dsn: str) -> None:
    """Drop the tables killed test sessions left in this (loopback) server's
    test database: thousands of them slowed every later session's DDL."""
    from backends import store_class
    from memchat.net import is_loopback

    try:
        module = importlib.import_module(store_class(name).__module__)
        target = module.parse_dsn(dsn)
        conn = _sql_connect(name, target)
    except Exception:
        return
    try:
        with conn.cursor() as cur:
            mysql = name in ("mysql", "mysqlvec")
            host = target.connect_args().get("host", "") if mysql else target.params.get("host", "")
            if not is_loopback(host or "localhost"):
                return
            if mysql:
                cur.execute("SET SESSION lock_wait_timeout = 5")
                cur.execute("SHOW TABLES LIKE 'memchat\\_test\\_%'")
            else:
                cur.execute("SET lock_timeout = '5s'")
                cur.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                    " AND tablename LIKE 'memchat\\_test\\_%'"
                )
            stale = [row[0] for row in cur.fetchall() if _leftover(row[0])]
            quote = "`" if mysql else '"'
            for i in range(0, len(stale), 200):
                names = ", ".join(f"{quote}{t}{quote}" for t in stale[i : i + 200])
                cur.execute(f"DROP TABLE IF EXISTS {names}")
            for tag in {_LEFTOVER.match(t).group(1) for t in stale}:  # type: ignore[union-attr]
                cur.execute("DELETE FROM memchat_meta WHERE name LIKE %s", (f"memchat_test_{tag}_%",))
        conn.commit()
    except Exception:
        pass
    finally:
        conn.close()


def _sql_connect(name: str, target: Any) -> Any:
    if name in ("mysql", "mysqlvec"):
        import pymysql

        args = {**target.connect_args(), "connect_timeout": 3}
        args["database"] = args.pop("db")  # PyMySQL's name for aiomysql's "db"
        return pymysql.connect(**args)
    import psycopg

    return psycopg.connect(**{**target.params, "connect_timeout": 3}, autocommit=True)


def _sql_cleanup() -> None:
    """Drop every table this process handed out (best effort, bounded waits)."""
    import contextlib

    for name, dsn in {(n, d) for n, d, _ in _SQL_TABLES}:
        tables = [t for n, d, t in _SQL_TABLES if (n, d) == (name, dsn)]
        try:
            from backends import store_class

            module = importlib.import_module(store_class(name).__module__)
            conn = _sql_connect(name, module.parse_dsn(dsn))
            try:
                with conn.cursor() as cur:
                    # Each memories table has its vectors' and its keyword index's
                    # tables beside it (backends/sql.py, TABLE_SUFFIXES).
                    from backends.sql import TABLE_SUFFIXES as suffixes
                    from backends.sql import short_identifier

                    beside = [short_identifier(f"{t}{suffix}") for t in tables for suffix in suffixes]
                    if name in ("mysql", "mysqlvec"):
                        cur.execute("SET SESSION lock_wait_timeout = 5")
                        locks = [module.lock_table_name(t) for t in tables]
                        names = ", ".join(f"`{t}`" for t in [*tables, *beside, *locks])
                    else:
                        cur.execute("SET lock_timeout = '5s'")
                        names = ", ".join(f'"{t}"' for t in [*tables, *beside])
                    cur.execute(f"DROP TABLE IF EXISTS {names}")
                    # Their records in the shared memchat_meta table (name = "<table>:<record>").
                    with contextlib.suppress(Exception):
                        for t in tables:
                            cur.execute("DELETE FROM memchat_meta WHERE name LIKE %s", (f"{t}:%",))
                conn.commit()
            finally:
                conn.close()
        except Exception:
            pass


def _import_problem(name: str) -> str | None:
    """None if the backend's module (and so its driver) imports, else why not."""
    from backends import store_class

    try:
        store_class(name)
    except Exception as exc:
        return str(exc)
    return None


def _pgvector(tmp_path: Path) -> Harness:
    """A uniquely named table on a PostgreSQL with pgvector: the one in
    MEMCHAT_TEST_PGVECTOR_DSN (tables dropped at the session's end), else a
    throwaway server started once for the session (tests/vector_servers.py)."""

    from tests.support import require
    from tests.vector_servers import ServerUnavailable, pgvector_dsn

    problem = _import_problem("pgvector")
    require(problem is None, problem or "")
    try:
        dsn = pgvector_dsn()
    except ServerUnavailable as exc:
        require(False, str(exc))
    table = f"memchat_test_{SESSION_TAG}{uuid.uuid4().hex[:16]}"
    if os.environ.get("MEMCHAT_TEST_PGVECTOR_DSN"):
        _SQL_TABLES.append(("pgvector", dsn, table))
    return Harness("pgvector", {"dsn": dsn, "table": table})


#: (url, collection) made on an external Chroma server; deleted at the session's end.
_CHROMA_COLLECTIONS: list[tuple[str, str]] = []


def _chromadb(tmp_path: Path) -> Harness:
    """A uniquely named collection on a Chroma server: MEMCHAT_TEST_CHROMA_URL
    (collections deleted at the session's end), else a throwaway ``chroma run``
    started once for the session (tests/vector_servers.py)."""

    from tests.support import require
    from tests.vector_servers import ServerUnavailable, chroma_url

    problem = _import_problem("chromadb")
    require(problem is None, problem or "")
    try:
        url = chroma_url()
    except ServerUnavailable as exc:
        require(False, str(exc))
    collection = f"memchat-test-{uuid.uuid4().hex[:16]}"
    if os.environ.get("MEMCHAT_TEST_CHROMA_URL"):
        _CHROMA_COLLECTIONS.append((url, collection))
    return Harness("chromadb", {"url": url, "collection": collection})


def _chroma_cleanup() -> None:
    """Delete every collection this process made on an external server (best effort)."""
    import contextlib

    try:
        import chromadb
        from chromadb.config import Settings

        for url in {u for u, _ in _CHROMA_COLLECTIONS}:
            client = chromadb.HttpClient(host=url, settings=Settings(anonymized_telemetry=False))
            for u, name in _CHROMA_COLLECTIONS:
                if u == url:
                    with contextlib.suppress(Exception):
                        client.delete_collection(name)
    except Exception:
        pass


def cleanup_namespaces() -> None:
    """Delete every namespace this session handed out on a shared server
    (the session's end: the fixture in tests/conftest.py calls it; a program
    outside pytest, such as a benchmark, at its exit: registered below)."""
    if _REDIS_NAMESPACES:
        _redis_cleanup()
    if _SQL_TABLES:
        _sql_cleanup()
    if _CHROMA_COLLECTIONS:
        _chroma_cleanup()
    _REDIS_NAMESPACES.clear()
    _SQL_TABLES.clear()
    _CHROMA_COLLECTIONS.clear()


# The benchmarks reach the servers through these harnesses too, and used to
# leave their tables and keys behind (a stray table set in a CI run was one).
# Only in the process that imported this: a forked child inherits the lists.
_OWNER = os.getpid()
atexit.register(lambda: cleanup_namespaces() if os.getpid() == _OWNER else None)

#: name → builder of a fresh harness. Order is the order tests run in.
HARNESSES: dict[str, Callable[[Path], Harness]] = {
    "inmemory": _inmemory,
    "sqlite": _sqlite,
    "sqlitevec": _sqlitevec,
    "redis": _redis,
    "mysql": _mysql,
    "mysqlvec": _mysqlvec,
    "postgres": _postgres,
    "pgvector": _pgvector,
    "chromadb": _chromadb,
}


def multi_process_names() -> list[str]:
    """Backends whose store declares that several processes may share it."""
    from backends import store_class

    return [n for n in HARNESSES if store_class(n).capabilities.multi_process]
