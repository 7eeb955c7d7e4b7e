"""The Store protocol every backend implements, and what each one declares.

The engine owns this seam: backends (``backends/``) implement it and import it
from here, the engine never imports a backend. A store is storage and
retrieval for one backend, scoped by (app, user). It knows nothing of IDs,
ranking, tools or the update state machine: those live once in the engine.
What a store must offer is an *atomic section* per user (``atomic``), in which
the engine reads and writes entries and which either commits whole or changes
nothing — a DB transaction, a Redis WATCH/MULTI, or a lock, whatever the
backend has.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from .model import Entry, UserKey

if TYPE_CHECKING:
    from .search.candidates import KeywordPlanner
    from .search.index import KeywordStats
    from .vectors import ProgressCallback

__all__ = [
    "Capabilities",
    "IndexBuildingStore",
    "KeywordIndexStore",
    "Store",
    "Transaction",
    "VectorStore",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store can do natively; the engine never pretends otherwise."""

    #: Can return nearest neighbours for an embedding (``vector_candidates``).
    vector_search: bool = False
    #: Keeps an inverted index and statistics for keyword search, written with each
    #: change (memchat/engine/search/index.py): it answers
    #: ``indexed_keyword_candidates(key, space, terms, planner=None) -> (entries,
    #: KeywordStats | None)`` with the memories holding a term instead of every
    #: memory — with a ``planner`` (search/candidates.py), only the best-ranked few
    #: hundred of them, and the statistics carry the document frequencies and the
    #: rank cutoff.
    native_keyword_search: bool = False
    #: Finds the memories whose event_time falls in given periods without reading
    #: the others (``memories_in_periods``, ``PeriodStore``): a hybrid search
    #: naming a date then reads a bounded number of keyword holders, not all.
    event_time_lookup: bool = False
    #: ``atomic`` is a real transaction (all-or-nothing across processes).
    transactions: bool = False
    #: Memories survive a process restart.
    persistent: bool = False
    #: Several processes (or machines) may share the same memories safely.
    multi_process: bool = False


@runtime_checkable
class Transaction(Protocol):
    """The reads and writes allowed inside ``Store.atomic`` for one user."""

    async def get(self, memory_id: str) -> Entry | None:
        """The entry with this ID for the section's user, tombstones included."""

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        """Insert or fully replace an entry (``deleted_at`` included).

        ``vector`` is the embedding of ``entry.memory.text`` (vector stores
        only; others ignore it). ``None`` keeps the embedding already stored
        for this ID — the engine passes one whenever the text is new."""

    async def remove(self, memory_id: str) -> None:
        """Delete an entry for good; absent IDs are ignored."""

    async def count_active(self) -> int:
        """Number of the user's entries that are not tombstones."""


@runtime_checkable
class Store(Protocol):
    """Storage for memories. All methods are scoped by ``key``."""

    #: Registry name, e.g. ``"sqlite"``.
    name: str
    capabilities: Capabilities

    async def open(self) -> None:
        """Connect and create the schema; raise ``BackendError`` with a clear message."""

    async def close(self) -> None: ...

    def describe(self) -> str:
        """One line for a person: backend and location, never a password."""

    async def atomic(self, key: UserKey, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """Run ``work`` so that it commits whole or not at all, serialised against
        every other writer of this user (in any process). ``work`` may be run
        more than once by optimistic stores, so it must act only through the
        transaction. An exception from ``work`` rolls back and propagates."""

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        """The entry, tombstones included, or None."""

    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        """Newest first: updated_at desc, created_at desc, id asc. ``limit <= 0``: all."""

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int: ...

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        """Tombstone every active entry (``deleted_at`` given) or delete every
        entry of the user for good (``None``). Returns how many were affected."""

    # ``builtins.list`` below: inside this class ``list`` is the method above.
    async def users(self) -> builtins.list[UserKey]:
        """Every (app, user) with at least one entry (tombstones count), sorted by
        (app, user): what export and migration walk through."""

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, builtins.list[float]]:
        """The stored embeddings of those of ``ids`` that have one (tombstones
        included), so a copy made with the same embedder need not embed again."""

    async def keyword_candidates(self, key: UserKey, query: str) -> builtins.list[Entry]:
        """Active entries that keyword search should score. The engine computes
        IDF over this set, so this returns them all; a store with
        ``native_keyword_search`` is asked ``indexed_keyword_candidates`` instead
        (returning ``(every active entry, None)`` while its index is not ready)."""


@runtime_checkable
class VectorStore(Store, Protocol):
    """A store with ``capabilities.vector_search``: it keeps one embedding per
    entry and returns nearest neighbours. Ranking and fusion stay in the engine.
    The bookkeeping methods let the engine keep the vectors its embedder's
    (engine/vectors.py)."""

    #: Embedding dimension of the index (set at construction, checked at open:
    #: an existing index of another dimension is a BackendError naming both).
    dimension: int
    #: True when the index's dimension is set when it is made (the embedder must
    #: match it); False when the store takes the embedder's dimension.
    fixed_dimension: bool

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> builtins.list[Entry]:
        """Up to ``k`` active entries of the user nearest to ``vector`` by cosine,
        best first, each with ``score`` = cosine similarity (1 − cosine distance)."""

    async def read_meta(self, name: str) -> str | None:
        """A value the store keeps for the engine (e.g. which embedder made its vectors)."""

    async def write_meta(self, name: str, value: str) -> None: ...

    async def clear_vectors(self) -> None:
        """Forget every stored vector (they were made by another embedder)."""

    async def count_missing_vectors(self) -> int: ...

    async def entries_missing_vectors(self, limit: int) -> builtins.list[Entry]:
        """Up to ``limit`` entries of any user (tombstones included) without a vector."""


class KeywordIndexStore(Protocol):
    """A store with ``capabilities.native_keyword_search`` (see ``Capabilities``)."""

    async def indexed_keyword_candidates(
        self, key: UserKey, space: str, terms: Sequence[str], planner: KeywordPlanner | None = None
    ) -> tuple[list[Entry], KeywordStats | None]:
        """The memories holding one of ``terms`` in ``space``, and the statistics
        (None while the index is not ready); their ``count`` is the user's active
        count, as ``count`` gives it (hybrid search reads no second count)."""


class PeriodStore(Protocol):
    """A store with ``capabilities.event_time_lookup`` (see ``Capabilities``)."""

    async def memories_in_periods(
        self, key: UserKey, periods: Sequence[tuple[datetime, datetime]], limit: int
    ) -> list[Entry] | None:
        """The user's active memories whose event_time lies in one of ``periods``
        (each [start, end), aware datetimes), any order; None when more than
        ``limit`` do (the caller then treats every memory as possibly in them)."""


class IndexBuildingStore(Protocol):
    """A store that may build its keyword index on open says how far it got."""

    progress: ProgressCallback | None
