"""Reads shared within one search.

A search asks its store for several things at once (the keyword candidates
beside the query's embedding, then the nearest memories), and a store may need
the same small record for each: the Chroma store reads the user's statistics
(its index version) with the keyword postings, and again to know whether the
vectors it keeps are current. Over HTTP that second read is a round trip the
search waits for after the embedding, about a tenth of a small search.

The engine runs each search in a scope (:func:`one_search`); inside it a store
may hand the value of such a read to the later asks of the same search
(:func:`shared_read`, :func:`share`). Every read shared this way began after
the search did, so the search still sees every write that ended before it
began; outside a scope nothing is shared. Scopes are per task context
(``contextvars``): two searches running at once never see each other's reads.
A task a search starts to outlive it (a cache's background read) must run in
:func:`outside_search`'s context, or it would take the search's reads for its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import Context, ContextVar, copy_context
from typing import Any, TypeVar

T = TypeVar("T")

_READS: ContextVar[dict[Hashable, asyncio.Future[Any]] | None] = ContextVar(
    "memchat_search_reads", default=None
)


@contextmanager
def one_search() -> Iterator[None]:
    """Share reads among the store calls of the search run inside (nested: the outer one's)."""
    if _READS.get() is not None:
        yield
        return
    token = _READS.set({})
    try:
        yield
    finally:
        _READS.reset(token)


async def shared_read(name: Hashable, read: Callable[[], Awaitable[T]]) -> T:
    """``read()``, or, within a search that already read (or is reading) ``name``, its value."""
    reads = _READS.get()
    if reads is None:
        return await read()
    found = reads.get(name)
    if found is None:
        found = asyncio.ensure_future(read())
        # Its failure reaches every caller; retrieved here too, in case none is left.
        found.add_done_callback(lambda f: f.cancelled() or f.exception())
        reads[name] = found
    # A caller cancelled (its search's other half failed) leaves the read to the others.
    return await asyncio.shield(found)


def read_together(names: Sequence[Hashable], read: Callable[[], Awaitable[Sequence[Any]]]) -> None:
    """Start ``read()``, one read whose values (in order) answer ``names``: within
    this search, the later asks for any of them (:func:`shared_read`) wait for it
    instead of reading on their own. Outside a search, nothing."""
    reads = _READS.get()
    if reads is None or all(name in reads for name in names):
        return
    batch = asyncio.ensure_future(read())
    batch.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def value(index: int) -> Any:
        return (await asyncio.shield(batch))[index]

    for index, name in enumerate(names):
        if name not in reads:
            found = asyncio.ensure_future(value(index))
            found.add_done_callback(lambda f: f.cancelled() or f.exception())
            reads[name] = found


def share(name: Hashable, value: Any) -> None:
    """A value the search read as part of a larger read: later asks for ``name`` get it."""
    reads = _READS.get()
    if reads is None or name in reads:
        return
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    done.set_result(value)
    reads[name] = done


def outside_search() -> Context:
    """The current context with no search scope: for a task that outlives the search."""
    context = copy_context()
    context.run(_READS.set, None)
    return context
