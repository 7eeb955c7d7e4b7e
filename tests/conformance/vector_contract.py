"""What every vector store must do with the vectors it is given, checked with
small hand-made vectors (a store needs vectors, not text), so each check knows
the exact cosine it expects. test_vector_contract.py runs the checks on
every vector backend; the backend test modules use the helpers.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from backends.base import Store, VectorStore
from memchat.engine import BackendError, MemoryService, SearchOptions, UserKey
from memchat.engine.model import Entry, Memory

DIM = 8
KEY = UserKey("memory-chat", "alice")
OTHER = UserKey("memory-chat", "bob")
T0 = datetime(2025, 1, 1, tzinfo=UTC)

MakeStore = Callable[..., Awaitable[Store]]


def vec(*components: float) -> list[float]:
    """A DIM-dimension vector starting with ``components``, L2-normalised."""
    values = [*components, *[0.0] * (DIM - len(components))]
    norm = math.sqrt(sum(x * x for x in values))
    return [x / norm for x in values]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def entry(key: UserKey, memory_id: str, text: str, n: int = 0, *, deleted: bool = False) -> Entry:
    when = T0 + timedelta(seconds=n)
    return Entry(memory_id, key.app, key.user, Memory(text), when, when, when if deleted else None)


async def put_all(store: Store, key: UserKey, items: Sequence[tuple[Entry, Sequence[float] | None]]) -> None:
    """Write ``items``, 100 to a write section: one section of hundreds of writes
    can outlast the store's 10 s timeout on a loaded machine."""
    for start in range(0, len(items), 100):

        async def work(tx, batch=items[start : start + 100]) -> None:
            for item, vector in batch:
                await tx.put(item, vector)

        await store.atomic(key, work)


def ids(entries: Sequence[Entry]) -> list[str]:
    return [e.id for e in entries]


async def check_protocol(make_store: MakeStore) -> None:
    store = await make_store()
    assert store.capabilities.vector_search
    assert isinstance(store, VectorStore)
    assert store.dimension == DIM


async def check_ranking_and_scores(make_store: MakeStore) -> None:
    """Best first, score = cosine similarity (unclamped), only the user's active
    memories that have an embedding, at most k."""
    store = await make_store()
    q = vec(1)
    vectors = {"same": vec(1), "near": vec(1, 1), "far": vec(0, 1), "opposite": vec(-1), "tilted": vec(3, 1)}
    items: list[tuple[Entry, Sequence[float] | None]] = [
        (entry(KEY, mid, f"memory {mid}", i), v) for i, (mid, v) in enumerate(vectors.items())
    ]
    items.append((entry(KEY, "gone", "a deleted memory", 9, deleted=True), vec(1)))
    items.append((entry(KEY, "bare", "stored without an embedding", 10), None))
    await put_all(store, KEY, items)
    await put_all(store, OTHER, [(entry(OTHER, "bobs", "bob's memory"), vec(1))])

    found = await store.vector_candidates(KEY, q, 10)
    assert ids(found) == ["same", "tilted", "near", "far", "opposite"]
    for e in found:
        assert e.score == pytest.approx(cosine(q, vectors[e.id]), abs=1e-5)
        assert e.app == KEY.app and e.user == KEY.user and e.deleted_at is None
    assert found[-1].score == pytest.approx(-1.0, abs=1e-5)  # not clamped to [0, 1]
    assert found[0].memory.text == "memory same"
    assert ids(await store.vector_candidates(KEY, q, 2)) == ["same", "tilted"]
    assert await store.vector_candidates(KEY, q, 0) == []
    assert await store.vector_candidates(UserKey("memory-chat", "nobody"), q, 5) == []
    assert ids(await store.vector_candidates(OTHER, q, 5)) == ["bobs"]


async def check_none_keeps_the_stored_embedding(make_store: MakeStore) -> None:
    store = await make_store()
    await put_all(store, KEY, [(entry(KEY, "m", "coffee"), vec(1, 1))])
    # A topics-only change, a soft delete and a restore pass no vector.
    changed = entry(KEY, "m", "coffee", 5)
    changed = Entry(changed.id, changed.app, changed.user, Memory("coffee", topics=("drinks",)),
                    T0, changed.updated_at)  # fmt: skip
    await put_all(store, KEY, [(changed, None)])
    [hit] = await store.vector_candidates(KEY, vec(1), 5)
    assert hit.id == "m" and hit.memory.topics == ("drinks",)
    assert hit.score == pytest.approx(cosine(vec(1), vec(1, 1)), abs=1e-5)
    tomb = Entry("m", KEY.app, KEY.user, changed.memory, T0, changed.updated_at, T0 + timedelta(seconds=6))
    await put_all(store, KEY, [(tomb, None)])
    assert await store.vector_candidates(KEY, vec(1), 5) == []
    await put_all(store, KEY, [(changed, None)])
    [hit] = await store.vector_candidates(KEY, vec(1), 5)
    assert hit.score == pytest.approx(cosine(vec(1), vec(1, 1)), abs=1e-5)
    # A new vector replaces it.
    await put_all(store, KEY, [(changed, vec(0, 1))])
    [hit] = await store.vector_candidates(KEY, vec(0, 1), 5)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


async def check_failed_section_changes_nothing(make_store: MakeStore) -> None:
    store = await make_store()
    await put_all(store, KEY, [(entry(KEY, "keep", "kept"), vec(1))])

    async def work(tx) -> None:
        await tx.put(entry(KEY, "new", "never stored", 1), vec(1))
        await tx.put(entry(KEY, "keep", "kept", 2), vec(0, 1))
        await tx.remove("keep")
        assert await tx.get("keep") is None  # the section reads its own writes
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await store.atomic(KEY, work)
    assert ids(await store.list(KEY)) == ["keep"]
    [hit] = await store.vector_candidates(KEY, vec(1), 5)
    assert hit.id == "keep" and hit.score == pytest.approx(1.0, abs=1e-5)


async def check_wrong_dimension_is_rejected(make_store: MakeStore) -> None:
    store = await make_store()
    with pytest.raises(BackendError, match=rf"expected {DIM}, got 3"):
        await put_all(store, KEY, [(entry(KEY, "m", "short"), [1.0, 0.0, 0.0])])
    with pytest.raises(BackendError, match=rf"expected {DIM}, got {DIM + 1}"):
        await store.vector_candidates(KEY, [1.0] * (DIM + 1), 5)
    assert await store.count(KEY) == 0


async def check_crowded_user_still_gets_k(make_store: MakeStore, crowd: int = 600) -> None:
    """Another user's memories all nearer to the query than this user's: the
    user still gets their own nearest ``k`` (filtering must not starve them)."""
    store = await make_store()
    await put_all(
        store,
        OTHER,
        [(entry(OTHER, f"o{i}", f"other {i}", i), vec(1, 0.001 * i, 0.001)) for i in range(crowd)],
    )
    mine = [(entry(KEY, f"m{i}", f"mine {i}", i), vec(0.2, 1, 0, i)) for i in range(4)]
    await put_all(store, KEY, mine)
    found = await store.vector_candidates(KEY, vec(1), 3)
    assert ids(found) == ["m0", "m1", "m2"]
    assert len(await store.vector_candidates(KEY, vec(1), 50)) == 4


async def check_store_objects_share_the_user_lock(make_store: MakeStore) -> None:
    """Two store objects on one namespace in one process: two updates of one
    memory never both win."""
    first, second = await make_store(), await make_store()
    async with MemoryService(first) as a, MemoryService(second) as b:
        added = await a.add(KEY, "User likes coffee")
        results = await asyncio.gather(
            a.update(KEY, added.id, "User likes tea"),
            b.update(KEY, added.id, "User likes water"),
            return_exceptions=True,
        )
        assert sum(isinstance(r, Exception) for r in results) == 1
        assert len(await a.read(KEY)) == 1


async def check_semantic_search_with_the_offline_embedder(make_store: MakeStore) -> None:
    """End to end through the engine with the real (offline MiniLM) embedder:
    a query that shares no word with the memory still finds it first, and
    the score shown is its cosine similarity."""
    store = await make_store(dimension=384)
    async with MemoryService(store) as svc:
        for text in (
            "User drinks a double espresso every morning",
            "User's car is a red Volvo",
            "User is allergic to cats",
        ):
            await svc.add(KEY, text)
        [best, *rest] = await svc.vector_search(KEY, "favourite coffee")
        assert best.memory.text == "User drinks a double espresso every morning"
        assert all(best.score > e.score for e in rest) and 0 < best.score <= 1
        # The store's own score is the cosine of the stored and query vectors
        # (the engine may calibrate what it shows).
        [query] = await svc.embedder.embed(["favourite coffee"])
        [memory] = await svc.embedder.embed([best.memory.text])
        [nearest, *_] = await store.vector_candidates(KEY, query, 3)
        assert nearest.id == best.id
        assert nearest.score == pytest.approx(cosine(query, memory), abs=1e-3)
        hybrid = await svc.search(KEY, "which pet is the user allergic to", SearchOptions(hybrid_search=True))
        assert hybrid[0].memory.text == "User is allergic to cats"
