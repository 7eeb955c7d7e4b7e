"""MemoryAPI: the memory service as its users see it (the runner, the tools,
the CLI, the MCP server, a library user's agent), as a typed protocol.

``MemoryService`` (engine/service.py) is the implementation; code that only
uses a service should name this protocol, so a fake or a wrapper can stand in
and the type checker holds both to the same surface. Read-only properties
here may be plain attributes of the implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .embedding import Embedder
    from .extraction import AutoMemory, ExtractionEvent, Extractor
    from .model import Entry, Metadata, SearchOptions, UpdateResult, UserKey
    from .service import MemoryService
    from .store import Store
    from .tools import Tool

__all__ = ["MemoryAPI"]


class MemoryAPI(Protocol):
    """Long-term memory for (app, user) pairs over one store (see ``MemoryService``)."""

    # -- what the service is -------------------------------------------------

    @property
    def store(self) -> Store: ...

    @property
    def soft_delete(self) -> bool:
        """Deletes leave tombstones that ``restore`` can undo."""

    @property
    def limit(self) -> int:
        """Maximum active memories per user (0: no limit)."""

    @property
    def max_results(self) -> int: ...

    @property
    def max_text_length(self) -> int: ...

    @property
    def search_mode(self) -> str:
        """How ``search`` ranks when the options name no mode (hybrid, semantic or keyword)."""

    @property
    def auto_mode(self) -> bool:
        """Memories are also made in the background from the conversation."""

    @property
    def extractor(self) -> Extractor | None: ...

    @property
    def auto(self) -> AutoMemory | None:
        """The background extraction workers (None without an extractor)."""

    @property
    def is_vector_store(self) -> bool: ...

    @property
    def has_embedder(self) -> bool: ...

    @property
    def embedder(self) -> Embedder:
        """A ConfigError for a service without an embedder (``has_embedder`` False)."""

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> MemoryAPI: ...

    async def close(self) -> None: ...

    # -- writes ------------------------------------------------------------------

    async def add(
        self,
        key: UserKey,
        text: str,
        topics: Iterable[str] | None = None,
        metadata: Metadata | None = None,
    ) -> Entry: ...

    async def update(
        self,
        key: UserKey,
        memory_id: str,
        text: str,
        topics: Iterable[str] | None = None,
        metadata: Metadata | None = None,
    ) -> UpdateResult: ...

    async def delete(self, key: UserKey, memory_id: str) -> None: ...

    async def restore(self, key: UserKey, memory_id: str) -> Entry: ...

    async def clear(self, key: UserKey) -> int: ...

    # -- reads -------------------------------------------------------------------

    async def get(self, key: UserKey, memory_id: str, *, include_deleted: bool = False) -> Entry: ...

    async def read(self, key: UserKey, limit: int = 0, *, include_deleted: bool = False) -> list[Entry]: ...

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int: ...

    async def search(self, key: UserKey, query: str, options: SearchOptions | None = None) -> list[Entry]: ...

    async def vector_search(
        self, key: UserKey, query: str, options: SearchOptions | None = None
    ) -> list[Entry]: ...

    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]: ...

    # -- auto extraction and tools -------------------------------------------------

    def enqueue_auto_memory_job(
        self,
        key: UserKey,
        session_id: str,
        messages: Sequence[Mapping[str, object]],
        *,
        force: bool = False,
    ) -> str: ...

    def add_extraction_listener(
        self, listener: Callable[[ExtractionEvent], object]
    ) -> Callable[[], None]: ...

    def tools(self) -> list[Tool]: ...


if TYPE_CHECKING:

    def _implements(service: MemoryService) -> MemoryAPI:
        """Never called: the type checker fails here if MemoryService drifts from the protocol."""
        return service
