"""MemoryService: the engine's public API, policy over one Store.

Everything that must behave the same on every backend lives here once:
canonical IDs, idempotent add, the update rotation state machine (reference
§5), soft delete and tombstones, per-user limits, scope checks, and keyword
ranking (through ``search``). A store only offers storage and an atomic
section per user.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from . import search as keyword
from . import validation
from .ids import build_memory, format_event_time, memory_id_for, normalize_participants, patch_memory
from .model import (
    KIND_FACT,
    SEARCH_HYBRID,
    SEARCH_KEYWORD,
    SEARCH_MODES,
    SEARCH_SEMANTIC,
    Entry,
    Memory,
    MemoryConflictError,
    MemoryIdCollisionError,
    MemoryLimitError,
    MemoryNotFoundError,
    Metadata,
    SearchOptions,
    UpdateResult,
    UserKey,
)
from .search.candidates import KEYWORD_CANDIDATES, KeywordPlanner
from .search.index import KEYWORD_SPACE, LEXICAL_SPACE, KeywordStats, query_terms
from .validation import MAX_KIND_LENGTH, MAX_LOCATION_LENGTH, MAX_TOPIC_LENGTH, MAX_TOPICS
from .vectors import NO_EMBEDDER, EmbeddingProgress, ProgressCallback, prepare_vectors

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
    from collections.abc import Sequence

    from backends.base import Store, Transaction, VectorStore

    from .embedding import Embedder
    from .extraction import AutoMemory, AutoMemoryConfig, ExtractionEvent, Extractor
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


class MemoryService:
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
        embedder: Embedder | Literal[False] | None = None,
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
        self._keyword_only = embedder is False or embedder is NO_EMBEDDER
        self._embedder: Embedder | None = None if self._keyword_only else embedder  # type: ignore[assignment]
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
                if getattr(self.store, "fixed_dimension", True):
                    from .embedding import check_dimensions

                    check_dimensions(embedder, self.store.dimension, self.store.describe())  # type: ignore[attr-defined]
                else:
                    self.store.dimension = int(embedder.dimension)  # type: ignore[attr-defined]
            self._open_attempted = True  # so close() releases what a failed open left behind
            if hasattr(self.store, "progress"):  # a store that may build its index on open says how far
                self.store.progress = self.progress  # type: ignore[attr-defined]
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

    # -- embeddings (vector stores only) ----------------------------------

    @property
    def is_vector_store(self) -> bool:
        """The store keeps embeddings and answers nearest-neighbour queries
        (every backend does; see ``has_embedder`` for whether this service embeds)."""
        return bool(getattr(self.store.capabilities, "vector_search", False))

    @property
    def has_embedder(self) -> bool:
        """False when made with ``embedder=NO_EMBEDDER`` (or False): keyword only."""
        return not self._keyword_only

    @property
    def embedder(self) -> Embedder:
        """The embedder (the offline default unless one was given). A ConfigError
        for a service made with ``NO_EMBEDDER``."""
        if self._keyword_only:
            from .model import ConfigError

            raise ConfigError(
                "this memory service has no embedder (keyword search only): "
                "create it without embedder=NO_EMBEDDER (or unset MEMCHAT_EMBEDDER=none) for semantic search"
            )
        if self._embedder is None:
            from .embedding import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        from .model import BackendError

        vectors = await self.embedder.embed(list(texts))
        if len(vectors) != len(texts):
            raise BackendError(
                f"the embedder {self.embedder.name} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        dimension = self.store.dimension  # type: ignore[attr-defined]
        for vector in vectors:
            if len(vector) != dimension:
                raise BackendError(
                    f"embedding dimension mismatch: expected {dimension}, got {len(vector)} "
                    f"from the embedder {self.embedder.name}"
                )
        return vectors

    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for memory texts from this service's embedder, checked against
        the store's dimension (import and migration embed in batches with it)."""
        return await self._embed(texts)

    async def _vector_for(self, text: str) -> list[float] | None:
        """The embedding to store with ``text`` (None without an embedder or
        for a store without vectors). Computed before any atomic section, so a
        failure changes nothing."""
        if not (self.is_vector_store and self.has_embedder):
            return None
        return (await self._embed([text]))[0]

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
                self._check_limit(key, await tx.count_active())
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

    async def search(self, key: UserKey, query: str, options: SearchOptions | None = None) -> list[Entry]:
        """Rank the user's memories for ``query``; each result carries ``score``, a 0–1 relevance.

        The one retrieval path of the tools, preload, CLI, TUI and library. The
        mode is ``options.resolved_mode(self.search_mode)``:

        * ``"hybrid"`` (the default): meaning and keywords fused
          (``search.HybridRanking``: calibrated cosine, keyword score, token-level
          similarity);
        * ``"semantic"``: meaning only (the calibrated cosine, as ``vector_search``);
        * ``"keyword"``: the reference's keyword ranking (§4.1), 0.3 minimum score.

        Hybrid and semantic need an embedder and a store with vectors; without
        them the search is keyword (no error). Filters, kind fallback, order,
        dedup and truncation behave the same in every mode.

        A query or search kind with a NUL or a lone surrogate is an
        ``InvalidMemoryError`` (on every backend); a blank query finds nothing."""
        self._check_search(key, query, options)
        await self._ready()
        if not isinstance(query, str) or not query.strip():
            return []
        options = options or SearchOptions()
        mode = options.resolved_mode(self.search_mode)
        if mode != SEARCH_KEYWORD and self._semantic_ready():
            if mode == SEARCH_SEMANTIC:
                return await self._semantic_search(key, query, options)
            return await self._hybrid_search(key, query, options)
        candidates, stats = await self._keyword_candidates(
            key, query, KEYWORD_SPACE, self._keyword_depth(options)
        )
        return keyword.keyword_search(
            candidates, query, options, min_score=self.min_score, default_max=self.max_results, stats=stats
        )

    async def _keyword_candidates(
        self, key: UserKey, query: str, space: str, depth: int | None = None
    ) -> tuple[list[Entry], KeywordStats | None]:
        """What keyword scoring reads: from a store that keeps an inverted index
        (search/index.py), the memories holding a query term and the collection's
        statistics; from the others, every active memory (the scorer counts).

        ``depth``: the caller ranks only the best ``depth`` (None: all of them), so
        the store may return just its best-ranked holders (search/candidates.py);
        when those cannot be shown to hold the true best ``depth``, it is asked again
        for every holder that still could."""
        store = self.store
        if store.capabilities.native_keyword_search:
            terms = query_terms(query, space)
            if terms is not None:
                if depth is None:
                    return await store.indexed_keyword_candidates(key, space, terms)  # type: ignore[attr-defined]
                planner = KeywordPlanner(query, space, max(KEYWORD_CANDIDATES, depth), depth)
                found, stats = await store.indexed_keyword_candidates(key, space, terms, planner)  # type: ignore[attr-defined]
                if stats is not None and stats.rank_cutoff is not None:
                    scorer = keyword.score_entries if space == KEYWORD_SPACE else keyword.lexical_scores
                    scores = scorer(found, query, stats)
                    if not planner.complete(scores, stats, depth):
                        wider = planner.below(scores, depth)
                        found, stats = await store.indexed_keyword_candidates(key, space, terms, wider)  # type: ignore[attr-defined]
                return found, stats
        return await store.keyword_candidates(key, query), None

    def _hybrid_keyword_depth(self, query: str, options: SearchOptions) -> int | None:
        """How many of the best keyword candidates hybrid search needs: those it may
        re-rank, unless filters, or a date in the query (which lifts every memory of
        that period whatever its keyword rank), can reach past any fixed number."""
        if self._filtered(options) or keyword.query_periods(query):
            return None
        return keyword.HYBRID_RERANK_DEPTH

    def _keyword_depth(self, options: SearchOptions) -> int | None:
        """How many of keyword search's best candidates decide its results (None: all,
        when filters or the event-time order may reach past any fixed number)."""
        limit = options.max_results if options.max_results > 0 else self.max_results
        if limit <= 0 or self._filtered(options) or options.order_by_event_time:
            return None
        # Near-duplicates are dropped after ranking: keep room for them.
        return 3 * limit if options.deduplicate else limit

    async def vector_search(
        self, key: UserKey, query: str, options: SearchOptions | None = None
    ) -> list[Entry]:
        """Semantic search only (``search`` with mode "semantic"): score = the cosine
        similarity of query and memory embeddings, calibrated per embedder to a 0–1
        relevance (increasing with the cosine). ``options.similarity_threshold`` (if
        > 0) drops weaker matches; filters, kind fallback, order and dedup apply.
        Without an embedder or a store with vectors: one ConfigError."""
        self._check_search(key, query, options)
        await self._ready()
        if not self._semantic_ready():
            from .model import ConfigError

            raise ConfigError(
                f"semantic search needs an embedder and vectors; the {self.store.name} backend "
                "has none here: set an embedder, or search by keyword"
            )
        if not isinstance(query, str) or not query.strip():
            return []
        return await self._semantic_search(key, query, options or SearchOptions())

    def _semantic_ready(self) -> bool:
        """An embedder and a store that answers nearest-neighbour queries."""
        return self.is_vector_store and self.has_embedder

    @staticmethod
    def _check_search(key: UserKey, query: str, options: SearchOptions | None) -> None:
        validation.check_key(key)
        if isinstance(query, str) and query.strip():
            validation.check_query(query)
        validation.check_search_options(options)
        if options is not None and options.mode and options.mode not in SEARCH_MODES:
            from .model import InvalidMemoryError

            raise InvalidMemoryError(
                f"the search mode must be one of {', '.join(SEARCH_MODES)} (or empty for the default)"
            )

    def _dense_depth(self, options: SearchOptions) -> int:
        limit = options.max_results if options.max_results > 0 else self.max_results
        return max(keyword.HYBRID_DENSE_DEPTH, 5 * limit)

    def _filtered(self, options: SearchOptions) -> bool:
        return bool(options.kind or options.time_after is not None or options.time_before is not None)

    async def _query_vector(self, query: str) -> list[float]:
        """The query's embedding (``embed_query`` where the embedder tells queries apart)."""
        from .model import BackendError

        embedder = self.embedder
        vectors = await getattr(embedder, "embed_query", embedder.embed)([query])
        dimension = getattr(self.store, "dimension", None)
        if len(vectors) != 1 or (dimension and len(vectors[0]) != dimension):
            raise BackendError(
                f"the embedder {embedder.name} returned no {dimension}-dimensional vector for the query"
            )
        return vectors[0]

    async def _dense_candidates(
        self, key: UserKey, vector: Sequence[float], options: SearchOptions
    ) -> list[Entry]:
        """The store's nearest neighbours; every active memory when filters are set
        (they apply afterwards, so the nearest ones may all be filtered out)."""
        store: VectorStore = self.store  # type: ignore[assignment]
        depth = self._dense_depth(options)
        if self._filtered(options):
            depth = max(depth, await self.store.count(key))
        return await store.vector_candidates(key, vector, depth)

    async def _semantic_search(self, key: UserKey, query: str, options: SearchOptions) -> list[Entry]:
        vector = await self._query_vector(query.strip())
        dense = await self._dense_candidates(key, vector, options)
        calibration = keyword.calibration_for(self.embedder)
        return keyword.dense_results(dense, options, calibration=calibration, default_max=self.max_results)

    async def _hybrid_search(self, key: UserKey, query: str, options: SearchOptions) -> list[Entry]:
        query = query.strip()
        embedder = self.embedder
        embed_tokens = getattr(embedder, "embed_tokens", None)
        # The query's embedding (model work in a thread) and the keyword candidates
        # (store I/O) do not depend on each other: one waits while the other runs.
        vector, (keyword_entries, keyword_stats) = await asyncio.gather(
            self._query_vector(query),
            self._keyword_candidates(key, query, LEXICAL_SPACE, self._hybrid_keyword_depth(query, options)),
        )
        dense = await self._dense_candidates(key, vector, options)
        depth = self._dense_depth(options)
        everything = self._filtered(options) or len(dense) < depth
        # The relevance floor measures the query's background over all the user's
        # memories: when the store returned only the nearest ones, it needs their number.
        size = None if everything else await self.store.count(key)
        ranking = keyword.HybridRanking(
            keyword_entries,
            dense,
            query,
            dense_complete=everything,
            calibration=keyword.calibration_for(embedder),
            collection_size=size,
            keyword_stats=keyword_stats,
        )
        if embed_tokens is not None:
            targets = ranking.rerank_targets(options)
            if targets:
                token_vectors = await embed_tokens([query, *(e.memory.text for e in targets)])
                similarities = keyword.token_similarities(token_vectors[0], token_vectors[1:])
                ranking.set_token_similarities(
                    {entry.id: value for entry, value in zip(targets, similarities, strict=True)}
                )
        return ranking.results(options, default_max=self.max_results)

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
        self, key: UserKey, session_id: str, messages: Sequence[dict], *, force: bool = False
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

    # -- tools -----------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The agent-facing memory tools (reference §3.5–§3.6), built once."""
        if self._tools is None:
            from .tools import ToolSettings, build_tools

            self._tools = build_tools(self, self._tool_settings or ToolSettings(), self.auto_mode)
        return list(self._tools)
