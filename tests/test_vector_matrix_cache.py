"""The stores that rank vectors in numpy over a cached matrix (sqlite, mysql,
mysqlvec's BLOB column, postgres, redis) keep each user's matrix across this process's own writes:
a write moves the cached matrix along instead of making the next search read
every vector again, and the ranking equals a fresh read's; another process's
write is still seen (the user's version in the index statistics moves)."""

from __future__ import annotations

import itertools

import pytest

from memchat.engine import MemoryService, UserKey
from tests.conformance.harness import HARNESSES
from tests.conformance.test_vectors import HashEmbedder

KEY = UserKey("matrix-app", "matrix-user")
WORDS = [
    "cat",
    "tea",
    "Berlin",
    "nurse",
    "river",
    "cello",
    "marathon",
    "Hamburg",
    "sofa",
    "café",
    "engineer",
    "mountain",
]


@pytest.fixture(params=["sqlite", "mysql", "postgres", "redis"])
def harness(request: pytest.FixtureRequest, tmp_path):
    return HARNESSES[request.param](tmp_path)


async def _signature(store) -> object:
    """What the store's next search will check its cached matrix against."""
    if store.name == "redis":
        client = await store._connected()
        return (store.dimension, await client.get(store.keys_for(KEY).version))
    async with store.engine.connect() as conn:
        return store._matrix_signature(await store.keyword_index.signature(conn, KEY))


async def _nearest(store, query: str, embedder: HashEmbedder) -> list[tuple[str, float]]:
    [vector] = await embedder.embed([query])
    return [(e.id, round(e.score, 6)) for e in await store.vector_candidates(KEY, vector, 8)]


async def test_own_writes_move_the_cached_matrix_along(harness) -> None:
    embedder = HashEmbedder()
    svc = MemoryService(harness.make_store(), embedder=embedder, soft_delete=True)
    entries = [await svc.add(KEY, f"Alice likes {a} and {b}") for a, b in itertools.pairwise(WORDS)]
    store = svc.store
    await _nearest(store, "cat tea", embedder)  # the matrix is cached now

    await svc.add(KEY, "Alice adopted a cat")
    await svc.update(KEY, entries[0].id, "Alice likes mountain tea")
    await svc.delete(KEY, entries[1].id)  # a tombstone leaves the ranking
    assert store._matrices._items[KEY][0] == await _signature(store)  # moved along, not dropped

    fresh = harness.make_store()  # another store object: reads every vector
    try:
        for query in ("cat", "mountain tea", "Berlin nurse", "cello"):
            assert await _nearest(store, query, embedder) == await _nearest(fresh, query, embedder)
        # A write through the other object (another process, as far as `store` knows) is seen.
        other = MemoryService(fresh, embedder=embedder)
        added = await other.add(KEY, "Alice has a second cat, a cat")
        assert added.id in [i for i, _ in await _nearest(store, "cat cat", embedder)]
    finally:
        await fresh.close()
    await svc.close()
