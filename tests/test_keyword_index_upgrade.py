"""The SQL stores' keyword index (backends/sql_index.py) is built in place for a
table made before it existed, and rebuilt when a writer that does not keep it
(an older memchat) changed the table; until then searches scan, losing nothing."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from backends.sql_index import INDEX_META
from memchat.engine import MemoryService, SearchOptions, UserKey
from tests.conformance.harness import HARNESSES

SQL_BACKENDS = ["sqlite", "sqlitevec", "mysql", "mysqlvec", "postgres", "pgvector"]
KEY = UserKey("upgrade-app", "upgrade-user")
TEXTS = ["Alice has a cat named Mochi", "Alice drinks green tea", "张三喜欢 Go 语言编程"]


@pytest.fixture(params=SQL_BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path):
    return HARNESSES[request.param](tmp_path)


async def _keyword(svc: MemoryService, query: str) -> list[str]:
    found = await svc.search(KEY, query, SearchOptions(mode="keyword"))
    return [e.memory.text for e in found]


async def _postings(store) -> int:
    async with store.engine.connect() as conn:
        count = sa.select(sa.func.count()).select_from(store.keyword_index.terms)
        return (await conn.execute(count)).scalar()


async def _reopened_indexing(harness) -> tuple[MemoryService, list]:
    """The store opened again, and the indexing progress it reported on the way."""
    told: list = []
    reopened = MemoryService(harness.make_store(), progress=told.append)
    await reopened.open()
    return reopened, [state for state in told if state.label == "indexing"]


async def test_a_table_made_before_the_index_is_indexed_on_open(harness) -> None:
    svc = MemoryService(harness.make_store())
    for text in TEXTS:
        await svc.add(KEY, text)
    store = svc.store
    # What a table of the previous version looks like: no postings, no statistics, no version.
    async with store.engine.begin() as conn:
        await conn.execute(sa.delete(store.keyword_index.terms))
        await conn.execute(sa.delete(store.keyword_index.stats))
        meta = store.meta_table
        await conn.execute(sa.delete(meta).where(meta.c.name == store._meta_name(INDEX_META)))
    await svc.close()

    reopened, indexing = await _reopened_indexing(harness)
    try:
        # A progress line, as for filling in vectors: from 0 to every active memory.
        assert indexing[0].done == 0 and indexing[-1].finished and indexing[-1].total == len(TEXTS)
        assert indexing[-1].message() == f"Indexing {len(TEXTS)} memories for search… 100%"
        assert reopened.store._index_ready
        assert await _postings(reopened.store) > 0
        assert await _keyword(reopened, "cat") == ["Alice has a cat named Mochi"]
        assert await _keyword(reopened, "编程") == ["张三喜欢 Go 语言编程"]
        assert await reopened.store.read_meta(INDEX_META) == reopened.store.keyword_index.version()
    finally:
        await reopened.close()


async def test_a_memory_written_without_the_index_is_found_after_the_next_open(harness) -> None:
    svc = MemoryService(harness.make_store())
    for text in TEXTS:
        await svc.add(KEY, text)
    store = svc.store
    # An older memchat adds a row the way it did: the memories table only.
    row = store._row((await svc.read(KEY))[0])
    row.update(memory_id="f" * 64, memory="Alice plays the cello")
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(store.table).values(**row))
    assert await _keyword(svc, "cello") == []  # this process's index does not know it
    await svc.close()

    reopened = MemoryService(harness.make_store())
    try:
        assert await _keyword(reopened, "cello") == ["Alice plays the cello"]
        assert await _keyword(reopened, "cat") == ["Alice has a cat named Mochi"]
        assert await reopened.count(KEY) == 4
    finally:
        await reopened.close()


@pytest.mark.parametrize("layout", [1, 2])
async def test_an_index_of_an_older_layout_is_rebuilt_on_open(harness, layout: int) -> None:
    """Layout 1 of the index (postings keyed by memory ID, recorded as the bare
    index version) and layout 2 (document numbers without their times, in
    another table) are rebuilt on open with a progress line, ranking as before;
    their tables are left as they were, for an older memchat that still reads them."""
    from memchat.engine.search.index import INDEX_VERSION

    svc = MemoryService(harness.make_store())
    for text in [*TEXTS, "Bob has a cat too", "Alice's cat sleeps on the sofa"]:
        await svc.add(KEY, text)
    store = svc.store
    queries = ["cat", "Alice cat", "编程", "green tea"]
    before = {q: await _keyword(svc, q) for q in queries}
    async with store.engine.begin() as conn:
        await conn.execute(sa.delete(store.keyword_index.terms))
        await conn.execute(sa.delete(store.keyword_index.docs))
    # What layout 1 recorded, or layout 2 (whose tables this layout's are not).
    await store.write_meta(INDEX_META, str(INDEX_VERSION) if layout == 1 else f"{INDEX_VERSION}.2")
    await svc.close()

    reopened, indexing = await _reopened_indexing(harness)
    try:
        assert indexing and indexing[-1].finished and indexing[-1].total == len(TEXTS) + 2
        assert {q: await _keyword(reopened, q) for q in queries} == before
        assert await reopened.store.read_meta(INDEX_META) == reopened.store.keyword_index.version()
        assert before["cat"][0] != before["cat"][-1] and len(before["cat"]) == 3
    finally:
        await reopened.close()


async def test_a_number_freed_by_a_removal_names_the_next_memory_added(harness) -> None:
    """Document numbers follow the user's highest, so the number of the newest
    memory, once it is removed, goes to the next one added: this process's kept
    postings and names, and another process's reads, follow it."""
    svc = MemoryService(harness.make_store())
    for text in ["Alice has a cat", "Bob has a dog", "Carol has a cat and a dog"]:
        await svc.add(KEY, text)
    assert await _keyword(svc, "cat") == ["Alice has a cat", "Carol has a cat and a dog"]
    newest = (await svc.read(KEY, 1))[0]
    await svc.delete(KEY, newest.id)
    await svc.add(KEY, "Dave has a dog named Cat")
    docs = svc.store.keyword_index.docs
    async with svc.store.engine.connect() as conn:
        numbers = dict((await conn.execute(sa.select(docs.c.memory_id, docs.c.doc))).all())
    assert sorted(numbers.values()) == [1, 2, 3]  # Carol's 3 went to Dave
    expected = ["Dave has a dog named Cat", "Alice has a cat"]
    assert sorted(await _keyword(svc, "cat")) == sorted(expected)
    assert await _keyword(svc, "Carol") == []
    other = MemoryService(harness.make_store())
    try:
        assert await _keyword(other, "cat") == await _keyword(svc, "cat")
        assert await _keyword(other, "dog") == await _keyword(svc, "dog")
        assert len(await _keyword(other, "dog")) == 2
    finally:
        await other.close()
        await svc.close()


def test_long_terms_are_stored_shortened_and_distinct() -> None:
    from backends.sql_index import MAX_TERM, term_key

    a, b = "k:" + "x" * 300, "k:" + "x" * 299 + "y"
    assert len(term_key(a)) <= MAX_TERM and len(term_key(b)) <= MAX_TERM
    assert term_key(a) != term_key(b) and term_key("k:cat") == "k:cat"


async def test_a_table_made_before_the_newest_first_and_event_time_indexes_gets_them_on_open(harness) -> None:
    """``read`` walks an index in its own order (_sql_schema.newest_index) and a
    question naming a date reads the period's memories from another
    (_sql_schema.event_time_index); a table made before them gets them when
    opened, and reads and period lookups return what they did."""
    from datetime import UTC, datetime

    from backends._sql_schema import event_time_index, newest_index
    from memchat.engine import Metadata

    svc = MemoryService(harness.make_store())
    may = datetime(2023, 5, 1, tzinfo=UTC)
    for i, text in enumerate(TEXTS):
        await svc.add(KEY, text, metadata=Metadata(event_time=may.replace(day=1 + i % 28)))
    store = svc.store
    before = [e.id for e in await svc.read(KEY, 2)]
    period = [(may, may.replace(day=4))]
    listed = await store.memories_in_periods(KEY, period, 100)
    assert listed
    indexes = [newest_index(store.table), event_time_index(store.table)]

    def names(sync_conn: sa.Connection) -> set[str]:
        t = store.table
        return {i["name"] for i in sa.inspect(sync_conn).get_indexes(t.name, schema=t.schema)}

    async with store.engine.begin() as conn:
        for index in indexes:
            assert index.name in await conn.run_sync(names)
            await conn.run_sync(index.drop)  # what a table of an earlier version has
    await svc.close()

    reopened = MemoryService(harness.make_store())
    try:
        await reopened.open()
        async with reopened.store.engine.connect() as conn:
            assert {index.name for index in indexes} <= await conn.run_sync(names)
        assert [e.id for e in await reopened.read(KEY, 2)] == before
        again = await reopened.store.memories_in_periods(KEY, period, 100)
        assert again is not None and {e.id for e in again} == {e.id for e in listed}
    finally:
        await reopened.close()
