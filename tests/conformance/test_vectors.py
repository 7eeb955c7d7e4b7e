"""Vectors on every backend: each memory keeps its embedding, the store ranks
by cosine, a store records which embedder made its vectors (another one
re-embeds them, or is refused in one sentence where the index has a fixed
dimension), and memories without a vector get theirs when a service with an
embedder opens the store — without clobbering a concurrent update.

The embedder here is a deterministic bag-of-words hash (384 dimensions, the
fixed-dimension stores' default), so each check knows the exact cosine.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import multiprocessing as mp
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from backends import create
from memchat.engine import ConfigError, MemoryService, UserKey
from memchat.engine.model import Entry, Memory
from memchat.engine.vectors import META_EMBEDDER, NO_EMBEDDER, EmbeddingProgress

from .harness import HARNESSES, multi_process_names

KEY = UserKey("test-app", "vector-user")
OTHER = UserKey("test-app", "other-user")


class HashEmbedder:
    """Words hashed into buckets (a ``seed`` makes another "model"), L2-normalised."""

    def __init__(self, seed: str = "a", dimension: int = 384) -> None:
        self.seed, self.dimension = seed, dimension
        self.name = f"hash-{seed}-{dimension}"
        self.identity = f"test-hash-embedder/{seed}/{dimension}"
        self.calls: list[list[str]] = []

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dimension
        for word in text.lower().split():
            digest = hashlib.sha256(f"{self.seed}:{word}".encode()).digest()
            values[int.from_bytes(digest[:4], "big") % self.dimension] += 1.0 if digest[4] % 2 else -1.0
        norm = math.sqrt(sum(x * x for x in values)) or 1.0
        return [x / norm for x in values]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / ((math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))) or 1.0)


async def scored(store: Any, key: UserKey, query: Sequence[float], k: int = 10) -> dict[str, float]:
    return {e.memory.text: e.score for e in await store.vector_candidates(key, query, k)}


def service(harness, embedder: Any, **options: Any) -> MemoryService:
    return MemoryService(harness.make_store(), embedder=embedder, limit=0, **options)


TEXTS = ["User likes green tea", "User has a cat named Miso", "User works as a nurse in Berlin"]


async def test_every_backend_keeps_vectors_and_ranks_by_cosine(harness) -> None:
    embedder = HashEmbedder()
    async with service(harness, embedder) as svc:
        assert svc.store.capabilities.vector_search and svc.has_embedder
        for text in TEXTS:
            await svc.add(KEY, text)
        await svc.add(OTHER, "User likes green tea and coffee")
        query = embedder.vector("green tea cat")
        found = await svc.store.vector_candidates(KEY, query, 10)
        assert {e.memory.text for e in found} == set(TEXTS)  # only this user's
        assert [e.score for e in found] == sorted((e.score for e in found), reverse=True)
        for e in found:
            assert e.score == pytest.approx(cosine(query, embedder.vector(e.memory.text)), abs=1e-5)
            assert e.user == KEY.user and e.deleted_at is None
        assert len(await svc.store.vector_candidates(KEY, query, 2)) == 2
        # Deleting removes a memory from the candidates; re-adding brings it back.
        await svc.delete(KEY, found[0].id)
        assert found[0].memory.text not in await scored(svc.store, KEY, query)
        await svc.add(KEY, found[0].memory.text)
        assert found[0].memory.text in await scored(svc.store, KEY, query)
        # An update stores the new text's vector.
        [cat] = [e for e in found if "cat" in e.memory.text]
        result = await svc.update(KEY, cat.id, "User has a dog named Rex")
        dog = embedder.vector("User has a dog named Rex")
        [best, *_] = await svc.store.vector_candidates(KEY, dog, 10)
        assert best.id == result.memory_id and best.score == pytest.approx(1.0, abs=1e-5)


async def test_memories_written_without_an_embedder_get_vectors_on_the_next_open(harness) -> None:
    async with service(harness, NO_EMBEDDER, soft_delete=True) as plain:
        assert not plain.has_embedder
        entries = [await plain.add(KEY, text) for text in TEXTS]
        await plain.add(OTHER, "User plays the violin")
        await plain.delete(KEY, entries[0].id)  # a tombstone gets its vector too (for restore)
        assert await plain.store.count_missing_vectors() == 4
    embedder = HashEmbedder()
    seen: list[EmbeddingProgress] = []
    async with service(harness, embedder, soft_delete=True, progress=seen.append) as svc:
        assert seen[0] == EmbeddingProgress(0, 4) and seen[-1] == EmbeddingProgress(4, 4)
        assert seen[-1].message() == "Embedding 4 memories for semantic search… 100%"
        assert await svc.store.count_missing_vectors() == 0
        query = embedder.vector("nurse Berlin cat")
        got = await scored(svc.store, KEY, query)
        assert set(got) == set(TEXTS[1:])
        for text, score in got.items():
            assert score == pytest.approx(cosine(query, embedder.vector(text)), abs=1e-5)
        await svc.restore(KEY, entries[0].id)
        assert set(await scored(svc.store, KEY, query)) == set(TEXTS)
        assert set(await scored(svc.store, OTHER, query)) == {"User plays the violin"}
    # Nothing left to do: the next open embeds nothing.
    again = HashEmbedder()
    async with service(harness, again, progress=seen.append) as svc:
        assert again.calls == [] and len(seen) == 2


async def test_an_embedder_change_re_embeds_or_is_refused_in_one_sentence(harness) -> None:
    first = HashEmbedder("a")
    async with service(harness, first) as svc:
        for text in TEXTS:
            await svc.add(KEY, text)
        assert "test-hash-embedder/a/384" in (await svc.store.read_meta(META_EMBEDDER) or "")
    # Same dimension, another model: every vector is made again.
    second = HashEmbedder("b")
    seen: list[EmbeddingProgress] = []
    async with service(harness, second, progress=seen.append) as svc:
        assert seen and seen[-1].total == 3 and seen[-1].reembedding
        assert "(the embedding model changed)" in seen[-1].message()
        query = second.vector("green tea")
        for text, score in (await scored(svc.store, KEY, query)).items():
            assert score == pytest.approx(cosine(query, second.vector(text)), abs=1e-5)
    # Another dimension: a fixed index refuses (one sentence with the fix), others re-embed.
    third = HashEmbedder("c", dimension=64)
    svc = service(harness, third)
    try:
        if getattr(svc.store, "fixed_dimension", True):
            with pytest.raises(ConfigError, match=r"dimension mismatch.*64.*384"):
                await svc.open()
        else:
            await svc.open()
            query = third.vector("green tea")
            got = await scored(svc.store, KEY, query)
            assert set(got) == set(TEXTS)
            for text, score in got.items():
                assert score == pytest.approx(cosine(query, third.vector(text)), abs=1e-5)
    finally:
        await svc.close()


class _HookedEmbedder(HashEmbedder):
    """Runs ``hook`` (once) while embedding, as if another writer came in between."""

    def __init__(self, hook: Callable[[], Awaitable[None]]) -> None:
        super().__init__()
        self.hook: Callable[[], Awaitable[None]] | None = hook

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        hook, self.hook = self.hook, None
        if hook is not None:
            await hook()
        return await super().embed(texts)


async def test_a_concurrent_update_during_the_fill_in_is_not_clobbered(harness) -> None:
    store = harness.make_store()
    await store.open()
    t0 = datetime.now(UTC)
    original = Entry("m1", KEY.app, KEY.user, Memory("User likes green tea", topics=("drinks",)), t0, t0)
    renamed = Entry("m2", KEY.app, KEY.user, Memory("User has a cat"), t0, t0)

    async def put(entry: Entry, vector: Sequence[float] | None = None) -> None:
        async def work(tx) -> None:
            await tx.put(entry, vector)

        await store.atomic(entry.key, work)

    await put(original)
    await put(renamed)
    writer = HashEmbedder()

    async def meanwhile() -> None:
        # Another writer: new topics on m1 (same text), new text on m2, no vectors.
        await put(replace(original, memory=replace(original.memory, topics=("tea",))))
        await put(replace(renamed, memory=Memory("User has a dog")))

    embedder = _HookedEmbedder(meanwhile)
    async with MemoryService(harness.make_store(), embedder=embedder) as svc:
        m1 = await svc.store.get(KEY, "m1")
        assert m1 is not None and m1.memory.topics == ("tea",)  # the update was kept
        [hit] = await svc.store.vector_candidates(KEY, writer.vector("User likes green tea"), 1)
        assert hit.id == "m1" and hit.score == pytest.approx(1.0, abs=1e-5)
        # m2's text changed after it was embedded: the cat's vector was never
        # stored for it; its new text was embedded in a later batch.
        [hit] = await svc.store.vector_candidates(KEY, writer.vector("User has a dog"), 1)
        assert hit.id == "m2" and hit.score == pytest.approx(1.0, abs=1e-5)
        assert ["User has a cat"] in embedder.calls or any("User has a cat" in c for c in embedder.calls)
        assert await svc.store.count_missing_vectors() == 0
    await store.close()


# -- another process ------------------------------------------------------------------


def _adder(spec: tuple[str, dict[str, Any]], texts: list[str]) -> None:
    async def run() -> None:
        async with MemoryService(create(spec[0], **spec[1]), embedder=HashEmbedder(), limit=0) as svc:
            for text in texts:
                await svc.add(KEY, text)

    asyncio.run(run())


@pytest.fixture(params=multi_process_names())
def shared(request, tmp_path):
    return HARNESSES[request.param](tmp_path)


async def test_another_process_s_new_vectors_are_seen(shared) -> None:
    embedder = HashEmbedder()
    query = embedder.vector("green tea cat nurse")
    async with MemoryService(shared.make_store(), embedder=embedder, limit=0) as svc:
        await svc.add(KEY, TEXTS[0])
        assert set(await scored(svc.store, KEY, query)) == {TEXTS[0]}  # cached now
        ctx = mp.get_context("spawn")
        proc = ctx.Process(target=_adder, args=(shared.spec(), TEXTS[1:]))
        proc.start()
        await asyncio.to_thread(proc.join, 120)
        assert proc.exitcode == 0
        got = await scored(svc.store, KEY, query)
        assert set(got) == set(TEXTS)
        for text, score in got.items():
            assert score == pytest.approx(cosine(query, embedder.vector(text)), abs=1e-5)
