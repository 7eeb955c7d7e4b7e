"""Which embedder made a store's vectors, and filling in the ones missing.

``MemoryService.open()`` calls :func:`prepare_vectors` on a store that keeps
vectors (every backend does): the store records the identity of the embedder
that made its vectors (``read_meta`` / ``write_meta`` under ``"embedder"``:
the embedder's ``identity``, else its ``name``, and its dimension, as JSON).

* When the recorded identity differs from the current embedder's (another
  model, or none recorded: a store made before vectors were tracked), every
  stored vector is stale: ``clear_vectors()`` forgets them and the new
  identity is recorded.
* Then every entry without a vector — any user, tombstones included (they
  may be restored) — is embedded in batches and written back through the
  user's atomic section, which re-reads the entry and writes the vector only
  if the text is still the one embedded: a concurrent update is never
  clobbered (it wrote its own vector, or leaves the entry for the next open).

Progress goes to an optional callback taking an :class:`EmbeddingProgress`
(plain or async), e.g. for the CLI's "Embedding 1,234 memories for semantic
search… 40%" line. A store whose index has a fixed dimension (sqlitevec,
pgvector, mysqlvec, chromadb) never gets here with another dimension: the
service's dimension check refuses first, in one sentence saying what to run.

The store methods used (all backends implement them)::

    async def read_meta(name: str) -> str | None
    async def write_meta(name: str, value: str) -> None
    async def clear_vectors() -> None
    async def count_missing_vectors() -> int
    async def entries_missing_vectors(limit: int) -> list[Entry]
    async def atomic(key, work)        # tx.get(id), tx.put(entry, vector)
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from .model import Entry, UserKey

__all__ = [
    "BACKFILL_BATCH",
    "META_EMBEDDER",
    "NO_EMBEDDER",
    "DoneOfTotal",
    "EmbeddingProgress",
    "ProgressCallback",
    "embedder_identity",
    "prepare_vectors",
    "supports_vectors",
]

#: The ``read_meta`` / ``write_meta`` name of the embedder identity.
META_EMBEDDER: Final = "embedder"
#: Texts embedded per call while filling in vectors.
BACKFILL_BATCH: Final = 64


class _NoEmbedder:
    """``MemoryService(store, embedder=NO_EMBEDDER)``: keyword search only —
    nothing is embedded, no model is loaded, no vectors are filled in."""

    _instance: _NoEmbedder | None = None

    def __new__(cls) -> _NoEmbedder:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_EMBEDDER"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NO_EMBEDDER"


NO_EMBEDDER: Final = _NoEmbedder()


class DoneOfTotal:
    """``percent`` and ``finished`` of a progress with ``done`` of ``total`` (the
    embedding and indexing progress here, and a migration's in portability.py)."""

    __slots__ = ()
    done: int
    total: int

    @property
    def percent(self) -> int:
        return 100 if self.total <= 0 else min(100, self.done * 100 // self.total)

    @property
    def finished(self) -> bool:
        return self.done >= self.total


@dataclass(frozen=True, slots=True)
class EmbeddingProgress(DoneOfTotal):
    """How far filling in vectors has got: ``done`` of ``total`` memories."""

    done: int
    total: int
    #: True when the embedder changed and every memory is embedded again.
    reembedding: bool = False

    #: What the header shows beside the percentage.
    label = "embedding"

    def message(self) -> str:
        """One line for a person, e.g. "Embedding 1,234 memories for semantic search… 40%"."""
        noun = "memory" if self.total == 1 else "memories"
        why = " (the embedding model changed)" if self.reembedding else ""
        return f"Embedding {self.total:,} {noun} for semantic search{why}… {self.percent}%"


@dataclass(frozen=True, slots=True)
class IndexingProgress(DoneOfTotal):
    """How far a store building its search indexes on open has got (a store made
    before them, or by a memchat that did not keep them): ``done`` of ``total``."""

    done: int
    total: int

    #: What the header shows beside the percentage.
    label = "indexing"

    def message(self) -> str:
        """One line for a person, e.g. "Indexing 1,234 memories for search… 40%"."""
        noun = "memory" if self.total == 1 else "memories"
        return f"Indexing {self.total:,} {noun} for search… {self.percent}%"


#: Any progress of ``done`` of ``total``: report_progress serves each kind.
_Progress = TypeVar("_Progress", bound=DoneOfTotal)

#: Called with each EmbeddingProgress or IndexingProgress (same shape); may be a
#: coroutine function.
ProgressCallback = Callable[[EmbeddingProgress | IndexingProgress], object]


def embedder_identity(embedder: Any) -> str:
    """What the store records about the embedder that made its vectors."""
    identity = getattr(embedder, "identity", None) or embedder.name
    return json.dumps({"identity": str(identity), "dimension": int(embedder.dimension)}, sort_keys=True)


_STORE_METHODS = (
    "read_meta",
    "write_meta",
    "clear_vectors",
    "count_missing_vectors",
    "entries_missing_vectors",
)


def supports_vectors(store: Any) -> bool:
    """The store declares vector search and has the bookkeeping methods above."""
    return bool(getattr(getattr(store, "capabilities", None), "vector_search", False)) and all(
        callable(getattr(store, m, None)) for m in _STORE_METHODS
    )


async def report_progress(progress: Callable[[_Progress], object] | None, state: _Progress) -> None:
    """Tell ``progress`` (a plain or async callable, or None) about ``state``
    (an embedding, indexing or migration progress)."""
    if progress is None:
        return
    result = progress(state)
    if inspect.isawaitable(result):
        await result


async def prepare_vectors(
    store: Any,
    embedder: Any,
    embed: Callable[[Sequence[str]], Awaitable[list[list[float]]]],
    *,
    progress: ProgressCallback | None = None,
    batch_size: int = BACKFILL_BATCH,
) -> int:
    """Make ``store``'s vectors those of ``embedder``: forget them if another
    embedder made them, then fill in every missing one (``embed`` turns texts
    into checked vectors). Returns how many vectors were written."""
    if not supports_vectors(store):
        return 0
    identity = embedder_identity(embedder)
    recorded = await store.read_meta(META_EMBEDDER)
    reembedding = False
    if recorded != identity:
        # Forget first, record second: a crash in between only repeats the forgetting.
        await store.clear_vectors()
        await store.write_meta(META_EMBEDDER, identity)
        reembedding = recorded is not None
    total = await store.count_missing_vectors()
    if total <= 0:
        return 0
    await report_progress(progress, EmbeddingProgress(0, total, reembedding))
    written = done = 0
    #: (app, user, id, text) already embedded once: never offered again, so an
    #: entry that stays without a vector (rewritten meanwhile) cannot loop.
    attempted: set[tuple[str, str, str, str]] = set()
    batch_size = max(1, int(batch_size))
    while True:
        found = await store.entries_missing_vectors(batch_size + len(attempted))
        batch = [e for e in found if (e.app, e.user, e.id, e.memory.text) not in attempted][:batch_size]
        if not batch:
            break
        attempted.update((e.app, e.user, e.id, e.memory.text) for e in batch)
        vectors = await embed([e.memory.text for e in batch])
        by_user: dict[UserKey, list[tuple[Entry, list[float]]]] = {}
        for entry, vector in zip(batch, vectors, strict=True):
            by_user.setdefault(entry.key, []).append((entry, vector))
        for key, items in by_user.items():
            written += len(await store.atomic(key, _write_back(items)))
        done += len(batch)
        if done < total:
            await report_progress(progress, EmbeddingProgress(done, total, reembedding))
    await report_progress(progress, EmbeddingProgress(total, total, reembedding))
    return written


def _write_back(items: list[tuple[Entry, list[float]]]) -> Callable[[Any], Awaitable[set[str]]]:
    """A section writing each vector whose entry still has the text it was made from."""

    async def work(tx: Any) -> set[str]:
        stored: set[str] = set()
        for entry, vector in items:
            current = await tx.get(entry.id)
            if current is None or current.memory.text != entry.memory.text:
                continue  # removed or rewritten meanwhile: its writer decides its vector
            await tx.put(current, vector)
            stored.add(entry.id)
        return stored

    return work
