"""Keyword candidates from a store's own index score exactly like a scan of every
memory (issue 12: "the ranking does not change").

For a store with ``native_keyword_search``, after every kind of write (add,
update, soft delete, restore, hard delete, clear), for each query and both term
spaces: every memory a scan scores above 0 is among the index's candidates,
and each candidate's score from the index's statistics equals the scan's.
Backends without an index (they return every memory) pass trivially.
"""

from __future__ import annotations

import pytest

from memchat.engine import Metadata, SearchOptions, UserKey
from memchat.engine.search import keyword_search, lexical_scores, score_entries
from memchat.engine.search.index import KEYWORD_SPACE, LEXICAL_SPACE, query_terms

KEY = UserKey("test-app", "index-user")
OTHER = UserKey("test-app", "someone-else")
TEXTS = [
    "Alice works as a nurse in Berlin",
    "Alice has a cat named Mochi",
    "Alice drinks green tea every morning",
    "Alice is running the Berlin half marathon",
    "Alice runs along the river three times a week",
    "张三喜欢 Go 语言编程",
    "张三的爱好是摄影和爬山",
    "Tom, Alice's brother, is a software engineer in Hamburg",
    "The cat sleeps on the sofa all afternoon",
    "Alice's favourite café is on Oranienstraße",
    "Meeting notes: C++ build broke again",
    "Green tea, black tea, any tea really",
]
QUERIES = [
    "cat",
    "green tea morning",
    "Berlin nurse",
    "running",
    "喜欢 爱好 兴趣 偏好",
    "张三 编程",
    "café",
    "Alice",
    "the river",
    "C++ build",
    "nothing matches this",
]


async def _assert_index_matches_a_scan(svc) -> None:
    store = svc.store
    if not store.capabilities.native_keyword_search:
        return
    everything = await store.list(KEY)
    for space, scorer in ((KEYWORD_SPACE, score_entries), (LEXICAL_SPACE, lexical_scores)):
        for query in QUERIES:
            terms = query_terms(query, space)
            assert terms is not None, query
            candidates, stats = await store.indexed_keyword_candidates(KEY, space, terms)
            scanned = dict(zip((e.id for e in everything), scorer(everything, query), strict=True))
            indexed = dict(zip((e.id for e in candidates), scorer(candidates, query, stats), strict=True))
            expected = {i: s for i, s in scanned.items() if s > 0}
            assert {i for i, s in indexed.items() if s > 0} == set(expected), (space, query)
            for memory_id, score in expected.items():
                assert indexed[memory_id] == pytest.approx(score, abs=1e-12), (space, query)


async def test_index_candidates_score_like_a_scan_through_every_kind_of_write(make_service) -> None:
    svc = make_service(soft_delete=True)
    other = []
    for text in TEXTS:
        await svc.add(OTHER, text + " (other user)")  # another user's memories never count
    added = [await svc.add(KEY, text, topics=["tea"] if "tea" in text else None) for text in TEXTS]
    await _assert_index_matches_a_scan(svc)

    await svc.update(KEY, added[1].id, "Alice has two cats and a kitten")
    await svc.delete(KEY, added[2].id)  # a tombstone: out of the index
    await _assert_index_matches_a_scan(svc)

    await svc.restore(KEY, added[2].id)
    hard = make_service()  # the same store, hard deletes
    await hard.delete(KEY, added[3].id)
    await _assert_index_matches_a_scan(svc)

    assert await svc.clear(KEY) == len(TEXTS) - 1
    await _assert_index_matches_a_scan(svc)
    for text in TEXTS[:4]:
        other.append(await svc.add(KEY, text, metadata=Metadata(kind="episode")))
    await _assert_index_matches_a_scan(svc)


async def test_searches_rank_the_same_as_the_reference_scan(make_service) -> None:
    """The results users see: keyword mode through the service equals keyword search
    over every active memory (the reference's way)."""
    svc = make_service()
    for text in TEXTS:
        await svc.add(KEY, text)
    everything = await svc.store.list(KEY)
    for query in QUERIES:
        options = SearchOptions(max_results=10, mode="keyword")
        got = [(e.id, e.score) for e in await svc.search(KEY, query, options)]
        want = [(e.id, e.score) for e in keyword_search(everything, query, options, min_score=svc.min_score)]
        assert got == want, query


async def test_memories_without_a_term_still_count(make_service) -> None:
    """A memory with nothing to index ("0", "!!") is stored, counted in the statistics
    and found by the reference's raw fallback; the others rank as a scan would."""
    svc = make_service()
    for text in ["0", "!!", "C++", *TEXTS[:3]]:
        await svc.add(KEY, text)
    assert await svc.count(KEY) == 6
    assert [e.memory.text for e in await svc.search(KEY, "C++", SearchOptions(mode="keyword"))] == ["C++"]
    everything = await svc.store.list(KEY)
    options = SearchOptions(max_results=10, mode="keyword")
    got = [(e.id, e.score) for e in await svc.search(KEY, "Alice tea", options)]
    assert got == [(e.id, e.score) for e in keyword_search(everything, "Alice tea", options)]
