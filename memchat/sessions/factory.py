"""Which session store goes with which memory backend.

=====================================  =============================================
memory backend                         sessions
=====================================  =============================================
sqlite, sqlitevec                      the same SQLite file
mysql, mysqlvec, postgres, pgvector    the same database (and schema)
redis                                  the same server and key prefix
inmemory                               this process (lost on exit)
chromadb                               the default SQLite file (SQLITE_MEMORY_DSN,
                                       else memories.db in the user data folder)
=====================================  =============================================

The chat shares the memory service's store (one connection pool); the CLI
builds one just for sessions (``memory_store=None``), without opening the
memory service or loading an embedder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .store import SessionStore

if TYPE_CHECKING:
    from backends.redis import RedisStore
    from backends.sql import SQLStore
    from memchat.settings import Settings

#: Memory backends whose sessions live elsewhere: backend → the registry name used for sessions.
SESSION_BACKEND = {"chromadb": "sqlite"}


def session_backend(memory: str) -> str:
    """The storage family that keeps the sessions of ``memory``'s backend."""
    return SESSION_BACKEND.get(memory, memory)


def create_session_store(settings: Settings, memory_store: Any | None = None) -> SessionStore:
    """The session store for ``settings.memory`` (not yet opened). With
    ``memory_store`` (the chat's), sessions share its connection; else a store
    is built for them and closed with them."""
    from backends import create

    backend = session_backend(settings.memory)
    if backend == "inmemory":
        from .memory import InMemorySessionStore

        return InMemorySessionStore()
    owns = memory_store is None or backend != settings.memory
    store = create(backend, env=settings.env, timeout=settings.timeout) if owns else memory_store
    # session_backend(settings.memory) names the family of the store built or given.
    if backend == "redis":
        from .redis import RedisSessionStore

        return RedisSessionStore(cast("RedisStore", store), owns_store=owns)
    from .sql import SQLSessionStore

    return SQLSessionStore(cast("SQLStore", store), owns_store=owns)
