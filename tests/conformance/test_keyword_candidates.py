"""A store that ranks its keyword candidates (search/candidates.py) returns the
holders the engine's formula ranks best, and search results do not change when
the store returns only a few of them (issue 12: bounded candidates, the ranking
unchanged).

Chroma keeps no keyword index (declared) and returns every memory; the search
checks hold for it all the same.
"""

from __future__ import annotations

import pytest

from memchat.engine import SearchOptions, UserKey
from memchat.engine.search import keyword_search, lexical_scores, score_entries
from memchat.engine.search.candidates import KeywordPlanner
from memchat.engine.search.index import KEYWORD_SPACE, LEXICAL_SPACE, KeywordStats, index_record, query_terms

KEY = UserKey("test-app", "candidates-user")
SUBJECTS = ["tea", "coffee", "the piano", "chess", "Berlin", "my sister", "running", "jazz"]
EXTRAS = ["", " every morning", " with my sister and my brother", " on Sundays, tea in hand", " a lot"]
TEXTS = [
    f"I like {SUBJECTS[i % len(SUBJECTS)]}{EXTRAS[(i // 3) % len(EXTRAS)]}{' and tea' * (i % 4 == 0)} #{i}"
    for i in range(32)
]
QUERIES = [
    "tea",
    "I like tea",
    "my sister",
    "like piano with brother",
    "tea every morning",
    "Sundays tea jazz",
    "coffee chess Berlin running",
]


def keyword_cutoffs(store, monkeypatch) -> list[float | None]:
    """The rank cutoff of each keyword answer the store gives from now on (None:
    it returned every holder), in order."""
    asked: list[float | None] = []
    lookup = store.indexed_keyword_candidates

    async def counted(*args, **kwargs):
        found, stats = await lookup(*args, **kwargs)
        asked.append(stats.rank_cutoff if stats is not None else None)
        return found, stats

    monkeypatch.setattr(store, "indexed_keyword_candidates", counted)
    return asked


def _python_ranks(entries, query: str, space: str, stats: KeywordStats) -> dict[str, float]:
    """CandidatePlan.rank of every holder, from the memories themselves."""
    plan = KeywordPlanner(query, space, limit=None).plan(stats)
    ranks = {}
    for entry in entries:
        rows = [p for p in index_record(entry.memory).postings() if p[0] in plan.weights]
        if rows:
            ranks[entry.id] = plan.rank(rows)
    return ranks


async def _filled(make_service):
    """The store with TEXTS added, and every memory (None: the store keeps no index)."""
    svc = make_service()
    for text in TEXTS:
        await svc.add(KEY, text, topics=["drinks"] if "tea" in text else None)
    if not svc.store.capabilities.native_keyword_search:
        return svc.store, None
    return svc.store, await svc.store.list(KEY)


async def test_the_store_returns_the_best_ranked_holders(make_service) -> None:
    store, everything = await _filled(make_service)
    if everything is None:
        return  # no keyword index (declared): every memory is a candidate
    for space in (KEYWORD_SPACE, LEXICAL_SPACE):
        for query in QUERIES:
            terms = query_terms(query, space)
            found, stats = await store.indexed_keyword_candidates(
                KEY, space, terms, KeywordPlanner(query, space, 5)
            )
            assert stats is not None
            assert stats.df is not None
            if stats.rank_cutoff is None:  # no more than 5 holders: all of them
                assert len(found) <= 5, (space, query)
                continue
            ranks = _python_ranks(everything, query, space, stats)
            newest = {e.id: e.newest_first for e in everything}
            if stats.cutoff_key is not None:
                # A tie at the cutoff cut as results order equal scores (newest first):
                # every holder left out there sorts after the last one returned.
                best = sorted(ranks, key=lambda i: (-ranks[i], newest[i]))[:5]
                assert stats.cutoff_key == newest[best[-1]], (space, query)
            else:
                best = sorted(ranks, key=lambda i: (-ranks[i], i))[:5]  # else by ID
            assert len(found) == 5, (space, query)
            assert {e.id for e in found} == set(best), (space, query)
            assert stats.rank_cutoff == pytest.approx(ranks[best[-1]], abs=1e-9)


async def test_a_memory_written_again_leads_its_tie_at_the_store_limit(make_service) -> None:
    """Twelve memories of one rank (the same words, a number of two digits each);
    the limit (5) cuts through them. Writing the oldest again (the same text: no
    posting changes) makes it the newest. A store that cuts ties newest first
    keeps it, in this store object and in another on the same data; one that cuts
    them by ID says nothing of their order (``cutoff_key`` None)."""
    svc = make_service()
    texts = [f"Drinks green tea after lunch #{i}" for i in range(10, 22)]
    for text in texts:
        await svc.add(KEY, text)
    if not svc.store.capabilities.native_keyword_search:
        return  # every memory is a candidate: nothing is cut
    again = await svc.add(KEY, texts[0])
    newest = {e.id: e.newest_first for e in await svc.store.list(KEY)}
    assert min(newest, key=newest.__getitem__) == again.id
    other = await make_service().open()  # another store object on the same data
    for store in (svc.store, other.store):
        terms = query_terms("green tea", KEYWORD_SPACE)
        found, stats = await store.indexed_keyword_candidates(
            KEY, KEYWORD_SPACE, terms, KeywordPlanner("green tea", KEYWORD_SPACE, 5)
        )
        assert stats is not None and stats.rank_cutoff is not None
        if stats.cutoff_key is None:
            continue  # cut by ID
        best = sorted(newest, key=newest.__getitem__)[:5]
        assert [e.id for e in found if e.id in newest] and {e.id for e in found} == set(best)
        assert stats.cutoff_key == newest[best[-1]]


async def test_search_results_do_not_change_when_the_store_returns_few_candidates(
    make_service, monkeypatch
) -> None:
    import memchat.engine.retrieval as service_module  # where search reads KEYWORD_CANDIDATES

    svc = make_service()
    for text in TEXTS:
        await svc.add(KEY, text)
    everything = await svc.store.list(KEY)
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 2)  # fewer than the results asked for
    for query, limit in zip(QUERIES, [3, 10, 4, 10, 3, 10, 5], strict=True):
        options = SearchOptions(mode="keyword", max_results=limit)
        found = await svc.search(KEY, query, options)
        scanned = keyword_search(everything, query, options)
        assert [(e.id, round(e.score, 9)) for e in found] == [(e.id, round(e.score, 9)) for e in scanned], (
            query
        )


async def test_told_how_many_the_engine_ranks_the_store_returns_only_those_that_can_make_it(
    make_service,
) -> None:
    """With keyword search's depth (3 here), the store leaves out every holder
    that cannot reach the third best score (its rank is below the third best
    score's floor), so a common term's holders are not all read back and scored;
    what it returns still holds the full scan's best three. Hybrid search (the
    stemmed space) fuses every keyword candidate, so it still gets all of them."""
    store, everything = await _filled(make_service)
    if everything is None:
        return  # no keyword index (declared): every memory is a candidate
    trimmed = 0
    for space in (KEYWORD_SPACE, LEXICAL_SPACE):
        scorer = score_entries if space == KEYWORD_SPACE else lexical_scores
        for query in QUERIES:
            planner = KeywordPlanner(query, space, 100, depth=3)
            found, stats = await store.indexed_keyword_candidates(
                KEY, space, query_terms(query, space), planner
            )
            full = sorted((s for s in scorer(everything, query) if s > 0), reverse=True)
            scores = scorer(found, query, stats)
            assert planner.complete(scores, stats, 3), (space, query)  # no second round trip
            assert sorted(scores, reverse=True)[:3] == pytest.approx(full[:3], abs=1e-9), (space, query)
            if space == KEYWORD_SPACE:
                trimmed += len(found) < len(full)
            else:
                assert len(found) == len(full), (space, query)
    assert trimmed > 0  # "tea" alone has 16 holders, three of them can make it


async def test_hybrid_search_over_tied_holders_ranks_like_the_full_scan_in_one_pass(
    make_service, monkeypatch
) -> None:
    """A hundred and twenty memories say the same thing ("… #7"): their keyword
    scores tie exactly, and the store's first answer (the 100 hybrid search needs,
    ties cut newest first or by memory ID) leaves twenty of them out. None of those could reach the
    re-rank or the results, so the search does not ask the store again for every
    holder at that score, and ranks as the full scan does."""
    import memchat.engine.retrieval as service_module
    from tests.conformance.test_vectors import HashEmbedder

    svc = make_service(embedder=HashEmbedder(), limit=0)
    for i in range(120):
        await svc.add(KEY, f"Drinks green tea after lunch #{i}")
    for i, subject in enumerate(["coffee", "the piano", "chess", "Berlin", "running", "jazz"]):
        await svc.add(KEY, f"Talks about {subject} with the team #{i}")
    if not svc.store.capabilities.native_keyword_search:
        return  # every memory is a candidate: nothing is left out
    options = SearchOptions(max_results=10)
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 10**9)
    full = [(e.id, round(e.score or 0.0, 9)) for e in await svc.search(KEY, "green tea", options)]

    asked = keyword_cutoffs(svc.store, monkeypatch)
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 2)  # the limit is then the 100 hybrid needs
    bounded = [(e.id, round(e.score or 0.0, 9)) for e in await svc.search(KEY, "green tea", options)]
    assert bounded == full
    assert len(asked) == 1 and asked[0] is not None  # one answer, and it left holders out
