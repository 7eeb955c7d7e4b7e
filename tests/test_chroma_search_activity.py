"""A Chroma store's background reads (a user's vectors, a large user's commonest
terms) yield to its searches between pages (backends/_chroma_background.py):
at 10k memories a fresh process's searches beside the read took about 100 ms
p95 against 33–42 without it."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

import backends._chroma_background as background
from backends._chroma_background import SearchActivity
from backends._chroma_records import pages


class FakeCollection:
    """Answers ``get`` as Chroma does, logging when each page was asked for."""

    def __init__(self, n: int) -> None:
        self.ids = [f"r{i}" for i in range(n)]
        self.asked: list[tuple[float, list[str]]] = []

    def get(self, ids: list[str] | None = None, where: object = None, include: object = None) -> dict:
        if ids is None:
            return {"ids": list(self.ids)}
        self.asked.append((time.monotonic(), list(ids)))
        return {"ids": list(ids), "documents": list(ids)}


def _read_in_thread(activity: SearchActivity, collection: FakeCollection, stopped: threading.Event):
    read: list[str] = []

    def run() -> None:
        pause = lambda: activity.pause(stopped)  # noqa: E731
        for page in pages(collection, {}, ["documents"], 2, stopped, pause):
            read.extend(page["ids"])

    thread = threading.Thread(target=run)
    thread.start()
    return thread, read


def test_a_background_read_asks_for_no_page_while_a_search_runs() -> None:
    activity, collection, stopped = SearchActivity(), FakeCollection(6), threading.Event()
    with activity.search():
        thread, read = _read_in_thread(activity, collection, stopped)
        time.sleep(0.3)
        assert collection.asked == []  # the search is still running
        ended = time.monotonic()
    thread.join(5)
    assert read == collection.ids  # every record, once the search ended
    assert collection.asked[0][0] >= ended + background.IDLE_S * 0.9


def test_a_read_beside_searches_that_never_pause_still_gets_done(monkeypatch) -> None:
    monkeypatch.setattr(background, "WAIT_AT_MOST_S", 0.1)
    activity, collection, stopped = SearchActivity(), FakeCollection(6), threading.Event()
    with activity.search():
        thread, read = _read_in_thread(activity, collection, stopped)
        thread.join(5)
        assert read == collection.ids
    # A page at a time, each after waiting its turn.
    times = [t for t, _ in collection.asked]
    assert len(times) == 3
    assert all(b - a >= 0.09 for a, b in itertools.pairwise(times))


def test_closing_the_store_ends_the_wait() -> None:
    activity, collection, stopped = SearchActivity(), FakeCollection(6), threading.Event()
    with activity.search():
        thread, read = _read_in_thread(activity, collection, stopped)
        time.sleep(0.1)
        stopped.set()
        thread.join(1)
        assert not thread.is_alive()
    assert read == [] and collection.asked == []


@pytest.mark.parametrize("searches", [0, 1])
def test_no_search_no_wait(searches: int) -> None:
    """Without a search under way (or one that ended long ago) pages follow at once."""
    activity, collection, stopped = SearchActivity(), FakeCollection(6), threading.Event()
    for _ in range(searches):
        with activity.search():
            pass
    time.sleep(background.IDLE_S * 1.5)
    started = time.monotonic()
    thread, read = _read_in_thread(activity, collection, stopped)
    thread.join(5)
    assert read == collection.ids
    assert time.monotonic() - started < 1.0
