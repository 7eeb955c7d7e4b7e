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


def _results(entries) -> list[tuple[str, str, float]]:
    return [(e.id, e.memory.text, round(e.score, 6)) for e in entries]


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
