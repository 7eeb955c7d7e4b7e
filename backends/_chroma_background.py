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
from collections.abc import Awaitable, Callable, Hashable

from memchat.engine.search.scope import outside_search

log = logging.getLogger(__name__)

#: A background read: given the event that says the store is closing.
Read = Callable[[threading.Event], Awaitable[None]]


class BackgroundReads:
    """The store's background reads under way, by name."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, tuple[asyncio.Task[None], threading.Event]] = {}

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
