"""The SessionStore seam: where conversations are kept, scoped by (app, user).

One implementation per storage family, chosen with the memory backend
(``open_session_store`` in ``factory.py``): SQLite (the memories' file), the
SQL servers (the memories' database, through the memory store's SQLAlchemy
engine), Redis (the memories' server and key prefix) and in-memory. All of
them pass ``tests/sessions/test_session_store_contract.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from memchat.engine.model import UserKey

from .model import SessionInfo, SessionRecord

#: Inputs (what was typed, for ↑/↓) kept per (app, user); older ones are dropped.
INPUT_HISTORY = 1000


@runtime_checkable
class SessionStore(Protocol):
    name: str

    async def open(self) -> None:
        """Connect and create what is missing (tables); idempotent."""

    async def close(self) -> None: ...

    def describe(self) -> str:
        """Where sessions are kept, for people (never a password)."""
        ...

    async def append(
        self, key: UserKey, session: SessionInfo, records: Sequence[SessionRecord]
    ) -> SessionInfo:
        """Add ``records`` at the end of session ``session.id`` in one write,
        creating the session (with ``session``'s title and creation time) if it
        does not exist. The session's ``updated_at``, ``model``, ``backend`` and
        counts follow. Returns the session as stored."""
        ...

    async def get(self, key: UserKey, session_id: str) -> SessionInfo | None: ...

    async def records(self, key: UserKey, session_id: str) -> list[SessionRecord]:
        """Every record of the session in order ([] when there is none)."""
        ...

    async def rename(self, key: UserKey, session_id: str, title: str) -> SessionInfo:
        """Raises SessionNotFoundError."""
        ...

    async def delete(self, key: UserKey, session_id: str) -> None:
        """The session and its records; raises SessionNotFoundError."""
        ...

    async def add_input(self, key: UserKey, text: str) -> None:
        """Remember one typed input (the newest ``INPUT_HISTORY`` are kept)."""
        ...

    async def inputs(self, key: UserKey, limit: int = INPUT_HISTORY) -> list[str]:
        """The newest ``limit`` inputs, oldest first."""
        ...

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, query: str = "", limit: int = 0) -> list[SessionInfo]:
        """Sessions, most recently active first; ``query`` keeps those whose title
        or any message holds it (case-insensitive); ``limit`` 0 = all."""
        ...


def search_text(record: SessionRecord) -> str:
    """What a text search looks in for one record, case-folded: a message's
    text and its tool calls' arguments."""
    if record.kind != "message":
        return ""
    parts = [str(record.data.get("content") or "")]
    for call in record.data.get("tool_calls") or ():
        parts.append(str((call.get("function") or {}).get("arguments") or ""))
    from .model import storable

    return storable("\n".join(p for p in parts if p).casefold())


def matches(query: str, title: str, texts: Sequence[str]) -> bool:
    """The one rule for stores that search in Python (inmemory, Redis)."""
    needle = query.casefold()
    return needle in title.casefold() or any(needle in text for text in texts)


def check_title(title: str) -> str:
    """A new title: one line, not blank, at most 200 characters."""
    from memchat.engine.model import ConfigError

    from .model import storable

    cleaned = " ".join(storable(str(title)).split())
    if not cleaned:
        raise ConfigError("a session title cannot be empty: give a few words")
    if len(cleaned) > 200:
        raise ConfigError(f"a session title has at most 200 characters, not {len(cleaned)}: shorten it")
    return cleaned
