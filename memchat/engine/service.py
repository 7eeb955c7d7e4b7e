"""MemoryService: the engine's public API, policy over one Store.

Everything that must behave the same on every backend lives here once:
canonical IDs, idempotent add, the update rotation state machine (reference
§5), soft delete and tombstones, per-user limits, scope checks, and keyword
ranking (through ``search``). A store only offers storage and an atomic
section per user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from . import search as keyword
from .ids import build_memory, memory_id_for, patch_memory
from .model import (
    Entry,
    InvalidKeyError,
    InvalidMemoryError,
    MemoryConflictError,
    MemoryLimitError,
    MemoryNotFoundError,
    Metadata,
    SearchOptions,
    UpdateResult,
    UserKey,
)

if TYPE_CHECKING:
    from backends.base import Store, Transaction

    from .tools import Tool, ToolSettings

DEFAULT_MEMORY_LIMIT = 1000
DEFAULT_MAX_TEXT_LENGTH = 10_000
MAX_TOPICS = 50
MAX_TOPIC_LENGTH = 100
MAX_KIND_LENGTH = 32
MAX_LOCATION_LENGTH = 1000


class _MonotonicClock:
    """UTC wall clock that never repeats or goes backwards within a process,
    so "newest first" is exact even for writes in the same microsecond."""

    def __init__(self, now: Callable[[], datetime] | None = None) -> None:
        self._now = now or (lambda: datetime.now(UTC))
        self._last: datetime | None = None

    def __call__(self) -> datetime:
        current = self._now()
        if current.tzinfo is None:
            current = current.replace(tzinfo=UTC)
        if self._last is not None and current <= self._last:
            current = self._last + timedelta(microseconds=1)
        self._last = current
        return current


class MemoryService:
    """Long-term memory for (app, user) pairs over one storage backend.

    ``soft_delete``: deletes leave tombstones that ``restore`` can undo; they
    are hidden from read and search either way. ``limit``: maximum active
    memories per user (``0`` or ``None``: no limit); an operation that does not
    add an active memory (re-adding, updating) never trips it.
    """

    def __init__(
        self,
        store: Store,
        *,
        soft_delete: bool = False,
        limit: int | None = DEFAULT_MEMORY_LIMIT,
        max_results: int = keyword.DEFAULT_MAX_RESULTS,
        min_score: float = keyword.MIN_KEYWORD_SCORE,
        max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
        tool_settings: ToolSettings | None = None,
        auto_mode: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if limit is not None and limit < 0:
            raise ValueError("limit must be 0 (no limit) or a positive number of memories")
        self.store = store
        self.soft_delete = soft_delete
        self.limit = limit or 0
        self.max_results = max_results
        self.min_score = min_score
        self.max_text_length = max_text_length
        self.auto_mode = auto_mode
        self._tool_settings = tool_settings
        self._tools: list[Tool] | None = None
        self._now = _MonotonicClock(clock)
        self._opened = False

    # -- lifecycle -------------------------------------------------------

    async def open(self) -> MemoryService:
        """Connect the store (idempotent). Every call below opens lazily too."""
        if not self._opened:
            await self.store.open()
            self._opened = True
        return self

    async def close(self) -> None:
        if self._opened:
            self._opened = False
            await self.store.close()

    async def __aenter__(self) -> MemoryService:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ready(self, key: UserKey) -> None:
        key.validate()
        if not self._opened:
            await self.open()

    # -- validation ------------------------------------------------------

    def _check_text(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise InvalidMemoryError("memory text is required: pass a non-empty string")
        if "\x00" in text:
            raise InvalidMemoryError("memory text contains a NUL character: remove it and try again")
        if len(text) > self.max_text_length:
            raise InvalidMemoryError(
                f"memory text is {len(text)} characters, over the limit of {self.max_text_length}: "
                "store a concise fact instead"
            )

    @staticmethod
    def _check_topics(topics: Iterable[str] | None) -> list[str]:
        if topics is None:
            return []
        if isinstance(topics, str) or not all(isinstance(t, str) for t in topics):
            raise InvalidMemoryError("topics must be a list of strings")
        topics = list(topics)
        if len(topics) > MAX_TOPICS:
            raise InvalidMemoryError(f"{len(topics)} topics given, at most {MAX_TOPICS} are allowed")
        if any("\x00" in t for t in topics):
            raise InvalidMemoryError("a topic contains a NUL character: remove it and try again")
        if any(len(t) > MAX_TOPIC_LENGTH for t in topics):
            raise InvalidMemoryError(f"a topic is longer than {MAX_TOPIC_LENGTH} characters")
        return topics

    @staticmethod
    def _check_metadata(metadata: Metadata | None) -> None:
        if metadata is None:
            return
        if not isinstance(metadata, Metadata):
            raise InvalidMemoryError("metadata must be a memchat.engine.Metadata")
        if not isinstance(metadata.kind, str) or len(metadata.kind) > MAX_KIND_LENGTH:
            raise InvalidMemoryError(f"memory kind must be a string of at most {MAX_KIND_LENGTH} characters")
        if metadata.event_time is not None and not isinstance(metadata.event_time, datetime):
            raise InvalidMemoryError("event_time must be a datetime")
        participants = metadata.participants or ()
        if isinstance(participants, str) or not all(isinstance(p, str) for p in participants):
            raise InvalidMemoryError("participants must be a list of names (strings)")
        if len(participants) > MAX_TOPICS or any(len(p) > MAX_TOPIC_LENGTH for p in participants):
            raise InvalidMemoryError(
                f"at most {MAX_TOPICS} participants of at most {MAX_TOPIC_LENGTH} characters are allowed"
            )
        if not isinstance(metadata.location or "", str) or len(metadata.location or "") > MAX_LOCATION_LENGTH:
            raise InvalidMemoryError(f"location must be a string of at most {MAX_LOCATION_LENGTH} characters")
        texts = [metadata.kind, metadata.location or "", *participants]
        if any("\x00" in t for t in texts):
            raise InvalidMemoryError("metadata contains a NUL character: remove it and try again")

    @staticmethod
    def _check_id(memory_id: str) -> None:
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidKeyError("memoryID is required")

    def _check_limit(self, key: UserKey, active: int) -> None:
        if self.limit and active >= self.limit:
            raise MemoryLimitError(key.user, self.limit, active)

    # -- writes ----------------------------------------------------------

    async def add(
        self,
        key: UserKey,
        text: str,
        topics: Iterable[str] | None = None,
        metadata: Metadata | None = None,
    ) -> Entry:
        """Add a memory, or refresh it if the same canonical memory exists.

        Re-adding replaces topics and metadata, refreshes ``updated_at``, keeps
        ``created_at`` and reactivates a tombstone (which counts against the limit).
        """
        await self._ready(key)
        self._check_text(text)
        self._check_metadata(metadata)
        memory = build_memory(text, self._check_topics(topics), metadata)
        mid = memory_id_for(memory, key.app, key.user)

        async def work(tx: Transaction) -> Entry:
            now = self._now()
            existing = await tx.get(mid)
            if existing is None or existing.is_deleted:
                self._check_limit(key, await tx.count_active())
            created = existing.created_at if existing is not None else now
            entry = Entry(mid, key.app, key.user, memory, created, now)
            await tx.put(entry)
            return entry

        return await self.store.atomic(key, work)

    async def update(
        self,
        key: UserKey,
        memory_id: str,
        text: str,
        topics: Iterable[str] | None = None,
        metadata: Metadata | None = None,
    ) -> UpdateResult:
        """Rewrite a memory (reference §5). Text and topics are replaced,
        metadata is patched; when the canonical ID changes the memory rotates to
        the new ID. Raises ``MemoryNotFoundError`` for a missing or deleted
        source and ``MemoryConflictError`` when the new ID is another active
        memory — in both cases nothing changes."""
        await self._ready(key)
        self._check_id(memory_id)
        self._check_text(text)
        self._check_metadata(metadata)
        topics = self._check_topics(topics)

        async def work(tx: Transaction) -> Entry:
            now = self._now()
            source = await tx.get(memory_id)
            if source is None or source.is_deleted:
                raise MemoryNotFoundError(memory_id)
            memory = patch_memory(source.memory, text, topics, metadata)
            new_id = memory_id_for(memory, key.app, key.user)
            if new_id == memory_id:
                entry = replace(source, memory=memory, updated_at=now)
                await tx.put(entry)
                return entry
            target = await tx.get(new_id)
            if target is not None and not target.is_deleted:
                raise MemoryConflictError(new_id)
            if target is not None and self.soft_delete:
                # Revive the tombstone: it keeps its own creation time.
                created = target.created_at
            else:
                # Absent, or a stale tombstone that hard mode replaces.
                if target is not None:
                    await tx.remove(new_id)
                created = source.created_at
            entry = Entry(new_id, key.app, key.user, memory, created, now)
            await tx.put(entry)
            await self._retire(tx, source, now)
            return entry

        entry = await self.store.atomic(key, work)
        return UpdateResult(memory_id=entry.id, entry=entry)

    async def _retire(self, tx: Transaction, entry: Entry, now: datetime) -> None:
        if self.soft_delete:
            await tx.put(replace(entry, deleted_at=now))
        else:
            await tx.remove(entry.id)

    async def delete(self, key: UserKey, memory_id: str) -> None:
        """Delete one memory (a tombstone in soft-delete mode)."""
        await self._ready(key)
        self._check_id(memory_id)

        async def work(tx: Transaction) -> None:
            entry = await tx.get(memory_id)
            if entry is None or entry.is_deleted:
                raise MemoryNotFoundError(memory_id)
            await self._retire(tx, entry, self._now())

        await self.store.atomic(key, work)

    async def restore(self, key: UserKey, memory_id: str) -> Entry:
        """Undo a soft delete. The memory comes back exactly as it was, with its
        own timestamps; restoring counts against the limit."""
        await self._ready(key)
        self._check_id(memory_id)

        async def work(tx: Transaction) -> Entry:
            entry = await tx.get(memory_id)
            if entry is None:
                raise MemoryNotFoundError(memory_id)
            if not entry.is_deleted:
                return entry
            self._check_limit(key, await tx.count_active())
            entry = replace(entry, deleted_at=None)
            await tx.put(entry)
            return entry

        return await self.store.atomic(key, work)

    async def clear(self, key: UserKey) -> int:
        """Delete all of the user's memories; returns how many were active."""
        await self._ready(key)
        return await self.store.clear(key, deleted_at=self._now() if self.soft_delete else None)

    # -- reads -----------------------------------------------------------

    async def get(self, key: UserKey, memory_id: str, *, include_deleted: bool = False) -> Entry:
        await self._ready(key)
        self._check_id(memory_id)
        entry = await self.store.get(key, memory_id)
        if entry is None or (entry.is_deleted and not include_deleted):
            raise MemoryNotFoundError(memory_id)
        return entry

    async def read(self, key: UserKey, limit: int = 0, *, include_deleted: bool = False) -> list[Entry]:
        """The user's memories, newest first (``limit <= 0``: all)."""
        await self._ready(key)
        return await self.store.list(key, limit=max(limit, 0), include_deleted=include_deleted)

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        await self._ready(key)
        return await self.store.count(key, include_deleted=include_deleted)

    async def search(self, key: UserKey, query: str, options: SearchOptions | None = None) -> list[Entry]:
        """Rank the user's memories for ``query``; each result carries ``score``."""
        await self._ready(key)
        if not isinstance(query, str) or not query.strip():
            return []
        options = options or SearchOptions()
        candidates = await self.store.keyword_candidates(key, query)
        return keyword.keyword_search(
            candidates, query, options, min_score=self.min_score, default_max=self.max_results
        )

    # -- tools -----------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The agent-facing memory tools (reference §3.5–§3.6), built once."""
        if self._tools is None:
            from .tools import ToolSettings, build_tools

            self._tools = build_tools(self, self._tool_settings or ToolSettings(), self.auto_mode)
        return list(self._tools)
