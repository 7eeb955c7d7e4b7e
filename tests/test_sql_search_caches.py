"""The SQL stores keep, per user and per version of the user's rows, the postings
and the entries their searches have read, so a search reads only what it has
not seen at that version. What a user must never notice: another process's
write (here another store object on the same tables, with caches of its own)
is seen by the very next search, keyword and semantic alike, and the results
equal a fresh store's."""

from __future__ import annotations

import pytest

from memchat.engine import MemoryService, SearchOptions, UserKey
from tests.conformance.harness import HARNESSES
from tests.conformance.test_vectors import HashEmbedder

KEY = UserKey("cache-app", "cache-user")
TEXTS = [
    "Alice drinks green tea every morning",
    "Alice moved to Berlin to work as a nurse",
    "Bob plays the cello in a small orchestra",
    "Alice ran the Hamburg marathon last spring",
    "Alice's sister bought a blue sofa",
    "Bob drinks coffee, never tea",
]
KEYWORD = SearchOptions(mode="keyword", max_results=5)
SEMANTIC = SearchOptions(mode="semantic", max_results=5)


@pytest.fixture(params=["sqlite", "mysql", "postgres"])
def harness(request: pytest.FixtureRequest, tmp_path):
    return HARNESSES[request.param](tmp_path)


def _results(entries) -> list[tuple[str, str, tuple[str, ...], float]]:
    return [(e.id, e.memory.text, e.memory.topics, round(e.score, 6)) for e in entries]


async def test_another_process_write_is_seen_by_the_next_search(harness) -> None:
    embedder = HashEmbedder()
    svc = MemoryService(harness.make_store(), embedder=embedder)
    entries = [await svc.add(KEY, text) for text in TEXTS]
    for query in ("tea", "Alice tea", "Berlin nurse", "Bob plays the cello"):  # postings and entries read now
        await svc.search(KEY, query, KEYWORD)
        await svc.search(KEY, query, SEMANTIC)

    other = MemoryService(harness.make_store(), embedder=embedder)  # another process, as far as svc knows
    try:
        await other.update(KEY, entries[0].id, "Alice drinks black coffee every morning")
        added = await other.add(KEY, "Carol brews tea for the whole office")
        await other.delete(KEY, entries[5].id)
        # Same text, new topics: the memory keeps its ID, its row changes.
        await other.update(KEY, entries[2].id, TEXTS[2], topics=["music", "orchestra"])

        found = await svc.search(KEY, "tea", KEYWORD)
        assert added.id in [e.id for e in found]
        assert entries[0].id not in [e.id for e in found] and entries[5].id not in [e.id for e in found]
        coffee = await svc.search(KEY, "coffee morning", KEYWORD)
        assert coffee[0].memory.text == "Alice drinks black coffee every morning"
        near = await svc.search(KEY, "Alice drinks black coffee", SEMANTIC)
        assert near[0].memory.text == "Alice drinks black coffee every morning"
        for options in (KEYWORD, SEMANTIC):
            cello = await svc.search(KEY, "Bob plays the cello", options)
            assert (cello[0].id, cello[0].memory.topics) == (entries[2].id, ("music", "orchestra"))
        for query in ("tea", "Alice tea", "Berlin nurse", "coffee", "Alice drinks black coffee", "cello"):
            for options in (KEYWORD, SEMANTIC, SearchOptions(max_results=5)):
                assert _results(await svc.search(KEY, query, options)) == _results(
                    await other.search(KEY, query, options)
                )
    finally:
        await other.close()
        await svc.close()


WORDS = ["tea", "coffee", "Berlin", "cello", "marathon", "sister", "sofa", "nurse", "garden", "chess"]


async def test_this_process_s_writes_bring_its_caches_along(harness) -> None:
    """A search after this process's own write reads no postings it read before the
    write: the write section brings them (and the entries and vectors it cached)
    to the version it committed. Through a random run of adds, updates, deletes,
    soft deletes, restores and a clear, every search of every mode equals a fresh
    store's (another store object, nothing cached), and postings are read again
    only for terms never read before."""
    import random

    rng = random.Random(11)
    store = harness.make_store()
    embedder = HashEmbedder()
    svc = MemoryService(store, embedder=embedder, soft_delete=True)
    other = MemoryService(harness.make_store(), embedder=embedder)
    index = store.keyword_index
    reads: list[int] = []
    build = index._postings

    def counting(terms: int):
        reads.append(terms)
        return build(terms)

    index._postings = counting
    queries = [f"{a} {b}" for a in WORDS for b in WORDS if a < b][:12] + WORDS
    live: list[str] = []
    deleted: list[str] = []
    searched: set[str] = set()
    try:
        for step in range(60):
            roll = rng.random()
            if roll < 0.45 or not live:
                words = rng.sample(WORDS, 3)
                live.append((await svc.add(KEY, f"note {step}: {' '.join(words)} and more")).id)
            elif roll < 0.6:
                memory_id = rng.choice(live)
                updated = await svc.update(KEY, memory_id, f"note {step}: {' '.join(rng.sample(WORDS, 2))}")
                live[live.index(memory_id)] = updated.memory_id
            elif roll < 0.7:  # the same text, new topics: the memory keeps its ID, its row changes
                memory_id = rng.choice(live)
                current = await svc.get(KEY, memory_id)
                await svc.update(KEY, memory_id, current.memory.text, topics=rng.sample(WORDS, 2))
            elif roll < 0.85:
                memory_id = live.pop(rng.randrange(len(live)))
                await svc.delete(KEY, memory_id)
                deleted.append(memory_id)
            elif deleted:
                live.append((await svc.restore(KEY, deleted.pop())).id)
            if step == 40:
                await svc.clear(KEY)  # not carried along: every term is read again
                deleted.extend(live)
                live.clear()
                searched.clear()
            for query in rng.sample(queries, 4):
                before = len(reads)
                mine = await svc.search(KEY, query, KEYWORD)
                assert _results(mine) == _results(await other.search(KEY, query, KEYWORD)), (step, query)
                words = set(query.split())
                if words <= searched:  # read before, and carried along by every write since
                    assert len(reads) == before, (step, query)
                searched |= words
                for options in (SEMANTIC, SearchOptions(max_results=5)):
                    mine = await svc.search(KEY, query, options)
                    assert _results(mine) == _results(await other.search(KEY, query, options)), (step, query)
    finally:
        await other.close()
        await svc.close()
