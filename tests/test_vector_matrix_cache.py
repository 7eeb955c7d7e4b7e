"""The stores that rank vectors in numpy over a cached matrix (sqlite, sqlitevec, mysql,
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


@pytest.fixture(params=["sqlite", "sqlitevec", "mysql", "postgres", "redis"])
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


async def test_a_large_matrix_is_ranked_while_the_event_loop_runs_on() -> None:
    """At many thousand memories the product takes tens of milliseconds: it runs in
    a worker thread, so a TUI (or the search's keyword half) is not held up, and
    it ranks exactly as on the loop. A small matrix is ranked at once (no hand-over)."""
    import asyncio

    import numpy as np

    from backends._vectors import OFF_LOOP_FROM, UserMatrix

    rng = np.random.default_rng(7)
    dimension = 64
    rows = OFF_LOOP_FROM // dimension + 10
    ids = [f"m{i:06d}" for i in range(rows)]
    vectors = rng.standard_normal((rows, dimension))
    large = UserMatrix.from_vectors(zip(ids, vectors, strict=True), dimension)
    small = UserMatrix.from_vectors(zip(ids[:50], vectors[:50], strict=True), dimension)
    query = rng.standard_normal(dimension).astype(np.float32)
    query /= np.linalg.norm(query)

    async def ran_meanwhile(rank) -> tuple[bool, object]:
        ticked = asyncio.Event()
        ticker = asyncio.get_running_loop().call_soon(ticked.set)
        try:
            result = await rank
            return ticked.is_set(), result
        finally:
            ticker.cancel()

    moved, best = await ran_meanwhile(large.nearest_soon(query, 25))
    assert moved and best == large.nearest(query, 25)
    moved, reach = await ran_meanwhile(large.reaching_soon(query, 25))
    assert moved and reach == large.reaching(query, 25)
    moved, best = await ran_meanwhile(small.nearest_soon(query, 5))
    assert not moved and best == small.nearest(query, 5)


def test_adds_fill_room_after_the_rows_and_leave_every_matrix_handed_out_as_it_was() -> None:
    """A write that only adds memories puts their rows after the cached ones, in
    room kept for them (at 100k memories an add copied all 150 MB of rows, 40 ms):
    a matrix a search took before the write is never changed under it, every
    matrix ranks as one built afresh from the same vectors, and updates and
    removals after many adds still do."""
    import numpy as np

    from backends._vectors import MatrixCache, UserMatrix

    rng = np.random.default_rng(3)
    dimension = 8
    vectors = {f"m{i:03d}": rng.standard_normal(dimension).astype(np.float32) for i in range(100)}
    query = rng.standard_normal(dimension).astype(np.float32)
    query /= np.linalg.norm(query)
    cache = MatrixCache()
    cache.put("user", 0, UserMatrix.from_vectors(vectors.items(), dimension))

    def ranked(matrix: UserMatrix) -> list[tuple[str, float]]:
        return [(i, round(s, 5)) for i, s in matrix.nearest(query, 15)]

    def fresh() -> list[tuple[str, float]]:
        return ranked(UserMatrix.from_vectors(sorted(vectors.items()), dimension))

    handed_out = []
    for step in range(1, 80):  # past the room the first add keeps
        added = {
            f"n{step:03d}-{j}": rng.standard_normal(dimension).astype(np.float32) for j in range(step % 3 + 1)
        }
        cache.advance("user", step - 1, step, added, set())
        vectors.update(added)
        matrix = cache.get("user", step)
        assert matrix is not None and ranked(matrix) == fresh()
        handed_out.append((matrix, matrix.matrix.copy(), list(matrix.ids)))
    for matrix, rows, ids in handed_out:
        assert np.array_equal(matrix.matrix, rows) and matrix.ids == ids
    assert len({id(matrix.buffer) for matrix, _, _ in handed_out}) <= 4  # room reused, not copied per add

    changed = {"m005": rng.standard_normal(dimension).astype(np.float32), "n200": query * 3}
    cache.advance("user", 79, 80, changed, {"m007", "n010-0"})
    vectors.update(changed)
    del vectors["m007"], vectors["n010-0"]
    matrix = cache.get("user", 80)
    assert matrix is not None and ranked(matrix)[0][0] == "n200" and ranked(matrix) == fresh()
    cache.advance("user", 80, 81, {"n201": query}, set())
    vectors["n201"] = query
    assert ranked(cache.get("user", 81)) == fresh()
    for matrix, rows, ids in handed_out:
        assert np.array_equal(matrix.matrix, rows) and matrix.ids == ids
