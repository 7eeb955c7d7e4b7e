"""What is specific to the pgvector store: the vector column and its HNSW
index, exact cosine scores, the configured dimension against an existing
table, the ``PGVECTOR_*`` variables, and one clear error per failure.

The behaviour every backend shares is in tests/conformance. The server is a
PostgreSQL with pgvector started for the session by tests/vector_servers.py
(or MEMCHAT_TEST_PGVECTOR_DSN).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memchat.engine import BackendError, ConfigError, MemoryService, UserKey
from tests.conformance import vector_contract as contract
from tests.support import require
from tests.vector_servers import ServerUnavailable, pgvector_dsn

pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'memchat[pgvector]'")

import psycopg

from backends import create
from backends.pgvector import PgVectorStore
from backends.postgres import parse_dsn

SECRET = "s3cr3t-P@ss:w/rd"


@pytest.fixture(scope="module")
def dsn() -> str:
    try:
        return pgvector_dsn()
    except ServerUnavailable as exc:
        require(False, str(exc))
        raise


def _connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(**{**parse_dsn(dsn).params, "connect_timeout": 5}, autocommit=True)


@pytest.fixture
async def make_store(dsn: str) -> AsyncIterator[Any]:
    """Stores on one fresh table (dimension 8 unless given); closed and the
    table dropped afterwards."""
    table = f"memchat_vtest_{uuid.uuid4().hex[:12]}"
    made: list[PgVectorStore] = []

    async def make(**options: Any) -> PgVectorStore:
        options = {"dsn": dsn, "table": table, "dimension": contract.DIM, **options}
        store = create("pgvector", **options)
        made.append(store)
        await store.open()
        return store

    yield make
    for store in made:
        await store.close()
    with _connect(dsn) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')


# (The vector contract itself: tests/conformance/test_vector_contract.py.)


# -- the table and its index ---------------------------------------------------


async def test_the_table_has_a_vector_column_and_an_hnsw_cosine_index(make_store, dsn) -> None:
    store = await make_store()
    with _connect(dsn) as conn:
        column = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            (store.table.name,),
        ).fetchone()
        indexes = [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s",
                                              (store.table.name,))]  # fmt: skip
    assert column == (f"vector({contract.DIM})",)
    [hnsw] = [i for i in indexes if "hnsw" in i]
    assert "vector_cosine_ops" in hnsw and "m='16'" in hnsw and "ef_construction='64'" in hnsw
    assert store.extension_version
    assert f"{contract.DIM} dimensions" in store.describe()


async def test_the_hnsw_index_scan_still_finds_a_crowded_out_users_memories(make_store, dsn) -> None:
    """With the planner forced onto the HNSW index, the user filter runs after
    the index scan: iterative scanning (pgvector ≥ 0.8) keeps going until k
    rows pass it, instead of returning the few that survive ef_search."""
    forced = {"connect_args": {"options": "-c enable_seqscan=off -c enable_sort=off"}}
    store = await make_store(**forced)
    version = tuple(int(p) for p in store.extension_version.split(".")[:2])
    require(version >= (0, 8), f"pgvector {store.extension_version} has no iterative index scans")
    await contract.check_crowded_user_still_gets_k(lambda: make_store(**forced), crowd=400)
    with _connect(dsn) as conn:
        conn.execute("SET enable_seqscan = off; SET enable_sort = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                f'EXPLAIN SELECT memory_id FROM "{store.table.name}" WHERE app_name = %s AND user_id = %s '
                "AND deleted_at IS NULL ORDER BY embedding <=> %s::vector LIMIT 3",
                (contract.KEY.app, contract.KEY.user, str(contract.vec(1))),
            )
        )
    assert store.index is not None and store.index.name in plan


async def test_an_existing_table_of_another_dimension_is_one_clear_error(make_store) -> None:
    store = await make_store(dimension=8)
    await store.close()
    with pytest.raises(BackendError) as info:
        await make_store(dimension=384)
    message = str(info.value)
    assert "dimension mismatch" in message and "8-dimension" in message and "384-dimension" in message
    assert f"drop table {store.table.name}" in message
    assert "\n" not in message


async def test_a_table_made_by_the_postgres_backend_is_refused_clearly(dsn) -> None:
    table = f"memchat_vtest_{uuid.uuid4().hex[:12]}"
    plain = create("postgres", dsn=dsn, table=table)
    await plain.open()
    await plain.close()
    try:
        store = create("pgvector", dsn=dsn, table=table)
        with pytest.raises(BackendError, match="no vector column 'embedding'"):
            await store.open()
        await store.close()
    finally:
        with _connect(dsn) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')


async def test_stores_on_two_tables_create_the_extension_once(dsn) -> None:
    """Concurrent first opens on fresh tables race on CREATE EXTENSION: the
    store serialises it, so none fails."""
    import asyncio

    tables = [f"memchat_vtest_{uuid.uuid4().hex[:12]}" for _ in range(4)]
    stores = [create("pgvector", dsn=dsn, table=t, dimension=4) for t in tables]
    try:
        await asyncio.gather(*(s.open() for s in stores))
    finally:
        for s in stores:
            await s.close()
        with _connect(dsn) as conn:
            conn.execute("DROP TABLE IF EXISTS " + ", ".join(f'"{t}"' for t in tables))


async def test_a_missing_database_is_created_with_the_vector_extension(dsn) -> None:
    """`--memory pgvector` on a fresh server: the database (and then the extension) is made."""
    database = f"memchat_{uuid.uuid4().hex[:12]}"
    target = dsn.rsplit("/", 1)[0] + "/" + database if "://" in dsn else f"{dsn} dbname={database}"
    try:
        async with MemoryService(create("pgvector", dsn=target)) as svc:
            await svc.add(UserKey("memory-chat", "user"), "stored in a database memchat created")
        with _connect(dsn) as conn:
            assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
    finally:
        with _connect(dsn) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# -- configuration -------------------------------------------------------------


def test_the_pgvector_variables_are_read() -> None:
    env = {
        "PGVECTOR_HOST": "vec.example",
        "PGVECTOR_PORT": "6543",
        "PGVECTOR_USER": "mem",
        "PGVECTOR_PASSWORD": SECRET,
        "PGVECTOR_DATABASE": "memories",
        "PG_HOST": "wrong.example",
    }
    store = create("pgvector", env=env)
    assert store.target.params["host"] == "vec.example" and store.target.params["port"] == "6543"
    assert store.target.database == "memories" and store.target.password == SECRET
    assert SECRET not in store.describe() and "vec.example:6543" in store.describe()
    assert store.dimension == 384


def test_pgvector_dsn_wins_over_the_separate_variables() -> None:
    env = {"PGVECTOR_DSN": "postgresql://u@dsn.example:5433/db", "PGVECTOR_HOST": "vars.example"}
    store = create("pgvector", env=env)
    assert store.target.params["host"] == "dsn.example"
    assert (
        create("pgvector", dsn="postgresql://u@arg.example/db", env=env).target.params["host"]
        == "arg.example"
    )


@pytest.mark.parametrize(
    ("env", "source"),
    [
        ({"PGVECTOR_SSLMODE": "bogus"}, "PGVECTOR_SSLMODE"),
        ({"PGVECTOR_DSN": "postgresql://u@h/db?sslmode=strict"}, "PGVECTOR_DSN"),
    ],
)
def test_an_invalid_sslmode_is_a_config_error(env, source) -> None:
    with pytest.raises(ConfigError, match=f"^{source} has an invalid sslmode .*: use one of disable, allow"):
        create("pgvector", env=env)
    store = create("pgvector", env={"PGVECTOR_SSLMODE": "verify-full"})
    assert store.target.params["sslmode"] == "verify-full"


def test_the_defaults_are_the_references_but_the_database_is_memchat() -> None:
    store = create("pgvector", env={})
    assert store.target.location() == "postgres@localhost:5432/memchat"
    assert store.table.name == "memories"


@pytest.mark.parametrize("dimension", [0, -1, 16_001, 1.5, True, "384"])
def test_an_invalid_dimension_is_a_config_error(dimension) -> None:
    with pytest.raises(ConfigError, match="dimension"):
        create("pgvector", env={}, dimension=dimension)


def test_a_large_dimension_has_no_hnsw_index() -> None:
    """pgvector indexes at most 2000 dimensions with HNSW; above that the store scans exactly."""
    assert create("pgvector", env={}, dimension=2000).index is not None
    assert create("pgvector", env={}, dimension=3072).index is None


def test_invalid_table_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="invalid table name"):
        create("pgvector", env={}, table="memories; DROP TABLE x")
    with pytest.raises(ConfigError):
        create("pgvector", env={}, table="t" * 64)


# -- errors --------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_an_unreachable_server_is_one_sentence_without_the_password() -> None:
    port = _free_port()
    store = create("pgvector", dsn=f"postgresql://mem:{SECRET.replace('@', '%40').replace('/', '%2F')}"
                                  f"@127.0.0.1:{port}/db")  # fmt: skip
    with pytest.raises(BackendError) as info:
        await store.open()
    await store.close()
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "start it" in message
    assert SECRET not in message and "\n" not in message


async def test_a_server_without_pgvector_says_how_to_get_it() -> None:
    """The machine's PostgreSQL (as the postgres conformance harness uses)
    has no pgvector: the error names the missing extension and the fix."""
    plain = os.environ.get("MEMCHAT_TEST_POSTGRES_DSN") or "postgresql://root@127.0.0.1:5432/test"
    try:
        with _connect(plain) as conn:
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    except psycopg.Error:
        require(False, f"PostgreSQL is not reachable at {parse_dsn(plain).location()}: start it")
        return
    if available:
        return  # this server has pgvector: nothing to show
    store = create("pgvector", dsn=plain, table=f"memchat_vtest_{uuid.uuid4().hex[:12]}")
    with pytest.raises(BackendError) as info:
        await store.open()
    await store.close()
    message = str(info.value)
    assert "no pgvector extension" in message and "install pgvector" in message


async def test_searching_checks_the_query_vector_before_the_server(make_store) -> None:
    store = await make_store()
    with pytest.raises(BackendError, match="NaN"):
        await store.vector_candidates(UserKey("a", "b"), [float("nan")] * contract.DIM, 3)


async def test_a_server_that_goes_away_and_comes_back_needs_no_restart() -> None:
    import asyncio

    from tests.vector_servers import PgVectorServer

    try:
        server = PgVectorServer()
        await asyncio.to_thread(server.start)
    except ServerUnavailable as exc:
        require(False, str(exc))
    try:
        store = create("pgvector", dsn=server.dsn, dimension=contract.DIM)
        await contract.put_all(
            store, contract.KEY, [(contract.entry(contract.KEY, "a", "x"), contract.vec(1))]
        )
        await asyncio.to_thread(server.pause)
        with pytest.raises(BackendError, match=r"cannot connect|connection .* was lost"):
            await store.list(contract.KEY)
        await asyncio.to_thread(server.resume)
        assert contract.ids(await store.list(contract.KEY)) == ["a"]
        await contract.put_all(
            store, contract.KEY, [(contract.entry(contract.KEY, "b", "y", 1), contract.vec(0, 1))]
        )
        assert contract.ids(await store.vector_candidates(contract.KEY, contract.vec(0, 1), 1)) == ["b"]
        await store.close()
    finally:
        await asyncio.to_thread(server.stop)
