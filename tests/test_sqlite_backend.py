"""What is specific to the SQLite store: DSNs, the default file, WAL, errors."""

from __future__ import annotations

import sqlite3

import pytest

from backends import create
from backends.sqlite import parse_dsn
from memchat.engine import BackendError, ConfigError, MemoryService, UserKey

KEY = UserKey("memory-chat", "user")


@pytest.mark.parametrize(
    ("dsn", "path"),
    [
        ("sqlite:///memories.db", "memories.db"),
        ("sqlite:////tmp/abs.db", "/tmp/abs.db"),
        ("sqlite+aiosqlite:///rel/x.db", "rel/x.db"),
        ("file:memories.db?_busy_timeout=5000", "memories.db"),
        ("/var/tmp/plain.db", "/var/tmp/plain.db"),
        ("sqlite://", ":memory:"),
        (":memory:", ":memory:"),
        ("file:with%20space.db", "with space.db"),
    ],
)
def test_dsn_spellings(dsn, path) -> None:
    assert parse_dsn(dsn) == path


def test_a_blank_dsn_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="SQLITE_MEMORY_DSN"):
        parse_dsn("  ")


async def test_env_variable_chooses_the_file_and_memories_survive_a_restart(tmp_path) -> None:
    db = tmp_path / "env.db"
    env = {"SQLITE_MEMORY_DSN": f"file:{db}?_busy_timeout=5000"}
    async with MemoryService(create("sqlite", env=env)) as svc:
        await svc.add(KEY, "Likes green tea")
    async with MemoryService(create("sqlite", env=env)) as svc:
        assert [e.memory.text for e in await svc.read(KEY)] == ["Likes green tea"]
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_default_file_lives_in_the_user_data_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    store = create("sqlite", env={})
    assert store.path == str(tmp_path / "data" / "memchat" / "memories.db")
    async with MemoryService(store) as svc:
        await svc.add(KEY, "persisted by default")
    assert (tmp_path / "data" / "memchat" / "memories.db").exists()


async def test_an_unwritable_location_is_one_clear_error(tmp_path) -> None:
    store = create("sqlite", dsn=str(tmp_path / "missing-folder" / "x.db"))
    with pytest.raises(BackendError) as info:
        await MemoryService(store).add(KEY, "anything")
    message = str(info.value)
    assert "missing-folder" in message and "SQLITE_MEMORY_DSN" in message
    assert "Traceback" not in message and "\n" not in message


def test_invalid_table_names_are_rejected() -> None:
    with pytest.raises(ConfigError, match="invalid table name"):
        create("sqlite", dsn="sqlite://", table="memories; DROP TABLE x")


async def test_custom_table_names_keep_data_apart(tmp_path) -> None:
    dsn = str(tmp_path / "t.db")
    async with (
        MemoryService(create("sqlite", dsn=dsn, table="team_a")) as a,
        MemoryService(create("sqlite", dsn=dsn, table="team_b")) as b,
    ):
        await a.add(KEY, "only in a")
        assert await b.read(KEY) == []
