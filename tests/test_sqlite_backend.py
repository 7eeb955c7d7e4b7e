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
    svc = MemoryService(store)
    with pytest.raises(BackendError) as info:
        await svc.add(KEY, "anything")
    await svc.close()
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


# The memories table as the sqlite backend created it before vectors existed.
OLD_SCHEMA = """
CREATE TABLE "{t}" (
	app_name VARCHAR(255) NOT NULL,
	user_id VARCHAR(255) NOT NULL,
	memory_id VARCHAR(64) NOT NULL,
	memory TEXT NOT NULL,
	topics JSON NOT NULL,
	kind VARCHAR(32) NOT NULL,
	event_time BIGINT,
	participants JSON NOT NULL,
	location TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	deleted_at BIGINT,
	PRIMARY KEY (app_name, user_id, memory_id)
);
CREATE INDEX "idx_{t}_user_updated" ON "{t}" (app_name, user_id, updated_at);
"""
OLD_ROWS = [
    ("memory-chat", "user", "m1", "User likes green tea", '["drinks"]', "fact", None, "[]", "", 1, 1, None),
    ("memory-chat", "user", "m2", "User has a cat", "[]", "fact", None, '["Miso"]', "home", 2, 3, None),
    ("memory-chat", "user", "m3", "User lived in Paris", "[]", "fact", None, "[]", "", 1, 4, 4),
    ("memory-chat", "bob", "m4", "Bob plays the violin", "[]", "fact", None, "[]", "", 5, 5, None),
]


async def test_a_database_made_before_vectors_is_upgraded_in_place(tmp_path) -> None:
    import asyncio

    from memchat.engine.vectors import EmbeddingProgress
    from tests.conformance.test_vectors import HashEmbedder

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA.format(t="memories"))
        conn.executemany(f"INSERT INTO memories VALUES ({', '.join('?' * 12)})", OLD_ROWS)
    before = sorted(sqlite3.connect(path).execute("SELECT * FROM memories").fetchall())
    # Two processes' worth of stores opening the old file at once: one adds the vectors' table.
    stores = [create("sqlite", dsn=str(path)) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    for s in stores:
        await s.close()
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(memories)")]
        assert "embedding" not in columns  # the vectors go beside the rows
        assert conn.execute("SELECT count(*) FROM memories_vectors").fetchone() == (0,)
        # Nothing lost: every old column of every row as it was.
        assert sorted(conn.execute("SELECT * FROM memories")) == before
    embedder, seen = HashEmbedder(), []
    async with MemoryService(create("sqlite", dsn=str(path)), embedder=embedder, progress=seen.append) as svc:
        assert seen[0] == EmbeddingProgress(0, 4) and seen[-1] == EmbeddingProgress(4, 4)
        [tea, cat] = sorted(await svc.read(KEY), key=lambda e: e.id)
        assert tea.memory.topics == ("drinks",) and cat.memory.participants == ("Miso",)
        hits = await svc.store.vector_candidates(KEY, embedder.vector("User has a cat"), 5)
        assert hits[0].id == "m2" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM memories_vectors").fetchone() == (4,)
        assert sorted(conn.execute("SELECT * FROM memories")) == before


async def test_the_vector_cache_signature_does_not_overflow(tmp_path) -> None:
    """Summing many microsecond stamps would overflow SQLite's 64-bit integers."""
    from datetime import UTC, datetime, timedelta

    from memchat.engine.model import Entry, Memory

    store = create("sqlite", dsn=str(tmp_path / "big.db"), dimension=4)
    late = datetime(9000, 1, 1, tzinfo=UTC)  # ~2.2e17 µs: 50 of them pass 2^63

    async def work(tx) -> None:
        for i in range(50):
            when = late + timedelta(seconds=i)
            entry = Entry(f"m{i:02d}", KEY.app, KEY.user, Memory(f"memory {i}"), when, when)
            await tx.put(entry, [1, i, 0, 0])

    await store.atomic(KEY, work)
    try:
        [best] = await store.vector_candidates(KEY, [1.0, 0.0, 0.0, 0.0], 1)
        assert best.id == "m00" and best.score == pytest.approx(1.0)
    finally:
        await store.close()
