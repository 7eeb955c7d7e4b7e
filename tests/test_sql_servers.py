"""What is specific to the MySQL/MariaDB and PostgreSQL stores: DSNs and the
environment, password masking, table names, utf8mb4 and exact user ids,
hostile strings, one clear error per failure, and surviving a server restart.

The behaviour every backend shares is in tests/conformance. Tests that need
a server use the machine's (as the conformance harness does) or start a
private one: MariaDB from ``mariadb-install-db``/``mariadbd``, PostgreSQL
from ``initdb``/``pg_ctl`` (run as the ``postgres`` OS user), each on a free
port in a temporary folder, stopped when the session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from backends import create
from backends.mysql import MySQLTarget, lock_table_name
from backends.mysql import parse_dsn as parse_mysql_dsn
from backends.postgres import parse_dsn as parse_pg_dsn
from memchat.engine import BackendError, ConfigError, MemoryLimitError, MemoryService, SearchOptions, UserKey
from tests.conformance.harness import HARNESSES
from tests.support import require

KEY = UserKey("memory-chat", "user")
SERVERS = ["mysql", "postgres"]
SECRET = "s3cr3t-P@ss:w/rd"
MARIADB_BINARIES = ("/usr/bin/mariadb-install-db", "/usr/sbin/mariadbd")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
START_TIMEOUT_S = 60


# -- DSNs and the environment -------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("mysql://bob:pw@db.example:3307/mem", MySQLTarget("db.example", 3307, "bob", "pw", "mem")),
        ("mysql://root@127.0.0.1/test", MySQLTarget("127.0.0.1", 3306, "root", "", "test")),
        ("mariadb://u:p%40ss%2Fx@h:1/d?charset=utf8mb4", MySQLTarget("h", 1, "u", "p@ss/x", "d")),
        ("mysql+aiomysql://u@[::1]:3306/d", MySQLTarget("::1", 3306, "u", "", "d")),
        (
            "mysql://u:p@localhost/d?unix_socket=/run/mysqld/mysqld.sock",
            MySQLTarget("localhost", 3306, "u", "p", "d", "/run/mysqld/mysqld.sock"),
        ),
        (
            "root:pw@tcp(127.0.0.1:3306)/trpc_agent_go?parseTime=true&charset=utf8mb4",
            MySQLTarget("127.0.0.1", 3306, "root", "pw", "trpc_agent_go"),
        ),
        ("user:p@ss:wo)rd@tcp(db:3310)/mem", MySQLTarget("db", 3310, "user", "p@ss:wo)rd", "mem")),
        ("user@tcp(db)/mem", MySQLTarget("db", 3306, "user", "", "mem")),
        ("u:p@/mem", MySQLTarget("127.0.0.1", 3306, "u", "p", "mem")),
        ("u:p@tcp([::1]:3307)/mem", MySQLTarget("::1", 3307, "u", "p", "mem")),
        ("u:p@unix(/tmp/my.sock)/mem?parseTime=true", MySQLTarget(user="u", password="p", database="mem",
                                                                  unix_socket="/tmp/my.sock")),
    ],
)  # fmt: skip
def test_mysql_dsn_spellings(dsn: str, expected: MySQLTarget) -> None:
    assert parse_mysql_dsn(dsn) == expected


@pytest.mark.parametrize(
    ("dsn", "problem"),
    [
        ("   ", "is empty"),
        ("root:pw@tcp(127.0.0.1:3306)", "'/' before the database name is missing"),
        ("root:pw@tcp(127.0.0.1:3306/db", "unreadable address"),
        ("root:pw@pipe(x)/db", "network 'pipe'"),
        ("root:pw@tcp(h:99999)/db", "invalid port"),
        ("mysql://root:pw@h:notaport/db", "not a valid URL"),
        ("postgres://root:pw@h/db", "scheme 'postgres'"),
        ("mysql://root:pw@h:3306", "names no database"),
        ("root:pw@tcp(h:3306)/", "names no database"),
    ],
)
def test_a_malformed_mysql_dsn_is_a_config_error_without_the_password(dsn: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="MYSQL_DSN") as info:
        create("mysql", env={"MYSQL_DSN": dsn})
    assert problem in str(info.value)
    assert "pw" not in str(info.value).replace("MYSQL_DSN", "")


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgres://bob:pw@db:5433/mem", {"user": "bob", "password": "pw", "host": "db", "port": "5433",
                                           "dbname": "mem"}),
        ("postgresql://root@127.0.0.1/test?sslmode=require&application_name=memchat",
         {"user": "root", "host": "127.0.0.1", "dbname": "test", "sslmode": "require",
          "application_name": "memchat"}),
        ("postgresql://u:p%20w%40x@h/d%2Dx",
         {"user": "u", "password": "p w@x", "host": "h", "dbname": "d-x"}),
        ("postgresql://h1:5432,h2:5433/d", {"host": "h1,h2", "port": "5432,5433", "dbname": "d"}),
        ("postgresql://[::1]:6000/d", {"host": "::1", "port": "6000", "dbname": "d"}),
        ("postgresql:///d?host=/var/run/postgresql", {"dbname": "d", "host": "/var/run/postgresql"}),
        ("host=db port=5433 dbname=mem user=bob password=pw sslmode=disable",
         {"host": "db", "port": "5433", "dbname": "mem", "user": "bob", "password": "pw",
          "sslmode": "disable"}),
        ("host = db   dbname='my db' password='it\\'s a \\\\ secret'",
         {"host": "db", "dbname": "my db", "password": "it's a \\ secret"}),
        ("dbname=x password=", {"dbname": "x", "password": ""}),
    ],
)  # fmt: skip
def test_postgres_dsn_spellings(dsn: str, expected: dict[str, str]) -> None:
    assert parse_pg_dsn(dsn).params == expected


@pytest.mark.parametrize(
    ("dsn", "problem"),
    [
        ("  ", "is empty"),
        ("just-a-host", "neither a postgres:// URL nor a libpq string"),
        ("mysql://u:pw@h/d", "scheme 'mysql'"),
        ("host=h password='pw", "unterminated quoted value"),
        ("host=h =pw", "expected key=value"),
        ("host=h colour=blue password=pw", "unknown option 'colour'"),
        ("postgresql://u:pw@h/d?nonsense=1", "unknown option 'nonsense'"),
        ("postgresql://u:pw@h:54x/d", "invalid port"),
        ("host=h port=0 password=pw", "invalid port"),
        # libpq's own message would quote the password here.
        ("postgresql://u:pw%zz@h/d", "not a valid PostgreSQL DSN"),
        ("postgresql://u:pw x@h/d", "not a valid PostgreSQL DSN"),
        ("host=h password=pw stray", "expected key=value"),
    ],
)
def test_a_malformed_postgres_dsn_is_a_config_error_without_the_password(dsn: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="POSTGRES_DSN") as info:
        create("postgres", env={"POSTGRES_DSN": dsn})
    assert problem in str(info.value)
    assert "pw" not in str(info.value).replace("POSTGRES_DSN", "")


@pytest.mark.parametrize(
    ("options", "source"),
    [
        ({"dsn": "postgresql://u:pw@h/d?sslmode=bogus"}, "the PostgreSQL DSN"),
        ({"dsn": "host=h sslmode=REQUIRE password=pw"}, "the PostgreSQL DSN"),
        ({"env": {"POSTGRES_DSN": "host=h sslmode=on"}}, "POSTGRES_DSN"),
        ({"env": {"PG_SSLMODE": "bogus", "PG_PASSWORD": "pw"}}, "PG_SSLMODE"),
    ],
)
def test_an_invalid_sslmode_is_a_config_error_naming_the_valid_ones(options, source) -> None:
    with pytest.raises(ConfigError) as info:
        create("postgres", **options)
    message = str(info.value)
    assert message.startswith(f"{source} has an invalid sslmode ")
    assert message.endswith("use one of disable, allow, prefer, require, verify-ca, verify-full")
    assert "pw" not in message.replace("PG_", "")


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"])
def test_every_libpq_sslmode_is_accepted(mode: str) -> None:
    assert create("postgres", dsn=f"postgresql://h/d?sslmode={mode}").target.params["sslmode"] == mode
    assert create("postgres", env={"PG_SSLMODE": mode}).target.params["sslmode"] == mode


async def test_sslmode_require_against_a_server_without_ssl_gives_the_servers_reason(tmp_path: Path) -> None:
    options = HARNESSES["postgres"](tmp_path).options
    password = "not-the-real-" + SECRET
    target = parse_pg_dsn(options["dsn"])
    dsn = (
        f"host={target.params.get('host', '127.0.0.1')} port={target.params.get('port', '5432')} "
        f"dbname={target.database} user={target.user} password='{password}' sslmode=require"
    )
    if await _ssl_is_offered(target.params):
        pytest.skip("this PostgreSQL offers SSL: nothing to show")
    message = await _failure(create("postgres", dsn=dsn, table=options["table"]))
    assert "was lost" not in message and password not in message
    assert message.endswith(
        "does not support SSL, but sslmode=require requires it: set the sslmode in the DSN to disable "
        "or prefer, or enable SSL on the server"
    ), message


async def _ssl_is_offered(params: dict[str, str]) -> bool:
    import psycopg

    def probe() -> bool:
        try:
            with psycopg.connect(**{**params, "sslmode": "require"}, connect_timeout=5):
                return True
        except psycopg.OperationalError as exc:
            if "does not support SSL" in str(exc):
                return False
            pytest.skip(f"PostgreSQL is not reachable: {exc}")
            raise

    return await asyncio.to_thread(probe)


@pytest.mark.parametrize(
    "dsn",
    [
        "root:pw@tcp(db:3306)/mem?tls=true",
        "root:pw@tcp(db:3306)/mem?tls=skip-verify",
        "mysql://root:pw@db/mem?ssl-mode=REQUIRED",
        "mysql://root:pw@db/mem?ssl_ca=/etc/ca.pem",
    ],
)
def test_a_mysql_tls_option_is_refused_rather_than_ignored(dsn: str) -> None:
    with pytest.raises(
        ConfigError, match=r"asks for TLS .* which the MySQL backends do not support yet"
    ) as info:
        create("mysql", env={"MYSQL_DSN": dsn})
    assert "pw" not in str(info.value).replace("MYSQL_DSN", "")
    for off in ("root:pw@tcp(db:3306)/mem?tls=false", "mysql://root:pw@db/mem?ssl-mode=DISABLED"):
        create("mysql", env={"MYSQL_DSN": off})


def test_mysql_defaults_are_the_references_but_the_database_is_memchat() -> None:
    store = create("mysql", env={})
    assert store.target == MySQLTarget("localhost", 3306, "root", "", "memchat")
    assert store.describe() == "mysql (root@localhost:3306/memchat, table memories)"
    assert store.table.name == "memories" and store.locks.name == "memories_locks"


def test_mysql_fields_then_dsn_then_argument_take_priority() -> None:
    fields = {
        "MYSQL_HOST": "db",
        "MYSQL_PORT": "3310",
        "MYSQL_USER": "app",
        "MYSQL_PASSWORD": SECRET,
        "MYSQL_DATABASE": "mem",
    }
    assert create("mysql", env=fields).target == MySQLTarget("db", 3310, "app", SECRET, "mem")
    with_dsn = {**fields, "MYSQL_DSN": "other:pw2@tcp(dsnhost:3320)/dsndb?parseTime=true"}
    assert create("mysql", env=with_dsn).target == MySQLTarget("dsnhost", 3320, "other", "pw2", "dsndb")
    explicit = create("mysql", dsn="mysql://arg@arghost/argdb", env=with_dsn)
    assert explicit.target == MySQLTarget("arghost", 3306, "arg", "", "argdb")
    with pytest.raises(ConfigError, match="MYSQL_PORT has an invalid port 'x'"):
        create("mysql", env={"MYSQL_PORT": "x"})


def test_postgres_defaults_are_the_references_but_the_database_is_memchat() -> None:
    store = create("postgres", env={})
    assert store.target.params == {
        "host": "localhost",
        "port": "5432",
        "user": "postgres",
        "dbname": "memchat",
        "sslmode": "disable",
    }
    assert store.describe() == "postgres (postgres@localhost:5432/memchat, table memories)"


def test_postgres_fields_then_dsn_then_argument_take_priority() -> None:
    fields = {
        "PG_HOST": "db",
        "PG_PORT": "5433",
        "PG_USER": "app",
        "PG_PASSWORD": SECRET,
        "PG_DATABASE": "mem",
        "PG_SSLMODE": "require",
    }
    assert create("postgres", env=fields).target.params == {
        "host": "db",
        "port": "5433",
        "user": "app",
        "password": SECRET,
        "dbname": "mem",
        "sslmode": "require",
    }
    with_dsn = {**fields, "POSTGRES_DSN": "host=dsnhost dbname=dsndb user=other"}
    assert create("postgres", env=with_dsn).target.params == {
        "host": "dsnhost",
        "dbname": "dsndb",
        "user": "other",
    }
    explicit = create("postgres", dsn="postgres://arg@arghost/argdb", env=with_dsn)
    assert explicit.target.params == {"user": "arg", "host": "arghost", "dbname": "argdb"}
    with pytest.raises(ConfigError, match="PG_PORT has an invalid port"):
        create("postgres", env={"PG_PORT": "54321x"})


@pytest.mark.parametrize(("name", "driver"), [("mysql", "aiomysql"), ("postgres", "psycopg")])
def test_a_missing_driver_names_the_pip_install(name: str, driver: str) -> None:
    code = (
        f"import sys; sys.modules[{driver!r}] = None\n"
        "import backends\n"
        "from memchat.engine import ConfigError\n"
        "try:\n"
        f"    backends.create({name!r})\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        out.stdout.strip() == f"the {name} backend needs the {driver} package: pip install 'memchat[{name}]'"
    )


# -- passwords and table names ----------------------------------------------


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("mysql", {"dsn": f"mysql://app:{SECRET.replace('@', '%40').replace('/', '%2F')}@db:3306/mem"}),
        ("mysql", {"env": {"MYSQL_PASSWORD": SECRET}}),
        ("mysql", {"env": {"MYSQL_DSN": f"app:{SECRET}@tcp(db:3306)/mem"}}),
        ("postgres", {"dsn": f"host=db dbname=mem user=app password='{SECRET}'"}),
        ("postgres", {"env": {"PG_PASSWORD": SECRET}}),
    ],
)
def test_describe_masks_the_password(name: str, options: dict[str, Any]) -> None:
    store = create(name, **options)
    assert SECRET not in store.describe() and SECRET not in repr(store.engine.url)
    assert ":***@" in store.describe()


@pytest.mark.parametrize(("name", "limit"), [("mysql", 64), ("postgres", 63)])
def test_table_names_are_validated_as_the_reference_does(name: str, limit: int) -> None:
    create(name, table="t" * limit)
    for bad in ("t" * (limit + 1), "memories; DROP TABLE x", "1memories", "mem-ories", "memories\n", ""):
        with pytest.raises(ConfigError, match="invalid table name"):
            create(name, table=bad)


def test_postgres_schema_names_are_validated() -> None:
    with pytest.raises(ConfigError, match="invalid schema name"):
        create("postgres", schema='public"; DROP SCHEMA x; --')
    with pytest.raises(ConfigError, match="invalid schema name"):
        create("postgres", schema="s" * 64)


# -- against the machine's servers --------------------------------------------


@pytest.fixture(params=SERVERS)
def server_options(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """(backend, options) naming a fresh table on the machine's test database."""
    harness = HARNESSES[request.param](tmp_path)
    return harness.name, dict(harness.options)


async def test_utf8mb4_round_trips_and_user_ids_compare_exactly(server_options) -> None:
    name, options = server_options
    users = ["a", "a ", "A", " a", "ａ", "🙂", "🙂🙂", "张三", "張三"]
    apps = ["app", "App", "app "]
    async with MemoryService(create(name, **options), limit=0) as svc:
        for app in apps:
            for user in users:
                await svc.add(
                    UserKey(app, user), f"{app!r}/{user!r}: 𝄞 🎉👩‍👩‍👧 张三喜欢编程 ✓", topics=["🏷️", "中文"]
                )
        for app in apps:
            for user in users:
                [entry] = await svc.read(UserKey(app, user))
                assert entry.memory.text == f"{app!r}/{user!r}: 𝄞 🎉👩‍👩‍👧 张三喜欢编程 ✓"
                assert entry.memory.topics == ("🏷️", "中文")
                assert (entry.app, entry.user) == (app, user)
        assert await svc.clear(UserKey("app", "a")) == 1
        assert await svc.count(UserKey("app", "a ")) == 1 and await svc.count(UserKey("app", "A")) == 1


INJECTIONS = [
    "'; DROP TABLE memories; --",
    "\\'; DROP TABLE memories; --",
    "x' OR '1'='1",
    '" OR ""="',
    "`; DROP DATABASE test; --",
    "$$; DROP TABLE memories; $$",
    "%' OR user_id LIKE '%",
    "\\\\%\\_",
    "1; SELECT pg_sleep(10); --",
    "'); SELECT SLEEP(10); --",
]


async def test_injection_strings_are_stored_verbatim_and_isolated(server_options) -> None:
    name, options = server_options
    store = create(name, **options)
    async with MemoryService(store, limit=0, soft_delete=True) as svc:
        bystander = UserKey("memory-chat", "bystander")
        await svc.add(bystander, "an innocent memory")
        for i, evil in enumerate(INJECTIONS):
            key = UserKey(f"app {evil}", evil)
            entry = await svc.add(key, evil, topics=[evil, f"topic {i}"])
            [stored] = await svc.read(key)
            assert stored.memory.text == evil and stored.memory.topics == (evil, f"topic {i}")
            assert (stored.app, stored.user) == (f"app {evil}", evil)
            assert [e.id for e in await svc.read(key, include_deleted=True)] == [entry.id]
            await svc.delete(key, entry.id)
            assert await svc.read(key) == []
        assert [e.memory.text for e in await svc.read(bystander)] == ["an innocent memory"]
        assert await svc.count(UserKey("memory-chat", "%")) == 0
        assert await svc.count(UserKey("%", "%")) == 0


async def test_the_limit_holds_for_concurrent_writers_with_separate_pools(server_options) -> None:
    """The limit check and the insert are one transaction under the user's lock
    (the reference checks, then inserts, and races)."""
    name, options = server_options
    services = [MemoryService(create(name, **options), limit=5) for _ in range(3)]
    try:
        for svc in services:  # open, and fill each pool, before the race starts
            await svc.open()
            await asyncio.gather(*(svc.count(KEY) for _ in range(10)))

        async def add(svc: MemoryService, i: int) -> bool:
            try:
                await svc.add(KEY, f"racing fact {i}")
                return True
            except MemoryLimitError:
                return False

        for rnd in range(3):
            await services[0].clear(KEY)
            results = await asyncio.gather(*(add(services[i % 3], 100 * rnd + i) for i in range(30)))
            assert sum(results) == 5
            assert await services[0].count(KEY) == 5
    finally:
        for svc in services:
            await svc.close()


async def test_long_table_names_work_on_the_server(server_options) -> None:
    name, options = server_options
    limit = 64 if name == "mysql" else 63
    table = (options["table"] + "_" + "x" * 64)[:limit]
    store = create(name, **{**options, "table": table})
    try:
        async with MemoryService(store) as svc:
            await svc.add(KEY, "a memory in a table with a maximal name")
            assert await svc.count(KEY) == 1
    finally:
        await _drop_tables(name, options["dsn"], [table])


async def test_postgres_tables_can_live_in_their_own_schema(tmp_path: Path) -> None:
    options = HARNESSES["postgres"](tmp_path).options
    schema = f"memchat_s_{uuid.uuid4().hex[:8]}"
    try:
        store = create("postgres", schema=schema, **options)
        assert store.describe().endswith(f"table {schema}.{options['table']})")
        async with MemoryService(store) as svc:
            await svc.add(KEY, "in a schema")
        async with MemoryService(create("postgres", schema=schema, **options)) as svc:
            assert [e.memory.text for e in await svc.read(KEY)] == ["in a schema"]
        async with MemoryService(create("postgres", **options)) as svc:
            assert await svc.read(KEY) == []  # the default schema has its own table
    finally:
        await _drop_tables("postgres", options["dsn"], [f"{schema}.{options['table']}"], schema=schema)


async def test_postgres_plans_each_query_for_the_table_as_it_is_now(tmp_path: Path) -> None:
    """The server keeps no prepared plan of memchat's queries: one kept from when the
    table was empty (a sequential scan) served every later lookup by key as the table
    grew, wherever nothing analyzed it (autovacuum off): a 100k fill took over 30 min."""
    options = HARNESSES["postgres"](tmp_path).options
    store = create("postgres", **options)
    async with MemoryService(store) as svc:
        added = await svc.add(KEY, "a memory looked up by key again and again")
        t = store.table
        lookup = sa.select(t.c.memory).where(t.c.memory_id == added.id)
        async with store.engine.connect() as conn:
            for _ in range(8):  # psycopg prepares a query on its fifth run unless told not to
                assert (await conn.execute(lookup)).scalar() == added.memory.text
            held = (await conn.execute(sa.text("SELECT count(*) FROM pg_prepared_statements"))).scalar()
        assert held == 0


async def test_postgres_analyzes_its_tables_as_they_grow(tmp_path: Path, monkeypatch) -> None:
    """Without planner statistics (a server with autovacuum off) PostgreSQL reads a
    lookup of a few memories by ID as a scan of every memory of the user (111 ms at
    100k, 0.06 ms once analyzed): the store analyzes its tables when it opens them
    unanalyzed with rows in them, and whenever it has written a tenth of them
    (ANALYZE_AFTER at least), beside the writes."""
    from backends import postgres

    monkeypatch.setattr(postgres, "ANALYZE_AFTER", 30)
    options = HARNESSES["postgres"](tmp_path).options
    store = create("postgres", **options)

    async with MemoryService(store) as svc:
        # An empty table is not analyzed on open: there is nothing to learn (-1: never analyzed).
        assert await store._planner_rows() == -1
        for i in range(10):
            await svc.add(KEY, f"memory number {i} of a growing table")
        await store._analysis_done()
        assert await store._planner_rows() == -1  # ten rows written: not yet
        entry = (await svc.read(KEY, 1))[0]

        async def many(tx: Any) -> None:
            await tx.get(entry.id)  # reads are not writes
            for i in range(40):
                await tx.put(replace(entry, id=f"{i:064x}"))

        await store.atomic(KEY, many)
        await store._analysis_done()
        assert await store._planner_rows() == 50
        # Reads alone never trigger an analysis.
        for _ in range(40):
            await svc.read(KEY, 5)
        await store._analysis_done()
        assert store._analysis is None and await store._planner_rows() == 50

    # A table filled by a process that never analyzed it is analyzed on open.
    monkeypatch.setattr(postgres, "ANALYZE_AFTER", 10**9)
    options = {**options, "table": f"{options['table']}_unanalyzed"}
    try:
        filler = create("postgres", **options)
        async with MemoryService(filler) as svc:
            for i in range(12):
                await svc.add(KEY, f"memory number {i} of a table nobody analyzed")
            assert await filler._planner_rows() == -1
        reopened = create("postgres", **options)
        async with MemoryService(reopened):
            assert await reopened._planner_rows() == 12
    finally:
        await _drop_tables("postgres", options["dsn"], [options["table"]])


async def test_postgres_reads_a_terms_postings_from_its_key_index(tmp_path: Path, monkeypatch) -> None:
    """A term's postings sit on as many heap pages as it has holders (the heap is in
    write order: a common term's 40k postings on 27k pages, 160 ms). So the counts
    ride in the postings' key index (INCLUDE), and the store vacuums as it grows, so the pages are
    marked visible to all and the read stays in the index (15 ms) even where
    autovacuum is off."""
    from backends import postgres

    monkeypatch.setattr(postgres, "ANALYZE_AFTER", 30)
    options = HARNESSES["postgres"](tmp_path).options
    store = create("postgres", **options)
    postings = store.keyword_index.terms.name

    async def covered(s: Any) -> list[str]:
        async with s.engine.connect() as conn:
            found = await conn.execute(
                sa.text(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(:t) AND i.indisprimary "
                    "ORDER BY a.attname"
                ),
                {"t": postings},
            )
            return [row[0] for row in found]

    async def all_visible(s: Any) -> int:
        async with s.engine.connect() as conn:
            found = await conn.execute(
                sa.text("SELECT relallvisible FROM pg_class WHERE oid = to_regclass(:t)"), {"t": postings}
            )
            return int(found.scalar() or 0)

    counts = ["tf_content", "tf_topics", "content_length", "topic_length"]
    everything = sorted(["app_name", "user_id", "term", "doc", *counts])
    keyword = SearchOptions(mode="keyword")
    async with MemoryService(store) as svc:
        assert await covered(store) == everything
        for i in range(40):
            await svc.add(KEY, f"memory number {i} about the lake house and green tea")
        await store._analysis_done()
        assert await all_visible(store) > 0
        before = [(e.id, e.score) for e in await svc.search(KEY, "green tea", keyword)]
    reopened = create("postgres", **options)
    async with MemoryService(reopened) as svc:
        assert [(e.id, e.score) for e in await svc.search(KEY, "green tea", keyword)] == before
        assert len(before) == 10 and await svc.count(KEY) == 40


@pytest.fixture(params=[*SERVERS, "sqlite"])
def sql_options(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """(backend, options) of a fresh table on every SQL store: the servers and SQLite."""
    harness = HARNESSES[request.param](tmp_path)
    return harness.name, dict(harness.options)


@pytest.mark.parametrize("apart", [False, True], ids=["one-string", "three-strings"])
async def test_a_common_terms_postings_cross_in_one_aggregate_on_every_sql_store(sql_options, apart) -> None:
    """A common term's postings come back from the server as one row holding its
    joined postings (one string, or the docs and the two fields' counts as three:
    what each store uses, sql_index.py), not one row per holder, in either shape
    on every SQL store: the MariaDB session's GROUP_CONCAT cap is raised (its
    default 1 MB would cut 40k postings short, and MySQL's is 1 KB)."""
    from backends.sql_index import _unpack

    name, options = sql_options
    store = create(name, **options)
    index = store.keyword_index
    index.postings_apart = apart
    holders = 40_000
    async with MemoryService(store) as svc:
        await svc.add(KEY, "one memory so that the tables exist")
        rows = [
            {"app_name": KEY.app, "user_id": KEY.user, "term": "k:common", "doc": 10 + i * 7,
             "tf_content": 1 + i % 3, "tf_topics": i % 2,
             "content_length": 5 + i * 173 % 7_000_000, "topic_length": i % 4}
            for i in range(holders)
        ]  # fmt: skip
        async with store.engine.begin() as conn:
            await conn.execute(sa.insert(index.terms), rows)
        async with store.engine.connect() as conn:
            packed = (
                await conn.execute(
                    index._packed_postings(2),
                    {"app": KEY.app, "user": KEY.user, "term0": "k:common", "term1": "k:none"},
                )
            ).all()
        read = {int(row[0]): _unpack(row) for row in packed}
        assert read[1] is not None and len(read[1][0]) == 0 and read[1][1].shape == (0, 4)
        assert read[0] is not None
        docs, counts = read[0]
        got = dict(zip(docs.tolist(), counts.tolist(), strict=True))
        assert len(got) == holders
        assert all(
            got[r["doc"]] == [r["tf_content"], r["tf_topics"], r["content_length"], r["topic_length"]]
            for r in rows
        )


async def test_a_missing_database_is_created_when_the_account_may(server_options) -> None:
    """`--memory postgres|mysql` works on a fresh server: the database is created on first use."""
    name, options = server_options
    database = f"memchat_{uuid.uuid4().hex[:12]}"
    dsn = options["dsn"].rsplit("/", 1)[0] + "/" + database
    try:
        async with MemoryService(create(name, dsn=dsn, table=options["table"])) as svc:
            await svc.add(KEY, "stored in a database memchat created")
        async with MemoryService(create(name, dsn=dsn, table=options["table"])) as svc:
            assert [e.memory.text for e in await svc.read(KEY)] == ["stored in a database memchat created"]
        assert await asyncio.to_thread(_database_exists, name, options["dsn"], database)
    finally:
        await asyncio.to_thread(_drop_database, name, options["dsn"], database)
    assert not await asyncio.to_thread(_database_exists, name, options["dsn"], database)


def _database_exists(name: str, admin_dsn: str, database: str) -> bool:
    query = (
        "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s"
        if name == "mysql"
        else "SELECT 1 FROM pg_database WHERE datname = %s"
    )
    return bool(_admin_rows(name, admin_dsn, query, (database,)))


def _drop_database(name: str, admin_dsn: str, database: str) -> None:
    if name == "mysql":
        _admin("mysql", parse_mysql_dsn(admin_dsn), f"DROP DATABASE IF EXISTS `{database}`")
    else:
        _admin("postgres", parse_pg_dsn(admin_dsn), f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _admin_rows(name: str, admin_dsn: str, query: str, args: tuple[Any, ...]) -> list[Any]:
    if name == "mysql":
        import pymysql

        params = parse_mysql_dsn(admin_dsn).connect_args()
        params["database"] = params.pop("db")
        conn = pymysql.connect(**params)
        try:
            with conn.cursor() as cur:
                cur.execute(query, args)
                return list(cur.fetchall())
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(**parse_pg_dsn(admin_dsn).params, autocommit=True) as conn:
        return conn.execute(query, args).fetchall()


@pytest.mark.parametrize("name", SERVERS)
async def test_a_server_that_is_down_is_one_clear_error(name: str) -> None:
    port = _free_port()
    if name == "mysql":
        env = {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(port), "MYSQL_PASSWORD": SECRET}
        fix = "set MYSQL_HOST and MYSQL_PORT to a running MySQL/MariaDB"
    else:
        env = {"PG_HOST": "127.0.0.1", "PG_PORT": str(port), "PG_PASSWORD": SECRET}
        fix = "set PG_HOST and PG_PORT to a running PostgreSQL"
    started = time.monotonic()
    message = await _failure(create(name, env=env))
    assert time.monotonic() - started < 15
    assert f"{name} backend at " in message and f":***@127.0.0.1:{port}/" in message
    assert f"cannot connect to the server at 127.0.0.1:{port} (it is down or unreachable)" in message
    assert message.endswith(fix)


# -- private servers ----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(check, what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not come up within {timeout} s")


class MariaDB:
    """A private mariadbd on a free port (root without a password over TCP)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="memchat-mariadb-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        subprocess.run(
            [
                MARIADB_BINARIES[0],
                "--no-defaults",
                f"--datadir={self.data}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 (the server keeps it)
        self.proc = subprocess.Popen(
            [
                MARIADB_BINARIES[1],
                "--no-defaults",
                f"--datadir={self.data}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.dir / 's.sock'}",
                f"--pid-file={self.dir / 'server.pid'}",
                "--user=root",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=32M",
                "--skip-log-bin",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        _wait_for(self._ready, f"mariadbd on port {self.port}")

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"mariadbd exited: {(self.dir / 'server.log').read_text()[-2000:]}")
        try:
            self.sql("SELECT 1")
            return True
        except Exception:
            return False

    def sql(self, *statements: str) -> None:
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root", connect_timeout=2)
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
            conn.commit()
        finally:
            conn.close()

    def kill(self) -> None:
        """Crash it (SIGKILL): no clean shutdown, no goodbye to the clients."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


class Postgres:
    """A private PostgreSQL cluster on a free port, password (scram) auth."""

    password = "pg-" + SECRET

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="memchat-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        shutil.chown(self.dir, "postgres")
        shutil.chown(pwfile, "postgres")
        self._as_postgres(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "scram-sha-256",
            f"--pwfile={pwfile}",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )
        pwfile.unlink()

    def _as_postgres(self, *command: str, timeout: float = 120) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command], check=True, capture_output=True, timeout=timeout
        )

    def _pg_ctl(self, *args: str) -> None:
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
        self._pg_ctl(
            "-l", str(self.dir / "server.log"), "-w", "-t", str(START_TIMEOUT_S), "-o", options, "start"
        )

    def dsn(self, user: str = "postgres", password: str | None = None, dbname: str = "postgres") -> str:
        password = self.password if password is None else password
        return f"host=127.0.0.1 port={self.port} user={user} password='{password}' dbname={dbname}"

    def sql(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True, connect_timeout=5) as conn:
            for statement in statements:
                conn.execute(statement)

    def kill(self) -> None:
        """Crash it: immediate shutdown (SIGQUIT), no checkpoint, recovery on restart."""
        self._pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self._pg_ctl("-m", "fast", "-w", "-t", "30", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDB]:
    missing = [b for b in MARIADB_BINARIES if not os.access(b, os.X_OK)]
    require(not missing, f"MariaDB server binaries are not installed: {', '.join(missing)}")
    require(os.geteuid() == 0, "a private mariadbd is started as root (--user=root) in these tests")
    server = MariaDB()
    try:
        server.start()
        server.sql(
            "CREATE DATABASE memchat CHARACTER SET utf8mb4",
            f"CREATE USER 'pw_user'@'%' IDENTIFIED BY '{SECRET}'",
            "GRANT ALL ON memchat.* TO 'pw_user'@'%'",
            f"CREATE USER 'reader'@'%' IDENTIFIED BY '{SECRET}'",
            "GRANT SELECT ON memchat.* TO 'reader'@'%'",
            f"CREATE USER 'outsider'@'%' IDENTIFIED BY '{SECRET}'",
        )
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    missing = [str(PG_BIN / b) for b in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / b).exists()]
    require(not missing, f"PostgreSQL server binaries are not installed: {', '.join(missing)}")
    require(os.geteuid() == 0 and _has_user("postgres"), "a private cluster runs as the postgres OS user")
    server = Postgres()
    try:
        server.start()
        server.sql(
            "CREATE DATABASE memchat",
            f"CREATE ROLE pw_user LOGIN PASSWORD '{SECRET}'",
            "ALTER DATABASE memchat OWNER TO pw_user",
            f"CREATE ROLE reader LOGIN PASSWORD '{SECRET}'",
        )
        yield server
    finally:
        server.stop()


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _mysql_dsn(server: MariaDB, user: str = "pw_user", password: str = SECRET, db: str = "memchat") -> str:
    return f"{user}:{password}@tcp(127.0.0.1:{server.port})/{db}?parseTime=true&charset=utf8mb4"


async def _failure(store: Any) -> str:
    """The message of the BackendError a first call raises; checks its form."""
    svc = MemoryService(store)
    try:
        with pytest.raises(BackendError) as info:
            await svc.add(KEY, "anything")
    finally:
        await svc.close()
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert SECRET not in message
    return message


async def test_mysql_wrong_password(mariadb: MariaDB, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    message = await _failure(create("mysql", dsn=_mysql_dsn(mariadb, password="wrong-" + SECRET)))
    assert message == (
        f"mysql backend at pw_user:***@127.0.0.1:{mariadb.port}/memchat: connecting and creating the "
        "table failed: access denied for user 'pw_user': the password is wrong or the user does not "
        "exist; set the user and password in the DSN to a valid account"
    )
    assert SECRET not in caplog.text


async def test_mysql_permission_denied(mariadb: MariaDB) -> None:
    message = await _failure(create("mysql", dsn=_mysql_dsn(mariadb, user="reader")))
    assert "permission denied: CREATE command denied to user 'reader'" in message
    assert "grant user 'reader' SELECT, INSERT, UPDATE, DELETE, CREATE and INDEX on `memchat`.*" in message
    message = await _failure(create("mysql", dsn=_mysql_dsn(mariadb, user="outsider")))
    assert message.endswith(
        "permission denied: user 'outsider' may not use database memchat (or it does not exist); create "
        "it and grant it (GRANT ALL ON `memchat`.* TO 'outsider'), or set the user and database in the "
        "DSN to an account and database that work"
    )


async def test_mysql_missing_database_the_account_may_not_create(mariadb: MariaDB) -> None:
    # May use `nope` once it exists (so the server says "unknown database"), may not create it.
    mariadb.sql(
        f"CREATE USER IF NOT EXISTS 'no_create'@'%' IDENTIFIED BY '{SECRET}'",
        "GRANT SELECT ON nope.* TO 'no_create'@'%'",
    )
    message = await _failure(create("mysql", dsn=_mysql_dsn(mariadb, user="no_create", db="nope")))
    assert message == (
        f"mysql backend at no_create:***@127.0.0.1:{mariadb.port}/nope: connecting and creating the table "
        "failed: database nope does not exist: create it (CREATE DATABASE `nope` CHARACTER SET utf8mb4) "
        "or set the database in the DSN"
    )
    env = {
        "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(mariadb.port), "MYSQL_USER": "no_create",
        "MYSQL_PASSWORD": SECRET, "MYSQL_DATABASE": "nope",
    }  # fmt: skip
    message = await _failure(create("mysql", env=env))
    assert message.endswith("or set MYSQL_DATABASE")


async def test_postgres_wrong_password(postgres: Postgres, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    env = {
        "PG_HOST": "127.0.0.1",
        "PG_PORT": str(postgres.port),
        "PG_USER": "pw_user",
        "PG_PASSWORD": "wrong-" + SECRET,
        "PG_DATABASE": "memchat",
    }
    message = await _failure(create("postgres", env=env))
    assert message == (
        f"postgres backend at pw_user:***@127.0.0.1:{postgres.port}/memchat: connecting and creating "
        "the table failed: access denied for user 'pw_user': the password is wrong or missing; "
        "set PG_USER and PG_PASSWORD to a valid account"
    )
    assert SECRET not in caplog.text


async def test_postgres_permission_denied_and_missing_database(postgres: Postgres) -> None:
    # PostgreSQL 15 lets only the owner create tables in the public schema.
    message = await _failure(create("postgres", dsn=postgres.dsn("reader", SECRET, "memchat")))
    assert "permission denied for user 'reader' (permission denied for schema public)" in message
    assert "grant it CONNECT on the database and USAGE, CREATE on the schema" in message
    message = await _failure(create("postgres", dsn=postgres.dsn("pw_user", SECRET, "nope")))
    assert message.endswith('database nope does not exist: create it (CREATE DATABASE "nope") or set the '
                            "database in the DSN")  # fmt: skip


async def test_postgres_with_a_password_works(postgres: Postgres) -> None:
    password = SECRET.replace("@", "%40").replace("/", "%2F")
    url = f"postgresql://pw_user:{password}@127.0.0.1:{postgres.port}/memchat"
    async with MemoryService(create("postgres", dsn=url)) as svc:
        await svc.add(KEY, "authenticated with scram")
        assert await svc.count(KEY) == 1


async def _survives_a_restart(svc: MemoryService, kill, start, port: int) -> None:
    await svc.add(KEY, "before the crash")
    kill()
    started = time.monotonic()
    for call in (lambda: svc.add(KEY, "while it is down"), lambda: svc.read(KEY)):
        with pytest.raises(BackendError) as info:
            await call()
        message = str(info.value)
        assert "\n" not in message and SECRET not in message
        assert f"cannot connect to the server at 127.0.0.1:{port} (it is down or unreachable)" in message
    assert time.monotonic() - started < 30
    start()
    # The very next call works: no restart of this process, no manual reconnect.
    await svc.add(KEY, "after the restart")
    assert [e.memory.text for e in await svc.read(KEY)] == ["after the restart", "before the crash"]


async def test_mysql_survives_a_server_restart(mariadb: MariaDB) -> None:
    store = create("mysql", dsn=_mysql_dsn(mariadb), table=f"restart_{uuid.uuid4().hex[:8]}")
    async with MemoryService(store) as svc:
        # Several pooled connections go stale at once.
        await asyncio.gather(*(svc.add(KEY, f"warm-up {i}") for i in range(8)))
        await svc.clear(KEY)
        await _survives_a_restart(svc, mariadb.kill, mariadb.start, mariadb.port)


async def test_postgres_survives_a_server_restart(postgres: Postgres) -> None:
    store = create("postgres", dsn=postgres.dsn("pw_user", SECRET, "memchat"), table="restart_test")
    async with MemoryService(store) as svc:
        await asyncio.gather(*(svc.add(KEY, f"warm-up {i}") for i in range(8)))
        await svc.clear(KEY)
        await _survives_a_restart(svc, postgres.kill, postgres.start, postgres.port)


async def _a_write_cut_off_by_a_crash_changes_nothing(store: Any, kill, start) -> None:
    svc = MemoryService(store)
    try:
        kept = await svc.add(KEY, "committed before the crash")

        async def work(tx) -> None:
            await tx.put(replace(kept, memory=replace(kept.memory, text="half-written")))
            await asyncio.to_thread(kill)
            await tx.remove(kept.id)

        with pytest.raises(BackendError, match=r"failed: the connection to 127\.0\.0\.1:\d+ was lost"):
            await store.atomic(KEY, work)
        start()
        [entry] = await svc.read(KEY)
        assert entry == kept  # rolled back whole
        await svc.add(KEY, "written after the restart")
        assert await svc.count(KEY) == 2
    finally:
        await svc.close()


async def test_mysql_write_cut_off_by_a_crash_changes_nothing(mariadb: MariaDB) -> None:
    store = create("mysql", dsn=_mysql_dsn(mariadb), table=f"crash_{uuid.uuid4().hex[:8]}")
    await _a_write_cut_off_by_a_crash_changes_nothing(store, mariadb.kill, mariadb.start)


async def test_postgres_write_cut_off_by_a_crash_changes_nothing(postgres: Postgres) -> None:
    store = create(
        "postgres", dsn=postgres.dsn("pw_user", SECRET, "memchat"), table=f"crash_{uuid.uuid4().hex[:8]}"
    )
    await _a_write_cut_off_by_a_crash_changes_nothing(store, postgres.kill, postgres.start)


async def test_a_connection_dropped_mid_session_is_replaced(server_options) -> None:
    """The server ends our session (as a restart or an idle timeout would)."""
    name, options = server_options
    store = create(name, **options)
    async with MemoryService(store) as svc:
        await svc.add(KEY, "first")
        await _kill_my_sessions(name, store)
        # pool_pre_ping notices the dead connection and replaces it.
        await svc.add(KEY, "second")
        assert await svc.count(KEY) == 2


# -- helpers ------------------------------------------------------------------


async def _kill_my_sessions(name: str, store: Any) -> None:
    import sqlalchemy as sa

    query = "SELECT CONNECTION_ID()" if name == "mysql" else "SELECT pg_backend_pid()"
    async with store.engine.connect() as conn:
        me = int((await conn.execute(sa.text(query))).scalar())
    kill = f"KILL {me}" if name == "mysql" else f"SELECT pg_terminate_backend({me})"
    await asyncio.to_thread(_admin, name, store.target, kill)


def _admin(name: str, target: Any, statement: str) -> None:
    """Run one statement on the server of ``target`` with a sync driver."""
    if name == "mysql":
        import pymysql

        args = target.connect_args()
        args["database"] = args.pop("db")  # PyMySQL's name for aiomysql's "db"
        conn = pymysql.connect(**args)
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        finally:
            conn.close()
    else:
        import psycopg

        with psycopg.connect(**target.params, autocommit=True) as conn:
            conn.execute(statement)


async def _drop_tables(name: str, dsn: str, tables: list[str], schema: str | None = None) -> None:
    from backends.sql import TABLE_SUFFIXES, short_identifier

    # Each table has its vectors' and keyword index's tables beside it (backends/sql.py).
    index = [short_identifier(f"{t}{suffix}") for t in tables for suffix in TABLE_SUFFIXES]
    if name == "mysql":
        names = ", ".join([*(f"`{t}`, `{lock_table_name(t)}`" for t in tables), *(f"`{t}`" for t in index)])
        statement, target = f"DROP TABLE IF EXISTS {names}", parse_mysql_dsn(dsn)
    elif schema:
        statement, target = f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', parse_pg_dsn(dsn)
    else:
        statement = "DROP TABLE IF EXISTS " + ", ".join(f'"{t}"' for t in [*tables, *index])
        target = parse_pg_dsn(dsn)
    await asyncio.to_thread(_admin, name, target, statement)


# -- upgrading a table made before vectors ------------------------------------------

#: The memories table as each backend created it before vectors existed.
OLD_SCHEMAS = {
    "mysql": """CREATE TABLE `{t}` (
        app_name VARCHAR(255) NOT NULL, user_id VARCHAR(255) NOT NULL, memory_id VARCHAR(64) NOT NULL,
        memory MEDIUMTEXT NOT NULL, topics JSON NOT NULL, kind VARCHAR(32) NOT NULL, event_time BIGINT,
        participants JSON NOT NULL, location TEXT NOT NULL, created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL, deleted_at BIGINT, PRIMARY KEY (app_name, user_id, memory_id),
        INDEX `idx_{t}_user_updated` (app_name, user_id, updated_at)
    ) ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_nopad_bin""",
    "postgres": """CREATE TABLE "{t}" (
        app_name VARCHAR(255) NOT NULL, user_id VARCHAR(255) NOT NULL, memory_id VARCHAR(64) NOT NULL,
        memory TEXT NOT NULL, topics JSONB NOT NULL, kind VARCHAR(32) NOT NULL, event_time BIGINT,
        participants JSONB NOT NULL, location TEXT NOT NULL, created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL, deleted_at BIGINT, PRIMARY KEY (app_name, user_id, memory_id)
    )""",
}
OLD_ROWS = [
    ("memory-chat", "user", "m1", "User likes green tea", '["drinks"]', "fact", None, "[]", "", 1, 1, None),
    ("memory-chat", "user", "m2", "User has a cat", "[]", "fact", None, '["Miso"]', "home", 2, 3, None),
    ("memory-chat", "user", "m3", "User lived in Paris", "[]", "fact", None, "[]", "", 1, 4, 4),
]


def _old_table(name: str, options: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Create the pre-vector table with three rows; returns them as read back."""
    from tests.conformance.harness import _sql_connect

    module = parse_mysql_dsn if name == "mysql" else parse_pg_dsn
    conn = _sql_connect(name, module(options["dsn"]))
    table = options["table"]
    columns = "app_name, user_id, memory_id, memory, topics, kind, event_time, participants, location, " \
        "created_at, updated_at, deleted_at"  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute(OLD_SCHEMAS[name].format(t=table))
            quoted = f"`{table}`" if name == "mysql" else f'"{table}"'
            cur.executemany(f"INSERT INTO {quoted} VALUES ({', '.join(['%s'] * 12)})", OLD_ROWS)
            if name == "mysql":
                conn.commit()
            cur.execute(f"SELECT {columns} FROM {quoted} ORDER BY memory_id")
            return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


def _read_back(name: str, options: dict[str, Any]) -> tuple[list[tuple[Any, ...]], int, int]:
    """(old columns of every row, vectors beside them, embedding columns of the rows)."""
    from tests.conformance.harness import _sql_connect

    module = parse_mysql_dsn if name == "mysql" else parse_pg_dsn
    conn = _sql_connect(name, module(options["dsn"]))
    table = options["table"]
    quoted = f"`{table}`" if name == "mysql" else f'"{table}"'
    columns = "app_name, user_id, memory_id, memory, topics, kind, event_time, participants, location, " \
        "created_at, updated_at, deleted_at"  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {columns} FROM {quoted} ORDER BY memory_id")
            rows = [tuple(r) for r in cur.fetchall()]
            beside = f"`{table}_vectors`" if name == "mysql" else f'"{table}_vectors"'
            cur.execute(f"SELECT count(*) FROM {beside}")
            vectors = cur.fetchone()[0]
            cur.execute(
                "SELECT count(*) FROM information_schema.columns WHERE table_name = %s "
                "AND column_name = 'embedding'",
                (table,),
            )
            embedding_columns = cur.fetchone()[0]
            return rows, vectors, embedding_columns
    finally:
        conn.close()


async def test_a_table_made_before_vectors_is_upgraded_in_place(server_options) -> None:
    from memchat.engine.vectors import EmbeddingProgress
    from tests.conformance.test_vectors import HashEmbedder

    name, options = server_options
    before = await asyncio.to_thread(_old_table, name, options)
    # Several openers at once (each its own pool, as other processes): one adds the vectors' table.
    stores = [create(name, **options) for _ in range(3)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
    finally:
        for s in stores:
            await s.close()
    rows, vectors, columns = await asyncio.to_thread(_read_back, name, options)
    assert rows == before and vectors == 0 and columns == 0  # nothing lost, the rows as they were
    embedder, seen = HashEmbedder(), []
    async with MemoryService(create(name, **options), embedder=embedder, progress=seen.append) as svc:
        assert seen[0] == EmbeddingProgress(0, 3) and seen[-1] == EmbeddingProgress(3, 3)
        [tea, cat] = sorted(await svc.read(KEY), key=lambda e: e.id)
        assert tea.memory.topics == ("drinks",) and cat.memory.participants == ("Miso",)
        [hit, *_] = await svc.store.vector_candidates(KEY, embedder.vector("User has a cat"), 5)
        assert hit.id == "m2" and hit.score == pytest.approx(1.0, abs=1e-5)
    rows, vectors, _ = await asyncio.to_thread(_read_back, name, options)
    assert rows == before and vectors == 3


async def _as_an_older_memchat_kept_them(store: Any, stale: str, lost: str) -> None:
    """Turn ``store``'s tables into what a memchat that kept vectors in the rows leaves
    when it opened them after this one (it adds its ``embedding`` column and fills it):
    each vector in its row but the one of ``lost`` (cleared, or not written yet), and
    the one of ``stale`` out of date beside the rows (rewritten in the row since)."""
    t, v = store.table, store.vector_table
    blob = "BYTEA" if store.name == "postgres" else "BLOB"
    async with store.engine.begin() as conn:
        quote = conn.dialect.identifier_preparer
        rows, beside = quote.format_table(t), quote.format_table(v)
        same = " AND ".join(f"{beside}.{c} = {rows}.{c}" for c in ("app_name", "user_id", "memory_id"))
        await conn.execute(sa.text(f"ALTER TABLE {rows} ADD COLUMN embedding {blob} NULL"))
        await conn.execute(
            sa.text(f"UPDATE {rows} SET embedding = (SELECT {beside}.embedding FROM {beside} WHERE {same})")
        )
        await conn.execute(sa.text(f"UPDATE {rows} SET embedding = NULL WHERE memory_id = :id"), {"id": lost})
        value = np.ones(store.dimension, dtype="<f4").tobytes()
        if store.name.startswith("mysql"):  # aiomysql cannot send bytes: hex, as the store sends them
            stmt = f"UPDATE {beside} SET embedding = UNHEX(:stale) WHERE memory_id = :id"
            await conn.execute(sa.text(stmt), {"stale": value.hex(), "id": stale})
        else:
            stmt = f"UPDATE {beside} SET embedding = :stale WHERE memory_id = :id"
            await conn.execute(sa.text(stmt), {"stale": value, "id": stale})


@pytest.mark.parametrize("name", ["sqlite", "mysql", "mysqlvec", "postgres"])
async def test_vectors_an_older_memchat_kept_in_the_rows_move_beside_them(name: str, tmp_path: Path) -> None:
    """Upgrade (and downgrade and upgrade again) in place: the rows' vectors move to
    the table beside them on open and the column goes. The rows are the truth: the
    row's vector wins over a stale one beside them, a memory whose row has none is
    embedded again, and nothing else is lost or embedded again."""
    from memchat.engine.vectors import EmbeddingProgress
    from tests.conformance.test_vectors import HashEmbedder

    options = dict(HARNESSES[name](tmp_path).options)
    texts = ["User likes green tea", "User has a cat", "User lived in Paris"]
    embedder = HashEmbedder()
    async with MemoryService(create(name, **options), limit=0, embedder=embedder, soft_delete=True) as svc:
        tea, cat, paris = [(await svc.add(KEY, text)).id for text in texts]
        await svc.delete(KEY, paris)  # a tombstone keeps its vector
        rows = await svc.store.list(KEY, include_deleted=True)
        vectors = await svc.store.vectors(KEY, [tea, cat, paris])
        await _as_an_older_memchat_kept_them(svc.store, stale=tea, lost=cat)
    # Several openers at once (each its own pool, as other processes): one moves them.
    stores = [create(name, **options) for _ in range(3)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
        columns = await stores[0]._read("reading", stores[0]._columns)
        assert "embedding" not in columns
        assert await stores[0].list(KEY, include_deleted=True) == rows
        moved = await stores[0].vectors(KEY, [tea, cat, paris])
        assert moved == {tea: vectors[tea], paris: vectors[paris]}  # the row's vector, not the stale one
    finally:
        for s in stores:
            await s.close()
    embedder, seen = HashEmbedder(), []
    async with MemoryService(
        create(name, **options), embedder=embedder, progress=seen.append, soft_delete=True
    ) as svc:
        assert embedder.calls == [["User has a cat"]]  # only the one its row did not hold
        assert seen[-1] == EmbeddingProgress(1, 1)
        assert await svc.store.vectors(KEY, [tea, cat, paris]) == vectors
        [hit, *_] = await svc.store.vector_candidates(KEY, embedder.vector("User has a cat"), 5)
        assert hit.id == cat and hit.score == pytest.approx(1.0, abs=1e-5)
        assert await svc.store.list(KEY, include_deleted=True) == rows
        await svc.restore(KEY, paris)  # with the vector it had
        [hit, *_] = await svc.store.vector_candidates(KEY, embedder.vector("User lived in Paris"), 5)
        assert hit.id == paris and hit.score == pytest.approx(1.0, abs=1e-5)


def test_a_program_outside_pytest_drops_the_tables_the_harness_gave_it(tmp_path: Path) -> None:
    """The benchmarks reach the servers through the conformance harness; at their
    exit the tables they were given are dropped, as pytest drops them at the end
    of its session (a benchmark's leftover table set once turned up in CI)."""
    options = HARNESSES["postgres"](tmp_path).options  # the machine's server is reachable
    program = (
        "import asyncio, pathlib, sys\n"
        "from tests.conformance.harness import HARNESSES\n"
        "from memchat.engine import MemoryService, UserKey\n"
        "harness = HARNESSES['postgres'](pathlib.Path(sys.argv[1]))\n"
        "async def main():\n"
        "    async with MemoryService(harness.make_store(), limit=0) as svc:\n"
        "        await svc.add(UserKey('a', 'u'), 'a memory of a benchmark')\n"
        "asyncio.run(main())\n"
        "print(harness.options['table'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    table = done.stdout.strip().splitlines()[-1]
    target = parse_pg_dsn(options["dsn"])
    import psycopg

    with psycopg.connect(**{**target.params, "connect_timeout": 3}) as conn:
        left = conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (f"{table}%",)
        ).fetchall()
    assert table.startswith("memchat_test_") and left == []
