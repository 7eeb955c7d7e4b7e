"""Reads shared within one search (memchat/engine/search/scope.py): within a
search a read is made once; two searches at once, a search and what runs
outside one, and a task a search starts to outlive it never share a read."""

from __future__ import annotations

import asyncio

from memchat.engine.search.scope import one_search, outside_search, share, shared_read


class Reads:
    def __init__(self) -> None:
        self.made = 0

    async def read(self) -> int:
        self.made += 1
        made = self.made
        await asyncio.sleep(0.01)
        return made


async def test_a_search_reads_once_what_its_parts_ask_for_at_once_or_later() -> None:
    reads = Reads()
    with one_search():
        together = await asyncio.gather(*(shared_read("stats", reads.read) for _ in range(3)))
        later = await shared_read("stats", reads.read)
    assert together == [1, 1, 1] and later == 1 and reads.made == 1
    assert await shared_read("stats", reads.read) == 2  # no search: read afresh


async def test_what_a_larger_read_brought_is_handed_on_and_not_overwritten() -> None:
    reads = Reads()
    with one_search():
        share("stats", "from the postings")
        share("stats", "another")
        assert await shared_read("stats", reads.read) == "from the postings"
    assert reads.made == 0


async def test_searches_at_once_and_tasks_that_outlive_a_search_read_for_themselves() -> None:
    reads = Reads()

    async def search() -> int:
        with one_search():
            return await shared_read("stats", reads.read)

    assert sorted(await asyncio.gather(search(), search())) == [1, 2]
    with one_search():
        first = await shared_read("stats", reads.read)
        background = asyncio.get_running_loop().create_task(
            shared_read("stats", reads.read), context=outside_search()
        )
        assert await background != first
    assert reads.made == 4
