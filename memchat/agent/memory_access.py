"""The UI's one door to the memories: what the TUI and the console may read and
change of the runner's user's memories, and nothing else.

The UI never holds the :class:`~memchat.engine.service.MemoryService` or a
store: it asks ``runner.memory`` (a :class:`MemoryAccess`), which scopes every
call to the runner's user. The service, its store and its extraction workers
stay below, so the UI cannot skip a scope check or the engine's one
retrieval path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memchat.engine.model import Entry, UserKey
    from memchat.engine.service import MemoryService


class MemoryAccess:
    """The memories of one user (the runner's ``key``) as the UI sees them."""

    def __init__(self, service: MemoryService, key: UserKey) -> None:
        self._service = service
        self._key = key

    # -- what the backend is -----------------------------------------------------
    @property
    def backend(self) -> str:
        """The backend's registry name (``sqlite``, ``redis``…)."""
        return self._service.store.name

    def describe(self) -> str:
        """One line on where the memories are kept (never a password)."""
        return self._service.store.describe()

    @property
    def soft_delete(self) -> bool:
        """Deleting leaves a tombstone that ``restore`` undoes."""
        return self._service.soft_delete

    # -- reading -------------------------------------------------------------------
    async def read(self, limit: int = 0, *, include_deleted: bool = False) -> list[Entry]:
        """Newest first; tombstones too with ``include_deleted``."""
        return await self._service.read(self._key, limit, include_deleted=include_deleted)

    async def search(self, query: str, max_results: int) -> list[Entry]:
        """The engine's one retrieval path in the service's mode (the memory_search tool's ranking)."""
        from memchat.engine.model import SearchOptions

        return await self._service.search(self._key, query, SearchOptions(max_results=max_results))

    async def count(self) -> int:
        """Active memories."""
        return await self._service.count(self._key)

    # -- changing ------------------------------------------------------------------
    async def delete(self, memory_id: str) -> None:
        await self._service.delete(self._key, memory_id)

    async def restore(self, memory_id: str) -> Entry:
        return await self._service.restore(self._key, memory_id)

    # -- background work -----------------------------------------------------------
    async def cancel_extraction(self) -> None:
        """Stop the background extraction now: a running job is cancelled, queued
        ones are dropped (closing the service later then has nothing to wait for)."""
        auto = self._service.auto  # None without background extraction
        if auto is not None:
            await auto.close(0)

    def warm_up(self) -> None:
        """Load what the first search would otherwise wait for (blocking: call it
        in a thread; see ``MemoryService.warm_up``)."""
        self._service.warm_up()


def load_backend_module(name: str) -> None:
    """Import backend ``name``'s module and driver (SQLAlchemy, redis…): the slow
    part of opening it, done in a thread before the first connection."""
    from backends import store_class

    store_class(name)
