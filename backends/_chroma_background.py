"""Reads a Chroma store runs beside its searches (a user's vectors, the postings
of a large user's commonest terms): at most one of each name at a time, none
outliving the store.

A read runs its blocking calls in worker threads, which a cancelled task does
not stop: each read is given an event, set when the store closes, that it
checks between requests, so a short-lived command does not wait at its exit for
the rest of a read it no longer needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator

from memchat.engine.search.scope import outside_search

log = logging.getLogger(__name__)

#: A background read: given the event that says the store is closing.
Read = Callable[[threading.Event], Awaitable[None]]


#: A background read asks for its next page only once no search of the store has
#: run for this long (s): searches asked back to back (an agent's burst, a
#: benchmark) leave gaps shorter than it, a person's questions far longer ones.
IDLE_S = 0.05
#: ... or once it has waited this long (s), so a process that never pauses still
#: gets the read done, a page at a time.
WAIT_AT_MOST_S = 2.0


class SearchActivity:
    """The store's searches under way and when the last one ended: a background
    read yields to them between its pages.

    At 10k memories, the read of a user's vectors and records that a fresh
    process's first search starts ran 3–5 s beside the next searches, which it
    slowed from 33–42 ms p95 to about 100 (the client's parse and the server's
    JSON on the same two cores). Pausing between pages while searches run keeps
    them at what they cost without it, and a person's next question, seconds
    later, finds the read done."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._last = 0.0

    @contextlib.contextmanager
    def search(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                self._last = time.monotonic()

    def pause(self, stopped: threading.Event) -> None:
        """Block (a worker thread) until no search ran for ``IDLE_S``, ``WAIT_AT_MOST_S``
        passed, or ``stopped`` is set."""
        give_up = time.monotonic() + WAIT_AT_MOST_S
        while not stopped.is_set():
            with self._lock:
                quiet = not self._running and time.monotonic() - self._last >= IDLE_S
            if quiet or time.monotonic() >= give_up:
                return
            stopped.wait(IDLE_S / 2)


class BackgroundReads:
    """The store's background reads under way, by name, and the searches they yield to."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, tuple[asyncio.Task[None], threading.Event]] = {}
        self.searches = SearchActivity()

    def running(self, name: Hashable) -> bool:
        return name in self._tasks

    def start(self, name: Hashable, read: Read) -> None:
        """Run ``read`` in the background, unless a read of that name is under way."""
        if name in self._tasks:
            return
        stopped = threading.Event()
        # Its reads of the statistics must be its own, not those of the search starting it.
        run = self._run(name, read, stopped)
        task = asyncio.get_running_loop().create_task(run, context=outside_search())
        self._tasks[name] = (task, stopped)
        task.add_done_callback(lambda _: self._tasks.pop(name, None))

    @staticmethod
    async def _run(name: Hashable, read: Read, stopped: threading.Event) -> None:
        try:
            await read(stopped)
        except Exception as exc:  # only a head start: the searches read what they need themselves
            log.debug("the background read %s failed: %s", name, exc)

    async def close(self) -> None:
        """Stop every read (nothing they read is needed any more)."""
        running = list(self._tasks.values())
        for task, stopped in running:
            stopped.set()
            task.cancel()
        for task, _ in running:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
