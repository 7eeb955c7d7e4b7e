"""What is specific to the sqlitevec and mysqlvec stores: the shared vector
contract (tests/conformance/test_vector_contract.py), their index layout, the dimension of an
existing index, their variables, and how they pick an SQLite that can load
extensions / a native vector type. The behaviour every backend shares is in
tests/conformance.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backends import create
from memchat.engine import BackendError, MemoryService, UserKey
from memchat.engine.vectors import NO_EMBEDDER
from tests.conformance import vector_contract as contract
from tests.support import require

MYSQL_DSN = os.environ.get("MEMCHAT_TEST_MYSQL_DSN") or "mysql://root@127.0.0.1:3306/test"


def _mysql_problem() -> str | None:
    try:
        import pymysql

        from backends.mysql import parse_dsn
    except ImportError as exc:
        return f"{exc.name} is not installed: pip install 'memchat[mysqlvec]'"
    args = {**parse_dsn(MYSQL_DSN).connect_args(), "connect_timeout": 3}
    args["database"] = args.pop("db")
    try:
        pymysql.connect(**args).close()
    except Exception:
        return f"MariaDB is not reachable for {MYSQL_DSN}: start it or set MEMCHAT_TEST_MYSQL_DSN"
    return None


def _drop_mysql(tables: list[str]) -> None:
    import pymysql

    from backends.mysql import lock_table_name, parse_dsn
    from backends.sql import TABLE_SUFFIXES, short_identifier

    args = {**parse_dsn(MYSQL_DSN).connect_args()}
    args["database"] = args.pop("db")
    conn = pymysql.connect(**args)
    try:
        with conn.cursor() as cur:
            for t in tables:
                # With the keyword index's tables beside it (backends/sql_index.py).
                index = ", ".join(f"`{short_identifier(t + suffix)}`" for suffix in TABLE_SUFFIXES)
                cur.execute(f"DROP TABLE IF EXISTS `{t}`, `{lock_table_name(t)}`, {index}")
        conn.commit()
    finally:
        conn.close()


@pytest.fixture(params=["sqlitevec", "mysqlvec"])
async def make_store(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[Any]:
    """Stores of one backend on one fresh namespace (dimension 8 unless given)."""
    name = request.param
    tables: list[str] = []
    if name == "sqlitevec":
        pytest.importorskip("sqlite_vec", reason="pip install 'memchat[sqlitevec]'")
        base = {"dsn": f"sqlite:///{tmp_path / 'vec.db'}"}
    else:
        problem = _mysql_problem()
        require(problem is None, problem or "")
        table = f"memchat_vtest_{uuid.uuid4().hex[:12]}"
        tables.append(table)
        base = {"dsn": MYSQL_DSN, "table": table}
    made: list[Any] = []

    async def make(**options: Any) -> Any:
        store = create(name, **{**base, "dimension": contract.DIM, **options})
        made.append(store)
        await store.open()
        return store

    make.backend = name  # type: ignore[attr-defined]
    make.base = base  # type: ignore[attr-defined]
    yield make
    for store in made:
        await store.close()
    if tables:
        _drop_mysql(tables)


# (The vector contract itself: tests/conformance/test_vector_contract.py.)


# -- both ----------------------------------------------------------------------


async def test_an_existing_index_of_another_dimension_is_one_clear_error(make_store) -> None:
    store = await make_store()
    await contract.put_all(store, contract.KEY, [(contract.entry(contract.KEY, "m", "x"), contract.vec(1))])
    with pytest.raises(BackendError) as raised:
        await make_store(dimension=16)
    message = str(raised.value)
    assert "8-dimensional" in message and "16" in message and "another table" in message


async def test_clear_drops_or_tombstones_the_vectors_too(make_store) -> None:
    store = await make_store()
    key, other = contract.KEY, contract.OTHER
    await contract.put_all(
        store, key, [(contract.entry(key, f"m{i}", f"t{i}", i), contract.vec(1, i)) for i in range(3)]
    )
    await contract.put_all(store, other, [(contract.entry(other, "o", "theirs"), contract.vec(1))])
    assert await store.clear(key, deleted_at=contract.T0) == 3
    assert await store.vector_candidates(key, contract.vec(1), 5) == []
    assert len(await store.vector_candidates(other, contract.vec(1), 5)) == 1
    assert await store.clear(key, deleted_at=None) == 0
    assert await store.count(key, include_deleted=True) == 0


async def test_memories_of_unicode_apps_and_users_stay_apart(make_store) -> None:
    store = await make_store()
    a, b = UserKey("app", '用户 "1"'), UserKey("app", '用户 "1" ')
    await contract.put_all(store, a, [(contract.entry(a, "m", "a's"), contract.vec(1))])
    await contract.put_all(store, b, [(contract.entry(b, "m", "b's"), contract.vec(1))])
    [hit] = await store.vector_candidates(a, contract.vec(1), 5)
    assert hit.memory.text == "a's"


# -- sqlitevec ---------------------------------------------------------------------


def test_sqlitevec_picks_an_sqlite_that_can_load_extensions() -> None:
    pytest.importorskip("sqlite_vec")
    import sqlite3

    from backends.sqlitevec import extension_sqlite

    module = extension_sqlite()
    assert hasattr(module.Connection, "enable_load_extension")
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        assert module is sqlite3


async def test_sqlitevec_index_is_a_cosine_vec0_table(tmp_path) -> None:
    pytest.importorskip("sqlite_vec")
    import sqlite_vec

    from backends.sqlitevec import extension_sqlite

    path = tmp_path / "layout.db"
    store = create("sqlitevec", dsn=f"sqlite:///{path}", table="mem", dimension=8)
    await store.open()
    await store.close()
    conn = extension_sqlite().connect(str(path))
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        [(sql,)] = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'mem_vec'").fetchall()
    finally:
        conn.close()
    assert "vec0" in sql and "float[8]" in sql and "distance_metric=cosine" in sql and "partition key" in sql


async def test_sqlitevec_reads_its_variables(tmp_path) -> None:
    pytest.importorskip("sqlite_vec")
    env = {
        "SQLITEVEC_MEMORY_DSN": f"file:{tmp_path / 'env.db'}?_busy_timeout=5000",
        "SQLITEVEC_DIMENSION": "8",
    }
    store = create("sqlitevec", env=env)
    assert store.path == str(tmp_path / "env.db") and store.dimension == 8
    assert "sqlitevec" in store.describe() and "env.db" in store.describe()
    from memchat.engine import ConfigError

    with pytest.raises(ConfigError, match="SQLITEVEC_DIMENSION"):
        create(
            "sqlitevec", env={"SQLITEVEC_MEMORY_DSN": str(tmp_path / "x.db"), "SQLITEVEC_DIMENSION": "big"}
        )


# -- mysqlvec ------------------------------------------------------------------------


@pytest.fixture
def mysql_table() -> Any:
    problem = _mysql_problem()
    require(problem is None, problem or "")
    tables: list[str] = []

    def make() -> str:
        tables.append(f"memchat_vtest_{uuid.uuid4().hex[:12]}")
        return tables[-1]

    yield make
    _drop_mysql(tables)


async def test_mysqlvec_on_mariadb_10_stores_float32_blobs(mysql_table) -> None:
    table = mysql_table()
    store = create("mysqlvec", dsn=MYSQL_DSN, table=table, dimension=8)
    await store.open()
    try:
        import pymysql

        await contract.put_all(
            store, contract.KEY, [(contract.entry(contract.KEY, "m", "x"), contract.vec(1, 1))]
        )
        if store.flavour is None:
            import struct

            from backends.mysql import parse_dsn

            args = parse_dsn(MYSQL_DSN).connect_args()
            args["database"] = args.pop("db")
            with pymysql.connect(**args) as conn, conn.cursor() as cur:
                cur.execute(f"SELECT embedding FROM `{table}_vectors` WHERE memory_id = 'm'")
                [(blob,)] = cur.fetchall()
            assert len(blob) == 32
            assert struct.unpack("<8f", blob)[:2] == pytest.approx(tuple(contract.vec(1, 1)[:2]))
    finally:
        await store.close()


async def test_mysqlvec_sees_another_processes_writes(mysql_table) -> None:
    table = mysql_table()
    first = create("mysqlvec", dsn=MYSQL_DSN, table=table, dimension=8)
    second = create("mysqlvec", dsn=MYSQL_DSN, table=table, dimension=8)
    key = contract.KEY
    try:
        await contract.put_all(first, key, [(contract.entry(key, "a", "a"), contract.vec(1))])
        assert contract.ids(await second.vector_candidates(key, contract.vec(1), 5)) == ["a"]  # cached now
        await contract.put_all(first, key, [(contract.entry(key, "b", "b", 1), contract.vec(1, 0.1))])
        assert contract.ids(await second.vector_candidates(key, contract.vec(1), 5)) == ["a", "b"]
        await contract.put_all(first, key, [(contract.entry(key, "a", "a", 2, deleted=True), None)])
        assert contract.ids(await second.vector_candidates(key, contract.vec(1), 5)) == ["b"]
        await contract.put_all(first, key, [(contract.entry(key, "b", "b", 3), contract.vec(0, 1))])
        [hit] = await second.vector_candidates(key, contract.vec(0, 1), 5)
        assert hit.score == pytest.approx(1.0, abs=1e-5)
    finally:
        await first.close()
        await second.close()


async def test_mysqlvec_uses_a_mysql_backend_table_and_fills_in_its_vectors(mysql_table) -> None:
    table = mysql_table()
    key = UserKey("app", "u")
    async with MemoryService(create("mysql", dsn=MYSQL_DSN, table=table), embedder=NO_EMBEDDER) as plain:
        old = await plain.add(key, "User likes coffee")  # stored without a vector
    async with MemoryService(create("mysqlvec", dsn=MYSQL_DSN, table=table)) as svc:
        assert [e.id for e in await svc.read(key)] == [old.id]
        [hit] = await svc.vector_search(key, "coffee")  # embedded when opened
        assert hit.id == old.id


async def test_mysqlvec_native_on_request_says_what_the_server_lacks(mysql_table) -> None:
    store = create("mysqlvec", dsn=MYSQL_DSN, table=mysql_table(), dimension=8, native=True)
    try:
        try:
            await store.open()
        except BackendError as exc:
            assert "native vector type" in str(exc) and "11.7" in str(exc)
        else:
            assert store.flavour in ("mariadb", "mysql")
    finally:
        await store.close()


def test_mysqlvec_reads_its_variables() -> None:
    pytest.importorskip("aiomysql")
    env = {"MYSQLVEC_HOST": "db.example", "MYSQLVEC_PORT": "3307", "MYSQLVEC_USER": "u",
           "MYSQLVEC_PASSWORD": "pw!", "MYSQLVEC_DATABASE": "mem", "MYSQLVEC_DIMENSION": "16"}  # fmt: skip
    store = create("mysqlvec", env=env)
    assert store.target.location() == "u:***@db.example:3307/mem" and store.dimension == 16
    assert "pw!" not in store.describe()
    store = create("mysqlvec", env={**env, "MYSQLVEC_DSN": "mysql://a@h:1234/d"})
    assert store.target.location() == "a@h:1234/d"
