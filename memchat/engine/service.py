"""MemoryService: the engine's public API, policy over one Store.

Everything that must behave the same on every backend lives here once:
canonical IDs, idempotent add, the update rotation state machine (reference
§5), soft delete and tombstones, per-user limits, scope checks, and keyword
ranking (through ``search``). A store only offers storage and an atomic
section per user. Its embeddings and searches are engine/retrieval.py's; the
surface its users rely on is the ``MemoryAPI`` protocol (engine/api.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, cast

from . import search as keyword
from . import validation
from .ids import build_memory, format_event_time, memory_id_for, normalize_participants, patch_memory
from .model import (
    KIND_FACT,
    SEARCH_HYBRID,
    SEARCH_MODES,
    Entry,
    Memory,
    MemoryConflictError,
    MemoryIdCollisionError,
    MemoryLimitError,
    MemoryNotFoundError,
    Metadata,
    UpdateResult,
    UserKey,
)
from .retrieval import Retrieval
from .validation import MAX_KIND_LENGTH, MAX_LOCATION_LENGTH, MAX_TOPIC_LENGTH, MAX_TOPICS
from .vectors import NO_EMBEDDER, EmbeddingProgress, ProgressCallback, _NoEmbedder, prepare_vectors

__all__ = [
    "DEFAULT_MAX_TEXT_LENGTH",
    "DEFAULT_MEMORY_LIMIT",
    "MAX_KIND_LENGTH",
    "MAX_LOCATION_LENGTH",
    "MAX_TOPICS",
    "MAX_TOPIC_LENGTH",
    "NO_EMBEDDER",
    "EmbeddingProgress",
    "MemoryService",
]

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .embedding import Embedder
    from .extraction import AutoMemory, AutoMemoryConfig, ExtractionEvent, Extractor
    from .store import IndexBuildingStore, Store, Transaction
    from .tools import Tool, ToolSettings

DEFAULT_MEMORY_LIMIT = 1000
DEFAULT_MAX_TEXT_LENGTH = 10_000


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


class MemoryService(Retrieval):
    """Long-term memory for (app, user) pairs over one storage backend.

    ``soft_delete``: deletes leave tombstones that ``restore`` can undo; they
    are hidden from read and search either way. ``limit``: maximum active
    memories per user (``0`` or ``None``: no limit); an operation that does not
    add an active memory (re-adding, updating) never trips it.

    Auto mode: with an ``extractor`` (engine/extraction), memories are also
    made in the background from the conversation: the chat calls
    ``enqueue_auto_memory_job`` after each turn, workers configured by
    ``auto_memory`` run the extractor, and ``add_extraction_listener`` reports
    what they changed. ``auto_mode`` is then on: the agent sees only
    memory_search (and memory_load once enabled) unless tools are exposed.
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
        embedder: Embedder | _NoEmbedder | Literal[False] | None = None,
        extractor: Extractor | None = None,
        auto_memory: AutoMemoryConfig | None = None,
        search_mode: str = SEARCH_HYBRID,
        progress: ProgressCallback | None = None,
        backfill: bool = True,
    ) -> None:
        if limit is not None and limit < 0:
            raise ValueError("limit must be 0 (no limit) or a positive number of memories")
        if search_mode not in SEARCH_MODES:
            raise ValueError(f"search_mode must be one of {', '.join(SEARCH_MODES)}, not {search_mode!r}")
        #: How ``search`` ranks when the options name no mode (hybrid, semantic or
        #: keyword); hybrid and semantic need an embedder and a vector store, else keyword.
        self.search_mode = search_mode
        self.store = store
        self.soft_delete = soft_delete
        self.limit = limit or 0
        self.max_results = max_results
        self.min_score = min_score
        self.max_text_length = max_text_length
        self.auto_mode = auto_mode or extractor is not None
        #: Auto mode's extractor and its worker pool (created on first use).
        self.extractor = extractor
        self._auto_config = auto_memory
        self._auto: AutoMemory | None = None
        self._tool_settings = tool_settings
        self._tools: list[Tool] | None = None
        self._now = _MonotonicClock(clock)
        self._opened = False
        self._open_attempted = False
        #: Turns memory text and queries into vectors. None → the offline
        #: default, created on first use; ``NO_EMBEDDER`` (or False) → none:
        #: keyword search only, nothing embedded, no model loaded.
        if embedder is False or isinstance(embedder, _NoEmbedder):
            embedder, self._keyword_only = None, True
        else:
            self._keyword_only = False
        self._embedder: Embedder | None = embedder
        #: Told how filling in missing vectors at ``open`` goes (an
        #: ``EmbeddingProgress`` per batch; a plain or async callable).
        self.progress = progress
        #: Fill in missing vectors (and re-embed after a model change) at ``open``.
        self.backfill = backfill
        self._open_lock: asyncio.Lock | None = None

    # -- lifecycle -------------------------------------------------------

    async def open(self) -> MemoryService:
        """Connect the store (idempotent). Every call below opens lazily too.

        With an embedder, on a store that keeps vectors:

        * a store whose index has a fixed dimension (sqlitevec, mysqlvec,
          pgvector, chromadb) is checked against the embedder's first: a
          mismatch is one ConfigError naming both and the fix; the others take
          the embedder's dimension;
        * then (``backfill``) the vectors are made the embedder's
          (``engine/vectors.py``): after a model change every vector is
          re-embedded, and memories without one (written with no embedder, or
          before vectors existed) get theirs, reported to ``progress``
          ("Embedding 1,234 memories for semantic search… 40%"). This loads
          the model and may take a while: call ``open`` off a UI thread."""
        if self._opened:
            return self
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._opened:
                return self
            embedding = self.is_vector_store and self.has_embedder
            if embedding:
                embedder = self.embedder
                store = self._vectors
                if getattr(store, "fixed_dimension", True):
                    from .embedding import check_dimensions

                    check_dimensions(embedder, store.dimension, store.describe())
                else:
                    store.dimension = int(embedder.dimension)
            self._open_attempted = True  # so close() releases what a failed open left behind
            if hasattr(self.store, "progress"):  # a store that may build its index on open says how far
                cast("IndexBuildingStore", self.store).progress = self.progress
            await self.store.open()
            if embedding and self.backfill:
                await prepare_vectors(self.store, self.embedder, self._embed, progress=self.progress)
            self._opened = True
        return self

    async def close(self) -> None:
        """Drain the background extraction (bounded, see AutoMemoryConfig), then close the store."""
        try:
            if self._auto is not None:
                await self._auto.close()
        finally:
            if self._opened or self._open_attempted:
                self._opened = self._open_attempted = False
                await self.store.close()

    async def __aenter__(self) -> MemoryService:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ready(self, key: UserKey | None = None) -> None:
        """Validate ``key`` (when given) and open the store. Every check of an
        operation's arguments runs before this, so a bad value never reaches I/O."""
        if key is not None:
            validation.check_key(key)
        if not self._opened:
            await self.open()

    # -- validation (engine/validation.py) ----------------------------------

    def _check_content(self, text: str, topics: Iterable[str] | None, metadata: Metadata | None) -> list[str]:
        """The content arguments of add/update; returns the topics as a list."""
        validation.check_text(text, self.max_text_length)
        validation.check_metadata(metadata)
        return validation.check_topics(topics)

    @staticmethod
    def _identity(memory: Memory) -> tuple[object, ...]:
        """What the canonical ID stands for: text, effective kind, event time to
        the second, normalised participants and location. Two memories with the
        same ID but different identities collided through the ID's separators."""
        event_time = format_event_time(memory.event_time) if memory.event_time is not None else None
        return (
            memory.text,
            memory.kind or KIND_FACT,
            event_time,
            normalize_participants(memory.participants),
            (memory.location or "").strip(),
        )

    def _check_collision(self, existing: Entry | None, memory: Memory) -> None:
        if existing is not None and self._identity(existing.memory) != self._identity(memory):
            raise MemoryIdCollisionError(existing.id)

    async def _check_limit(self, key: UserKey, tx: Transaction) -> None:
        """Room for one more active memory (no count at all without a limit)."""
        if self.limit:
            active = await tx.count_active()
            if active >= self.limit:
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
        When a *different* memory (active or deleted) already has the canonical
        ID — possible because the ID joins fields with separators that a field
        may contain — ``MemoryIdCollisionError`` is raised and nothing changes.
        """
        validation.check_key(key)
        topics = self._check_content(text, topics, metadata)
        await self._ready()
        memory = build_memory(text, topics, metadata)
        mid = memory_id_for(memory, key.app, key.user)
        vector = await self._vector_for(memory.text)

        async def work(tx: Transaction) -> Entry:
            now = self._now()
            existing = await tx.get(mid)
            self._check_collision(existing, memory)
            if existing is None or existing.is_deleted:
                await self._check_limit(key, tx)
            created = existing.created_at if existing is not None else now
            entry = Entry(mid, key.app, key.user, memory, created, now)
            await tx.put(entry, vector)
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
        source, ``MemoryConflictError`` when the new ID is another active
        memory and ``MemoryIdCollisionError`` when the new ID belongs to a
        different memory (see ``add``) — in every case nothing changes."""
        validation.check_key(key)
        validation.check_memory_id(memory_id)
        topics = self._check_content(text, topics, metadata)
        await self._ready()
        # The memory keeps the text as given: embed it now, before the atomic section.
        vector = await self._vector_for(text)

        async def work(tx: Transaction) -> Entry:
            now = self._now()
            source = await tx.get(memory_id)
            if source is None or source.is_deleted:
                raise MemoryNotFoundError(memory_id)
            memory = patch_memory(source.memory, text, topics, metadata)
            new_id = memory_id_for(memory, key.app, key.user)
            if new_id == memory_id:
                self._check_collision(source, memory)
                entry = replace(source, memory=memory, updated_at=now)
                await tx.put(entry, vector)
                return entry
            target = await tx.get(new_id)
            self._check_collision(target, memory)
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
            await tx.put(entry, vector)
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
        validation.check_key(key)
        validation.check_memory_id(memory_id)
        await self._ready()

        async def work(tx: Transaction) -> None:
            entry = await tx.get(memory_id)
            if entry is None or entry.is_deleted:
                raise MemoryNotFoundError(memory_id)
            await self._retire(tx, entry, self._now())

        await self.store.atomic(key, work)

    async def restore(self, key: UserKey, memory_id: str) -> Entry:
        """Undo a soft delete. The memory comes back exactly as it was, with its
        own timestamps; restoring counts against the limit."""
        validation.check_key(key)
        validation.check_memory_id(memory_id)
        await self._ready()

        async def work(tx: Transaction) -> Entry:
            entry = await tx.get(memory_id)
            if entry is None:
                raise MemoryNotFoundError(memory_id)
            if not entry.is_deleted:
                return entry
            await self._check_limit(key, tx)
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
        validation.check_key(key)
        validation.check_memory_id(memory_id)
        await self._ready()
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

    # -- auto extraction ------------------------------------------------------

    @property
    def auto(self) -> AutoMemory | None:
        """The background extraction workers (None without an extractor)."""
        if self._auto is None and self.extractor is not None:
            from .extraction import AutoMemory
            from .tools import ToolSettings, enabled_tool_names

            enabled = enabled_tool_names(self._tool_settings or ToolSettings(), True)
            self._auto = AutoMemory(self, self.extractor, self._auto_config, enabled=frozenset(enabled))
        return self._auto

    def enqueue_auto_memory_job(
        self, key: UserKey, session_id: str, messages: Sequence[Mapping[str, object]], *, force: bool = False
    ) -> str:
        """After a turn: offer the session's messages (OpenAI format, the whole
        history) for background extraction. Never blocks; returns what happened
        ("queued", "coalesced", "deferred", "waiting", "nothing new", "off"…)."""
        auto = self.auto
        if auto is None:
            return "off"
        return auto.submit(key, session_id, messages, force=force)

    def add_extraction_listener(self, listener: Callable[[ExtractionEvent], object]) -> Callable[[], None]:
        """Be told of every ExtractionStarted / ExtractionFinished; returns a remover."""
        auto = self.auto
        if auto is None:
            return lambda: None
        return auto.add_listener(listener)

    # -- first use -------------------------------------------------------

    def warm_up(self) -> None:
        """Load what the first search would otherwise wait for (blocking: call it
        in a thread): the Chinese word segmentation dictionary (about a second)
        and its name tagger (search/bridge.py), and an offline embedding model. A
        remote embedder has nothing to load; a failure here is left for the first
        search to report."""
        import contextlib

        keyword.build_search_tokens("记忆预热")
        keyword.load_name_tagger()
        if not self.has_embedder:
            return
        with contextlib.suppress(Exception):  # the first search says what is wrong, in one sentence
            load = getattr(self.embedder, "load", None)  # only offline models load
            if callable(load):
                load()

    # -- tools -----------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The agent-facing memory tools (reference §3.5–§3.6), built once."""
        if self._tools is None:
            from .tools import ToolSettings, build_tools

            self._tools = build_tools(self, self._tool_settings or ToolSettings(), self.auto_mode)
        return list(self._tools)
