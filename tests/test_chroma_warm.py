"""A large Chroma user's commonest terms read ahead of their searches
(``ChromaKeywordIndex.warm``): past ``ENTRIES_KEPT_UP_TO`` memories, the first
listing or search of the user at a version reads the shards of their commonest
terms in the background, so the searches after it read only their rarer terms,
and rank as they would have.

Against a real ``chroma run`` server, like tests/test_chromadb_backend.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from memchat.engine import MemoryService

pytest.importorskip("chromadb", reason="chromadb is not installed: pip install 'memchat[chroma]'")

from backends import _chroma_search
from backends import _chroma_shards as shards
from backends.chromadb import ChromaStore
from tests.conformance import vector_contract as contract
from tests.conformance.test_vectors import HashEmbedder
from tests.test_chroma_user_vectors import _eventually
from tests.test_chromadb_backend import (  # noqa: F401 (fixtures)
    _SPLIT_TEXTS,
    _beside_the_in_memory_store,
    _count_reads,
    _keyword,
    _keyword_results,
    client,
    make_store,
    url,
)

KEY = contract.KEY


def _warming(store: ChromaStore) -> bool:
    return store._background.running(("postings", KEY))


def _warmed(store: ChromaStore) -> bool:
    """The user's shards at their current version were read ahead, and the read is done."""
    kept = store._index.shards._items.get(KEY)
    return kept is not None and kept.warmed and kept.size > 0 and not _warming(store)


@pytest.fixture
def large(monkeypatch) -> None:
    """40 memories make a large user, whose common terms split into many shards."""
    monkeypatch.setattr(shards, "SPLIT_AT", 4)
    monkeypatch.setattr(_chroma_search, "ENTRIES_KEPT_UP_TO", 5)


async def test_a_listing_reads_the_commonest_terms_ahead_of_the_searches(make_store, large) -> None:  # noqa: F811
    """After a listing, a search of the commonest terms asks only for the
    statistics and the terms' roots, and every search ranks as the in-memory store."""
    async with _beside_the_in_memory_store(await make_store(dimension=384)) as (_, reference, _added):
        store = await make_store(dimension=384)  # another process: nothing kept yet
        async with MemoryService(store, embedder=HashEmbedder(), limit=0) as svc:
            asked = _count_reads(store)
            assert len(await svc.read(KEY, 3)) == 3  # as the chat's preload and memory panel do
            await _eventually(lambda: _warmed(store), "the commonest terms were not read ahead")
            asked.clear()
            assert await _keyword(svc, "alice") == await _keyword(reference, "alice")
            assert await _keyword(svc, "note") == await _keyword(reference, "note")
            assert asked == [2, 2]  # per search the statistics and the root: no shard
            assert await _keyword_results(svc) == await _keyword_results(reference)


async def test_the_read_ahead_is_once_per_version_and_again_after_another_writer(
    make_store,  # noqa: F811
    large,
) -> None:
    """A search starts no read ahead (beside a new process's first searches it
    slowed them); a listing does, once per version: a write of this store carries
    what was read (less what it wrote) to its version, and after a write of another
    store object (another process) the next listing reads ahead again, at the new
    version. Searches rank as the in-memory store throughout."""
    async with _beside_the_in_memory_store(await make_store(dimension=384)) as (other, reference, _added):
        store = await make_store(dimension=384)
        async with MemoryService(store, embedder=HashEmbedder(), limit=0) as svc:
            starts: list[object] = []
            start = store._background.start
            store._background.start = lambda *args: (starts.append(args[0]), start(*args))  # type: ignore[method-assign]
            assert await _keyword(svc, "tea") == await _keyword(reference, "tea")
            assert starts == [] and not store._index.shards._items[KEY].warmed
            await svc.read(KEY, 3)
            await _eventually(lambda: _warmed(store), "the listing did not read ahead")
            await svc.read(KEY, 3)
            assert starts == [("postings", KEY)]
            assert await _keyword_results(svc) == await _keyword_results(reference)

            await svc.add(KEY, "Alice drinks tea in Porto note 41")
            await reference.add(KEY, "Alice drinks tea in Porto note 41")
            await svc.read(KEY, 3)
            asked = _count_reads(store)
            assert await _keyword(svc, "alice") == await _keyword(reference, "alice")
            assert asked == [2, 2]  # the one shard of "alice" the add wrote, and the statistics
            assert starts == [("postings", KEY)]

            await other.add(KEY, "Alice has a cat in Porto note 42")
            await reference.add(KEY, "Alice has a cat in Porto note 42")
            await svc.read(KEY, 3)
            assert starts == [("postings", KEY)] * 2
            await _eventually(lambda: _warmed(store), "the listing after another writer did not read ahead")
            asked.clear()
            assert await _keyword(svc, "alice") == await _keyword(reference, "alice")
            assert asked == [2]
            assert await _keyword_results(svc) == await _keyword_results(reference)


async def test_a_user_under_the_bound_is_not_read_ahead(make_store, monkeypatch) -> None:  # noqa: F811
    """A smaller user's searches read few shards: nothing is read ahead for them."""
    monkeypatch.setattr(shards, "SPLIT_AT", 4)
    store = await make_store(dimension=384)
    async with MemoryService(store, embedder=HashEmbedder(), limit=0) as svc:
        for text in _SPLIT_TEXTS[:20]:
            await svc.add(KEY, text)
        await svc.read(KEY, 3)
        assert await _keyword(svc, "alice")
        assert not _warming(store)
        assert not store._index.shards._items[KEY].warmed


async def test_closing_the_store_stops_a_read_ahead_under_way(make_store, large) -> None:  # noqa: F811
    """A short-lived command lists and exits: closing the store tells the read
    ahead's worker thread to stop, rather than leaving it to read on."""
    async with _beside_the_in_memory_store(await make_store(dimension=384)):
        store = await make_store(dimension=384)
        told: list[Any] = []

        def warm(key: Any, stats: Any, user: Any, stopped: threading.Event, pause: Any = None) -> int:
            told.append(stopped)
            stopped.wait(10)  # a read of many records, until told to stop
            return 0

        store._index.warm = warm  # type: ignore[method-assign]
        await MemoryService(store, embedder=HashEmbedder(), limit=0).read(KEY, 3)
        await _eventually(lambda: told, "the listing did not start the read ahead")
        await store.close()
        assert told[0].is_set()
        assert not _warming(store)
