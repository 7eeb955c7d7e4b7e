"""Which store keeps the sessions of each memory backend (nothing is opened:
these only build the objects)."""

from __future__ import annotations

import pytest

from memchat.sessions.factory import create_session_store
from memchat.sessions.memory import InMemorySessionStore
from memchat.sessions.sql import SQLSessionStore
from memchat.settings import Settings


def settings(memory: str, tmp_path, **env: str) -> Settings:
    values = {"SQLITE_MEMORY_DSN": f"sqlite:///{tmp_path / 'mem.db'}", **env}
    return Settings(memory=memory, env=values).validated()


def test_sqlite_sessions_live_in_the_memories_file_beside_its_table(tmp_path) -> None:
    store = create_session_store(settings("sqlite", tmp_path))
    assert isinstance(store, SQLSessionStore) and store.store.path == str(tmp_path / "mem.db")
    assert store.table_names == ["memories_inputs", "memories_session_records", "memories_sessions"]


def test_chromadb_sessions_live_in_the_default_sqlite_file(tmp_path) -> None:
    pytest.importorskip("chromadb")
    store = create_session_store(settings("chromadb", tmp_path))
    assert isinstance(store, SQLSessionStore) and store.store.name == "sqlite"
    assert store.store.path == str(tmp_path / "mem.db")


def test_inmemory_sessions_stay_in_the_process(tmp_path) -> None:
    assert isinstance(create_session_store(settings("inmemory", tmp_path)), InMemorySessionStore)


def test_redis_sessions_use_the_memories_key_prefix(tmp_path) -> None:
    pytest.importorskip("redis")
    from memchat.sessions.redis import RedisSessionStore

    store = create_session_store(settings("redis", tmp_path, REDIS_KEY_PREFIX="team-a"))
    assert isinstance(store, RedisSessionStore)
    from memchat.engine import UserKey

    assert store._base(UserKey("my app", "bob:1")) == "team-a:sess:{my%20app:bob%3A1}"


@pytest.mark.parametrize("memory", ["postgres", "mysql"])
def test_sql_server_sessions_use_the_memories_database(memory, tmp_path) -> None:
    pytest.importorskip({"postgres": "psycopg", "mysql": "aiomysql"}[memory])
    dsn = {"postgres": ("POSTGRES_DSN", "postgres://u:secret@db.example:5432/chat"),
           "mysql": ("MYSQL_DSN", "mysql://u:secret@db.example:3306/chat")}[memory]  # fmt: skip
    store = create_session_store(settings(memory, tmp_path, **{dsn[0]: dsn[1]}))
    assert isinstance(store, SQLSessionStore) and store.store.name == memory
    assert "db.example" in store.describe() and "secret" not in store.describe()
