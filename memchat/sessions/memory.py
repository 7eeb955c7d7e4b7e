"""Sessions kept in this process (``--memory inmemory``): lost on exit, like its memories."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from memchat.engine.model import UserKey

from .model import SessionInfo, SessionNotFoundError, SessionRecord, storable
from .store import INPUT_HISTORY, check_title, matches, search_text


class InMemorySessionStore:
    name = "inmemory"

    def __init__(self) -> None:
        self._sessions: dict[UserKey, dict[str, tuple[SessionInfo, list[SessionRecord]]]] = {}
        self._inputs: dict[UserKey, list[str]] = {}
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def describe(self) -> str:
        return "inmemory (this process; lost on exit)"

    async def append(
        self, key: UserKey, session: SessionInfo, records: Sequence[SessionRecord]
    ) -> SessionInfo:
        async with self._lock:
            sessions = self._sessions.setdefault(key, {})
            new = replace(session, title=storable(session.title), message_count=0, record_count=0)
            info, stored = sessions.get(session.id) or (new, [])
            start = len(stored)
            stored.extend(replace(r, seq=start + i) for i, r in enumerate(records))
            info = replace(
                info,
                updated_at=records[-1].created_at if records else info.updated_at,
                model=session.model or info.model,
                backend=session.backend or info.backend,
                message_count=info.message_count + sum(r.counted for r in records),
                record_count=len(stored),
            )
            sessions[session.id] = (info, stored)
            return info

    async def get(self, key: UserKey, session_id: str) -> SessionInfo | None:
        found = self._sessions.get(key, {}).get(session_id)
        return found[0] if found else None

    async def records(self, key: UserKey, session_id: str) -> list[SessionRecord]:
        found = self._sessions.get(key, {}).get(session_id)
        return list(found[1]) if found else []

    async def rename(self, key: UserKey, session_id: str, title: str) -> SessionInfo:
        title = check_title(title)
        async with self._lock:
            found = self._sessions.get(key, {}).get(session_id)
            if found is None:
                raise SessionNotFoundError(session_id)
            info = found[0].renamed(title)
            self._sessions[key][session_id] = (info, found[1])
            return info

    async def delete(self, key: UserKey, session_id: str) -> None:
        async with self._lock:
            if self._sessions.get(key, {}).pop(session_id, None) is None:
                raise SessionNotFoundError(session_id)

    async def add_input(self, key: UserKey, text: str) -> None:
        inputs = self._inputs.setdefault(key, [])
        inputs.append(storable(text))
        del inputs[:-INPUT_HISTORY]

    async def inputs(self, key: UserKey, limit: int = INPUT_HISTORY) -> list[str]:
        return self._inputs.get(key, [])[-limit:] if limit > 0 else []

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, query: str = "", limit: int = 0) -> list[SessionInfo]:
        found = [
            info
            for info, records in self._sessions.get(key, {}).values()
            if not query or matches(query, info.title, [search_text(r) for r in records])
        ]
        found.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return found[:limit] if limit > 0 else found
