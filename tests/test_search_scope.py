"""Reads shared within one search (memchat/engine/search/scope.py): within a
search a read is made once; two searches at once, a search and what runs
outside one, and a task a search starts to outlive it never share a read."""

from __future__ import annotations

import asyncio

import pytest

from memchat.engine.search.scope import one_search, outside_search, read_together, share, shared_read


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


async def test_one_read_answers_several_names_asked_later_in_the_search() -> None:
    batches: list[list[str]] = []

    async def embed(texts: list[str]) -> list[str]:
        batches.append(texts)
        await asyncio.sleep(0.01)
        return [t.upper() for t in texts]

    async def alone(text: str) -> str:
        return (await embed([text]))[0]

    with one_search():
        read_together(["a", "b"], lambda: embed(["a", "b"]))
        read_together(["a", "b"], lambda: embed(["a", "b"]))  # already under way: nothing more
        got = await asyncio.gather(shared_read("b", lambda: alone("b")), shared_read("a", lambda: alone("a")))
        other = await shared_read("c", lambda: alone("c"))
    assert got == ["B", "A"] and other == "C"
    assert batches == [["a", "b"], ["c"]]
    read_together(["d", "e"], lambda: embed(["d", "e"]))  # no search: nothing is started
    await asyncio.sleep(0.02)
    assert batches == [["a", "b"], ["c"]]


async def test_a_failed_read_together_fails_each_ask_of_it() -> None:
    async def broken() -> list[str]:
        raise RuntimeError("model gone")

    with one_search():
        read_together(["a", "b"], broken)
        for name in ("a", "b"):
            with pytest.raises(RuntimeError, match="model gone"):
                await shared_read(name, broken)
