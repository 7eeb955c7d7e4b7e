"""The Store protocol every backend implements, and what each one declares.

A store is storage and retrieval for one backend, scoped by (app, user). It
knows nothing of IDs, ranking, tools or the update state machine: those live
once in ``memchat.engine``. What a store must offer is an *atomic section*
per user (``atomic``), in which the engine reads and writes entries and which
either commits whole or changes nothing — a DB transaction, a Redis
WATCH/MULTI, or a lock, whatever the backend has.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from memchat.engine.model import Entry, UserKey

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

    async def users(self) -> list[UserKey]:
        """Every (app, user) with at least one entry (tombstones count), sorted by
        (app, user): what export and migration walk through."""

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored embeddings of those of ``ids`` that have one (tombstones
        included), so a copy made with the same embedder need not embed again."""

    async def keyword_candidates(self, key: UserKey, query: str) -> list[Entry]:
        """Active entries that keyword search should score. The engine computes
        IDF over this set, so this returns them all; a store with
        ``native_keyword_search`` is asked ``indexed_keyword_candidates`` instead
        (returning ``(every active entry, None)`` while its index is not ready)."""


#: Seconds a store waits for its server (connecting, each call, a lock wait)
#: before the call fails: every backend's default (``--timeout``, MEMCHAT_TIMEOUT).
DEFAULT_TIMEOUT_S = 10.0


def resolve_timeout(timeout: float | None) -> float:
    """The operation timeout in seconds: ``timeout``, or the 10 s default."""
    from memchat.engine.model import ConfigError

    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ConfigError(f"the timeout must be a positive number of seconds such as 10, not {timeout!r}")
    return float(timeout)


def timeout_message(server: str, address: str, timeout: float) -> str:
    """The one sentence for a server that did not answer in time."""
    return (
        f"the {server} at {address} did not answer within {timeout:g} s "
        "(it is stopped, overloaded or unreachable): check it, or raise --timeout"
    )


def abort_socket(fd: int) -> None:
    """Shut a connected socket down (both ways) without closing its descriptor,
    which stays its owner's: a read pending on it returns end-of-file at once,
    so the driver fails promptly with its own "connection lost" error."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


@contextlib.asynccontextmanager
async def bounded_lock(lock: asyncio.Lock, timeout: float, what: str) -> AsyncIterator[None]:
    """Hold ``lock``, waiting at most ``timeout`` seconds for it; ``what`` ends
    the BackendError ("… waited more than 10 s for {what}")."""
    from memchat.engine.model import BackendError

    try:
        async with asyncio.timeout(timeout):
            await lock.acquire()
    except TimeoutError:
        raise BackendError(
            f"waited more than {timeout:g} s for {what}: try again, or raise --timeout"
        ) from None
    try:
        yield
    finally:
        lock.release()


#: The offline embedder's (all-MiniLM-L6-v2) dimension: every vector store's default.
DEFAULT_VECTOR_DIMENSION = 384


def resolve_dimension(dimension: int | None, env: Mapping[str, str], variable: str) -> int:
    """The index dimension: the argument, else ``env[variable]``, else 384."""
    from memchat.engine.model import ConfigError

    if dimension is None and env.get(variable):
        try:
            dimension = int(env[variable])
        except ValueError:
            raise ConfigError(f"{variable} must be a whole number such as 384") from None
    dimension = DEFAULT_VECTOR_DIMENSION if dimension is None else int(dimension)
    if dimension <= 0:
        raise ConfigError("the vector dimension must be a positive number such as 384")
    return dimension


def checked_vector(vector: Sequence[float], dimension: int) -> list[float]:
    """``vector`` as floats, or a BackendError if it has the wrong dimension
    or NaN/infinite values (which would poison every later search)."""
    from memchat.engine.model import BackendError

    values = [float(x) for x in vector]
    if len(values) != dimension:
        raise BackendError(
            f"embedding dimension mismatch: expected {dimension}, got {len(values)}: "
            f"use an embedder with {dimension} dimensions or configure the store for {len(values)}"
        )
    if not all(math.isfinite(x) for x in values):
        raise BackendError("the embedder returned a vector with NaN or infinite values; nothing was stored")
    return values


@runtime_checkable
class VectorStore(Store, Protocol):
    """A store with ``capabilities.vector_search``: it keeps one embedding per
    entry and returns nearest neighbours. Ranking and fusion stay in the engine."""

    #: Embedding dimension of the index (set at construction, checked at open:
    #: an existing index of another dimension is a BackendError naming both).
    dimension: int

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` active entries of the user nearest to ``vector`` by cosine,
        best first, each with ``score`` = cosine similarity (1 − cosine distance)."""
