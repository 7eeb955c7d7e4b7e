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
    reads = _count_posting_reads(store.keyword_index)
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
                elif live:  # a term never read: its postings are read now
                    assert len(reads) > before, (step, query)
                searched |= words
                for options in (SEMANTIC, SearchOptions(max_results=5)):
                    mine = await svc.search(KEY, query, options)
                    assert _results(mine) == _results(await other.search(KEY, query, options)), (step, query)
    finally:
        await other.close()
        await svc.close()


def _count_posting_reads(index) -> list[int]:
    """Every read of postings by ``index`` (packed, or row by row), as its number of terms."""
    reads: list[int] = []
    for name in ("_packed_postings", "_postings"):
        build = getattr(index, name)

        def counting(terms: int, build=build):
            reads.append(terms)
            return build(terms)

        setattr(index, name, counting)
    return reads


async def test_past_the_cap_the_terms_searched_longest_ago_go(harness, monkeypatch) -> None:
    """A user's cached postings are capped (``MAX_POSTINGS``); past the cap the terms
    no search used for longest are dropped, not all of them: a term searched all
    along is not read again (at 100k memories a common term's read costs tens of
    milliseconds), one dropped is read again when searched, and every search
    equals a fresh store's."""
    from backends import _sql_postings

    monkeypatch.setattr(_sql_postings, "MAX_POSTINGS", 12)  # four terms of three holders
    store = harness.make_store()
    svc = MemoryService(store, embedder=False)
    other = MemoryService(harness.make_store(), embedder=False)
    words = ["tea", "coffee", "Berlin", "cello", "marathon", "garden", "sofa"]
    try:
        for word in words:
            for tail in ("in spring", "on Mondays", "with friends"):
                await svc.add(KEY, f"{word} {tail}")
        reads = _count_posting_reads(store.keyword_index)
        hot, cold = words[0], words[1:]

        async def search(word: str) -> int:
            before = len(reads)
            mine = await svc.search(KEY, word, KEYWORD)
            assert len(mine) == 3 and _results(mine) == _results(await other.search(KEY, word, KEYWORD))
            return len(reads) - before

        assert await search(hot) == 1
        for word in cold:
            assert await search(word) == 1
            assert await search(hot) == 0, word  # used all along: kept
        assert await search(cold[0]) == 1  # used longest ago: dropped, read again
        assert await search(cold[-1]) == 0  # used recently: kept
    finally:
        await other.close()
        await svc.close()


async def test_a_write_during_a_search_s_read_leaves_no_stale_cache(harness, monkeypatch) -> None:
    """A search reads postings and rows at one version; a write of this process may
    commit, and bring the caches to the next version, while that read is under way.
    What the search read must then not be kept under the new version: the next
    search would miss the new memory, or show the old topics."""
    import asyncio
    import re

    from sqlalchemy.ext.asyncio import AsyncConnection

    store = harness.make_store()
    svc = MemoryService(store, embedder=False)
    other = MemoryService(harness.make_store(), embedder=False)
    real = AsyncConnection.execute
    pause: dict[str, asyncio.Event] = {}

    async def execute(self, statement, *args, **kwargs):
        result = await real(self, statement, *args, **kwargs)
        if pause and "reached" in pause and not pause["reached"].is_set():
            text = str(statement)
            if re.search(rf"FROM {re.escape(pause['kind'])}\b", text):
                pause["reached"].set()
                await pause["go"].wait()
        return result

    monkeypatch.setattr(AsyncConnection, "execute", execute)
    try:
        tea = await svc.add(KEY, "Alice drinks green tea", topics=["drink"])
        await svc.add(KEY, "Bob drinks strong coffee")
        await svc.search(KEY, "tea", KEYWORD)  # the user has cached postings and rows now

        async def racing(query: str, kind: str, write) -> None:
            pause.update(kind=kind, reached=asyncio.Event(), go=asyncio.Event())
            search = asyncio.create_task(svc.search(KEY, query, KEYWORD))
            await asyncio.wait_for(pause["reached"].wait(), 10)
            await write()  # commits while the search holds what it read before
            pause["go"].set()
            await search
            pause.clear()

        # Postings of a term first read by a search racing an add that holds it.
        async def add_coffee() -> None:
            await svc.add(KEY, "Carol roasts coffee beans")

        postings = store.keyword_index.terms.name
        await racing("coffee beans", postings, add_coffee)
        mine = await svc.search(KEY, "coffee beans", KEYWORD)
        assert "Carol roasts coffee beans" in [e.memory.text for e in mine]
        assert _results(mine) == _results(await other.search(KEY, "coffee beans", KEYWORD))

        # A row read by a search racing an update of that memory's topics. Another
        # store object's write first, so that the search reads the row afresh.
        async def retopic() -> None:
            await svc.update(KEY, tea.id, tea.memory.text, topics=["morning"])

        await other.add(KEY, "Dan grows tea in his garden")
        await racing("green tea", store.table.name, retopic)
        mine = await svc.search(KEY, "green tea", KEYWORD)
        assert mine[0].memory.topics == ("morning",)
        assert _results(mine) == _results(await other.search(KEY, "green tea", KEYWORD))
    finally:
        pause.clear()
        await other.close()
        await svc.close()


async def test_postings_that_do_not_add_up_are_read_row_by_row(harness, monkeypatch) -> None:
    """A term's postings come back joined in one aggregate; when the parts do not
    add up to the holder count (a server that cut the aggregate short) the store
    reads them row by row and ranks the same; so do the memory IDs of the holders'
    document numbers."""
    from backends import sql_index

    queries = ["Alice tea", "Bob", "drinks coffee", "Berlin nurse", "blue sofa marathon"]
    svc = MemoryService(harness.make_store(), embedder=HashEmbedder())
    async with svc:
        for text in TEXTS:
            await svc.add(KEY, text)
        expected = [_results(await svc.search(KEY, q, KEYWORD)) for q in queries]
    assert all(expected) and len({len(e) for e in expected}) > 1

    rows_read: list[int] = []
    by_row = sql_index.SQLKeywordIndex._postings

    def counted(self, terms: int):
        rows_read.append(terms)
        return by_row(self, terms)

    monkeypatch.setattr(sql_index.SQLKeywordIndex, "_postings", counted)
    unpack = sql_index._unpack

    def cut_short(row):  # as a server whose aggregate cap is too small does
        which, count, *joined = row
        return unpack((which, count, *(part[: len(part) // 2] if part else part for part in joined)))

    monkeypatch.setattr(sql_index, "_unpack", cut_short)
    # The memory IDs (hex digests) hold a "0": the aggregated names of the document
    # numbers no longer split into as many pairs as the count, and are read row by row.
    monkeypatch.setattr(sql_index, "_ID_SEPARATOR", "0")
    named = sql_index._named
    fell_back: list[int] = []

    def counted_names(count, joined):
        found = named(count, joined)
        fell_back.append(found is None)
        return found

    monkeypatch.setattr(sql_index, "_named", counted_names)
    broken = MemoryService(harness.make_store(), embedder=HashEmbedder())
    async with broken:
        assert [_results(await broken.search(KEY, q, KEYWORD)) for q in queries] == expected
    assert len(rows_read) == len(queries)
    assert fell_back and all(fell_back)


async def test_the_limit_is_checked_without_counting_the_user_s_rows(harness, monkeypatch) -> None:
    """An add, a restore and a clear read the user's active count from the
    statistics row every write keeps in its own transaction: a COUNT over the
    user's rows took 1.2 s an add at 100k memories on MariaDB. The limit holds
    exactly as before, this section's own writes included."""
    import re

    from sqlalchemy.ext.asyncio import AsyncConnection

    from memchat.engine import MemoryLimitError

    store = harness.make_store()
    svc = MemoryService(store, embedder=False, limit=3, soft_delete=True)
    counted: list[str] = []
    real = AsyncConnection.execute

    async def execute(self, statement, *args, **kwargs):
        text = str(statement)
        if re.search(rf"count\(\*\).*FROM {re.escape(store.table.name)}\b", text, re.IGNORECASE | re.DOTALL):
            counted.append(text)
        return await real(self, statement, *args, **kwargs)

    try:
        first = await svc.add(KEY, TEXTS[0])  # creates the tables and the statistics row
        monkeypatch.setattr(AsyncConnection, "execute", execute)
        await svc.add(KEY, TEXTS[1])
        third = await svc.add(KEY, TEXTS[2])
        with pytest.raises(MemoryLimitError):
            await svc.add(KEY, TEXTS[3])
        await svc.delete(KEY, third.id)
        await svc.add(KEY, TEXTS[3])  # the tombstone frees its place
        with pytest.raises(MemoryLimitError):
            await svc.restore(KEY, third.id)
        await svc.delete(KEY, first.id)
        assert (await svc.restore(KEY, third.id)).id == third.id
        assert await svc.count(KEY) == 3
        assert await svc.clear(KEY) == 3
        assert counted == []
    finally:
        await svc.close()
