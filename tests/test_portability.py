"""Engine-level behaviour of memchat/engine/portability.py that is not per backend
(tests/conformance/test_portability.py runs the rest on all nine)."""

from __future__ import annotations

from typing import Any

import pytest

from backends import create
from memchat.engine import BackendError, MemoryService, UserKey
from memchat.engine.portability import export_lines, import_lines, migrate
from tests.conformance.test_vectors import HashEmbedder

KEY = UserKey("app", "alice")


class FlakyStore:
    """The in-process store, whose write sections fail ``failures`` times first,
    as a server restart in the middle of a long migration does."""

    def __init__(self, failures: int) -> None:
        self.inner = create("inmemory")
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def atomic(self, key: UserKey, work: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise BackendError("the server closed the connection")
        return await self.inner.atomic(key, work)


async def _source() -> Any:
    svc = MemoryService(create("inmemory"), embedder=HashEmbedder(), limit=0)
    for i in range(5):
        await svc.add(KEY, f"Alice fact number {i}")
    return svc.store


async def test_a_lost_connection_during_a_migration_is_retried_and_nothing_is_written_twice(
    monkeypatch,
) -> None:
    monkeypatch.setattr("memchat.engine.portability.RETRY_PAUSE_S", 0.0)
    source = await _source()
    target = MemoryService(FlakyStore(failures=2), embedder=HashEmbedder(), limit=0)  # type: ignore[arg-type]
    report = await migrate(source, target, batch_size=2)
    assert report.verified and report.copy.added == 5
    copied = [line async for line in export_lines(target.store)]
    assert copied == [line async for line in export_lines(source)]


async def test_a_store_that_stays_down_ends_the_migration_with_its_error(monkeypatch) -> None:
    monkeypatch.setattr("memchat.engine.portability.RETRY_PAUSE_S", 0.0)
    source = await _source()
    target = MemoryService(FlakyStore(failures=99), embedder=HashEmbedder(), limit=0)  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="closed the connection"):
        await migrate(source, target)
    assert await source.count(KEY) == 5


async def test_a_file_of_a_newer_version_is_refused_whole() -> None:
    from memchat.engine.portability import FileError

    svc = MemoryService(create("inmemory"), embedder=HashEmbedder(), limit=0)
    with pytest.raises(FileError, match="upgrade memchat"):
        await import_lines(svc, ['{"format": "memchat-memories", "version": 2}', "{}"])
    assert await svc.store.users() == []
