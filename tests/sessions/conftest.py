"""Session stores on the real backends, one fresh namespace per test: the
memory store a conformance harness hands out (a new SQLite file, a unique SQL
table, a unique Redis key prefix) with the session store built over it, as
the chat builds it. The SQL session tables are dropped after the test; Redis
keys go with the harness's prefix."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from memchat.sessions.store import SessionStore
from tests.conformance.harness import HARNESSES

#: The storage families sessions live in, and two vector variants (same tables as their family).
SESSION_BACKENDS = ("inmemory", "sqlite", "sqlitevec", "redis", "mysql", "mysqlvec", "postgres")


def build_session_store(memory_store) -> SessionStore:
    from memchat.sessions.memory import InMemorySessionStore

    if memory_store.name == "inmemory":
        return InMemorySessionStore()
    if memory_store.name == "redis":
        from memchat.sessions.redis import RedisSessionStore

        return RedisSessionStore(memory_store, owns_store=True)
    from memchat.sessions.sql import SQLSessionStore

    return SQLSessionStore(memory_store, owns_store=True)


async def _drop_tables(store: SessionStore) -> None:
    from memchat.sessions.sql import SQLSessionStore

    if not isinstance(store, SQLSessionStore) or store.store.engine.dialect.name == "sqlite":
        return
    engine = store.store.engine
    with contextlib.suppress(Exception):  # best effort: the server may be gone
        async with engine.begin() as conn:
            await conn.run_sync(store.metadata.drop_all, checkfirst=True)
    with contextlib.suppress(Exception):
        await engine.dispose()


@pytest.fixture(params=SESSION_BACKENDS)
def session_backend(request) -> str:
    return request.param


@pytest.fixture
async def make_sessions(session_backend, tmp_path) -> AsyncIterator[Callable[[], SessionStore]]:
    """Build session stores on one fresh namespace (several share it, like two processes)."""
    harness = HARNESSES[session_backend](tmp_path)
    made: list[SessionStore] = []

    def make() -> SessionStore:
        store = build_session_store(harness.make_store())
        if session_backend == "inmemory" and made:
            return made[0]  # one process: one store
        made.append(store)
        return store

    yield make
    for store in made:
        with contextlib.suppress(Exception):
            await store.close()
    if made:
        reopened = build_session_store(harness.make_store())
        await _drop_tables(reopened)
