"""The Chroma store's vector collection per user (backends/_chroma_user_vectors.py):
a search's nearest neighbours come from the user's own collection, with no filter
for Chroma to resolve; every write keeps it exactly the user's searchable
vectors at the index's version; anything that leaves it behind makes searches
filter the memories collection (still right) until a rebuild; a store of an
older layout gets the collections on open.

Against a real ``chroma run`` server, like tests/test_chromadb_backend.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from memchat.engine import BackendError, MemoryService, UserKey
from tests.conformance import vector_contract as contract
from tests.conformance.test_vectors import HashEmbedder

pytest.importorskip("chromadb", reason="chromadb is not installed: pip install 'memchat[chroma]'")

from backends import _chroma_search
from backends._chroma_index import INDEX_META, index_version
from backends._chroma_records import dense_filter
from backends._chroma_user_vectors import MARKER_ID
from backends.chromadb import ChromaStore
from tests.test_chromadb_backend import client, make_store, url  # noqa: F401 (fixtures)

ALICE, BOB = UserKey("app", "alice"), UserKey("app", "bob")


def _held(store: ChromaStore, key: UserKey) -> tuple[set[str], str]:
    """(the record IDs in the user's vector collection, its marker)."""
    collection = store._vector_collections._collection(key, create=False)
    if collection is None:
        return set(), ""
    ids = set(collection.get(include=[])["ids"])
    return ids - {MARKER_ID}, store._vector_collections.marker(key)


async def _searchable(store: ChromaStore, key: UserKey) -> set[str]:
    """The record IDs the memories collection's own filter finds for the user."""
    return set(await store.record_ids(dense_filter(key)))


async def _in_step(store: ChromaStore, key: UserKey) -> None:
    """The user's collection holds exactly their searchable vectors, at their index's version."""
    stats = await store._user_stats(key)
    assert stats is not None and stats.version
    ids, marker = _held(store, key)
    assert ids == await _searchable(store, key)
    assert marker == stats.version


def _count_queries(store: ChromaStore) -> dict[str, int]:
    """Counts the memories collection's (filtered) nearest-neighbour queries, with
    the kept matrix (backends/_chroma_matrix.py) off: it would answer instead."""
    store._matrices.read_later = lambda *args: None  # type: ignore[method-assign]
    collection = store._collection
    calls = {"filtered": 0}
    real = collection.query

    def query(**kwargs: Any) -> Any:
        calls["filtered"] += 1
        return real(**kwargs)

    collection.query = query
    return calls


async def _fill(store: ChromaStore, key: UserKey, n: int, start: int = 0) -> list[str]:
    entries = [
        (
            contract.entry(key, f"m{i:03d}", f"memory {i} of {key.user}", i),
            contract.vec(1, i / 10, i % 3, 0.2),
        )
        for i in range(start, start + n)
    ]
    await contract.put_all(store, key, entries)
    return [e.id for e, _ in entries]


async def test_a_search_asks_the_user_s_own_collection_and_ranks_by_cosine(make_store) -> None:  # noqa: F811
    store = await make_store()
    await _fill(store, ALICE, 12)
    await _fill(store, BOB, 5, start=100)
    calls = _count_queries(store)
    q = contract.vec(1, 0.45, 1, 0.2)
    found = await store.vector_candidates(ALICE, q, 5)
    assert calls["filtered"] == 0  # no filter for the server to resolve
    expected = sorted(
        (f"m{i:03d}" for i in range(12)),
        key=lambda mid: (
            -round(contract.cosine(contract.vec(1, int(mid[1:]) / 10, int(mid[1:]) % 3, 0.2), q), 6),
            mid,
        ),
    )
    assert contract.ids(found) == expected[:5]
    assert all(e.user == "alice" for e in found)
    # Each user's collection holds that user's vectors only.
    await _in_step(store, ALICE)
    await _in_step(store, BOB)
    assert len(_held(store, BOB)[0]) == 5


async def test_every_kind_of_write_keeps_the_collection_exact(make_store) -> None:  # noqa: F811
    store = await make_store()
    ids = await _fill(store, ALICE, 8)
    await _in_step(store, ALICE)

    async def changes(tx: Any) -> None:
        await tx.remove(ids[0])  # removed
        await tx.put(contract.entry(ALICE, ids[1], "tombstoned", 1, deleted=True))  # deleted
        await tx.put(contract.entry(ALICE, ids[2], "new vector", 2), contract.vec(0, 0, 1, 0))  # re-embedded
        await tx.put(contract.entry(ALICE, "plain", "no vector", 50))  # never embedded
        await tx.put(contract.entry(ALICE, ids[3], "text changed, vector kept", 3))  # vector kept

    await store.atomic(ALICE, changes)
    await _in_step(store, ALICE)
    held, _ = _held(store, ALICE)
    assert store.record_id(ALICE, ids[3]) in held and store.record_id(ALICE, "plain") not in held
    [hit] = await store.vector_candidates(ALICE, contract.vec(0, 0, 1, 0), 1)
    assert hit.id == ids[2] and hit.score == pytest.approx(1.0, abs=1e-5)
    assert await store.clear(ALICE, deleted_at=datetime.now(UTC)) == 7
    await _in_step(store, ALICE)
    assert _held(store, ALICE)[0] == set()
    assert await store.vector_candidates(ALICE, contract.vec(1), 3) == []


async def test_a_collection_left_behind_is_not_used_until_it_is_rebuilt(make_store) -> None:  # noqa: F811
    """A writer that does not keep the collections (an older memchat) leaves the
    marker behind: searches filter the memories collection and still see its
    write, this store's writes do not follow a collection it cannot vouch for,
    and opening the store after that writer (which records its layout) rebuilds it."""
    store = await make_store()
    await _fill(await make_store(), ALICE, 6)  # another store object: this one keeps no matrix
    # The older writer: the memory and the index as it keeps them, no vector collection.
    collections, store._vector_collections = store._vector_collections, None
    await contract.put_all(
        store, ALICE, [(contract.entry(ALICE, "old", "older writer", 90), contract.vec(0, 1))]
    )
    store._vector_collections = collections
    await store.write_meta(INDEX_META, index_version().rsplit(".", 1)[0] + ".5")
    calls = _count_queries(store)
    [hit] = await store.vector_candidates(ALICE, contract.vec(0, 1), 1)
    assert hit.id == "old" and calls["filtered"] == 1
    await _fill(store, ALICE, 1, start=7)  # does not follow: still behind
    stats = await store._user_stats(ALICE)
    assert _held(store, ALICE)[1] != stats.version
    [hit] = await store.vector_candidates(ALICE, contract.vec(0, 1), 1)
    assert hit.id == "old" and calls["filtered"] == 2
    told: list[Any] = []
    reopened = await make_store(opened=False)
    reopened.progress = told.append
    await reopened.open()
    assert [t for t in told if t.label == "indexing"][-1].finished
    await _in_step(reopened, ALICE)
    calls = _count_queries(reopened)
    [hit] = await reopened.vector_candidates(ALICE, contract.vec(0, 1), 1)
    assert hit.id == "old" and calls["filtered"] == 0


async def test_a_section_failing_at_the_collection_is_rebuilt_by_the_next_write(make_store) -> None:  # noqa: F811
    store = await make_store()
    await _fill(store, ALICE, 4)
    collections = store._vector_collections
    real = collections.write

    def failing(*args: Any) -> bool:
        raise ConnectionError("the server went away")

    collections.write = failing
    with pytest.raises(BackendError):
        await _fill(store, ALICE, 1, start=10)
    collections.write = real
    assert await store._user_stats(ALICE) is None  # marked: not to be trusted
    calls = _count_queries(store)
    found = await store.vector_candidates(ALICE, contract.vec(1, 1.0, 1, 0.2), 1)
    assert contract.ids(found) == ["m010"] and calls["filtered"] == 1
    await _fill(store, ALICE, 1, start=20)  # rebuilds the index and the collection
    await _in_step(store, ALICE)
    assert len(_held(store, ALICE)[0]) == 6
    found = await store.vector_candidates(ALICE, contract.vec(1, 1.0, 1, 0.2), 1)
    assert contract.ids(found) == ["m010"] and calls["filtered"] == 1


async def test_an_embedder_change_empties_the_collections_and_the_fill_in_refills_them(make_store) -> None:  # noqa: F811
    store = await make_store(dimension=384)
    async with MemoryService(store, embedder=HashEmbedder()) as svc:
        for i in range(5):
            await svc.add(ALICE, f"Alice keeps fact number {i}")
    await store.open()
    await _in_step(store, ALICE)
    assert len(_held(store, ALICE)[0]) == 5
    await store.clear_vectors()  # what opening with another embedder does first
    await _in_step(store, ALICE)
    assert _held(store, ALICE)[0] == set()
    async with MemoryService(store, embedder=HashEmbedder()):  # opening fills in every vector
        pass
    await store.open()
    await _in_step(store, ALICE)
    assert len(_held(store, ALICE)[0]) == 5


async def _eventually(condition: Any, failure: str) -> None:
    """Wait up to 5 s for ``condition()`` (a background read finishing)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(failure)


async def _remove(tx: Any, memory_id: str) -> None:
    await tx.remove(memory_id)


async def test_a_large_user_keeps_no_matrix_and_is_ranked_by_their_own_collection(
    make_store,  # noqa: F811
    monkeypatch,
) -> None:
    """Past ``ENTRIES_KEPT_UP_TO`` memories no search or listing starts the read of
    the user's vectors (9 s at 100k, slowing every search beside it): every search
    asks the user's own collection, and ranks by cosine as the kept matrix would.
    A user under the bound still gets their matrix; and a large user whose
    collection is left behind (an older writer) gets it too, rather than filtered
    queries of the memories collection on every search. A matrix kept from before
    the user crossed the bound is let go once another writer moves them on."""
    store = await make_store()
    await _fill(store, ALICE, 11)
    await _fill(store, BOB, 3, start=50)
    # A matrix kept while Alice was under the bound...
    await store.vector_candidates(ALICE, contract.vec(1, 0, 0, 0), 1)
    await _eventually(lambda: store._matrices.known(ALICE), "the user's vectors were never kept")
    # ...and then another store object (another process) writes: that matrix is of
    # an older version, and past the bound it is let go, not read again.
    await _fill(await make_store(), ALICE, 1, start=11)
    monkeypatch.setattr(_chroma_search, "ENTRIES_KEPT_UP_TO", 5)
    await store.vector_candidates(ALICE, contract.vec(1, 0, 0, 0), 1)
    assert not store._matrices.known(ALICE)
    await store.atomic(ALICE, lambda tx: _remove(tx, "m011"))
    collection = store._collection
    real_get, real_query = collection.get, collection.query
    vector_reads: list[Any] = []

    def get(**kwargs: Any) -> Any:
        if "embeddings" in (kwargs.get("include") or []):
            vector_reads.append(kwargs.get("where"))
        return real_get(**kwargs)

    def query(**kwargs: Any) -> Any:
        vector_reads.append(kwargs.get("where"))
        return real_query(**kwargs)

    collection.get, collection.query = get, query
    q = contract.vec(1, 0.45, 1, 0.2)
    expected = sorted(
        (f"m{i:03d}" for i in range(11)),
        key=lambda mid: (
            -round(contract.cosine(contract.vec(1, int(mid[1:]) / 10, int(mid[1:]) % 3, 0.2), q), 6),
            mid,
        ),
    )
    assert len(await store.list(ALICE, limit=3)) == 3  # a listing, as the chat's preload does
    for _ in range(3):
        assert contract.ids(await store.vector_candidates(ALICE, q, 6)) == expected[:6]
        await asyncio.sleep(0.1)  # time for a background read to start, if one were asked for
    assert not store._matrices.known(ALICE) and not store._matrices.reading(ALICE)
    assert vector_reads == []  # neither a read of the vectors nor a filtered query

    # Bob (3 memories) is under the bound: his searches rank a kept matrix.
    await store.vector_candidates(BOB, q, 2)
    await _eventually(lambda: store._matrices.known(BOB), "the small user's vectors were never kept")

    # Alice's collection left behind (its marker is not her version): her
    # searches filter the memories collection, and her matrix is read and kept.
    store._vector_collections._collection(ALICE, create=False).upsert(
        ids=[MARKER_ID], embeddings=[contract.vec(1, 0, 0, 0)], metadatas=[{"version": "older"}]
    )
    store._vector_versions.clear()
    assert contract.ids(await store.vector_candidates(ALICE, q, 6)) == expected[:6]
    stats = await store._user_stats(ALICE)
    await _eventually(
        lambda: store._matrices.at(ALICE, stats.version) is not None,
        "the large user's vectors were not kept with their collection left behind",
    )
    assert contract.ids(await store.vector_candidates(ALICE, q, 6)) == expected[:6]
