"""The newest memories of a Chroma user, kept in the keyword index's statistics
record (backends/_chroma_index.py), so that ``read(limit)`` is one record read
and the ``limit`` memories it names, not every record of the user.

Chroma filters records but cannot sort them: without this, the newest ten of a
user holding 10,000 memories meant reading all 10,000 with their documents
(about two seconds). The statistics record holds ``newest``: up to ``KEPT``
items (updated_at, created_at in microseconds, memory ID), newest first in
every store's order (backends/_ordering.py), and ``newest_version``: the
statistics' version it was written with (a writer that does not keep the list
changes the version without it: the list is then not used).

The list is always the exact beginning of the user's active memories in that
order: a write section takes out the memories it changes and puts back the
active ones, and when the list is shorter than the user's active count (it
holds only a beginning) a memory that would fall after its last item is left
out, since an unlisted memory might come before it. Deleting listed memories
shortens the list; a rebuild of the user's index fills it again.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Sequence

from memchat.engine.model import Entry, to_micros

#: The most memories the list holds: ``read`` of more reads every record.
KEPT = 100

#: (updated_at µs, created_at µs, memory ID)
Item = tuple[int, int, str]


def order(item: Item) -> tuple[int, int, str]:
    """Sort key, newest first: updated_at desc, created_at desc, ID asc."""
    return (-item[0], -item[1], item[2])


def item_of(entry: Entry) -> Item:
    return (to_micros(entry.updated_at), to_micros(entry.created_at), entry.id)


def of_entries(entries: Iterable[Entry]) -> list[Item]:
    """The list of a user whose active memories are ``entries``."""
    return heapq.nsmallest(KEPT, (item_of(e) for e in entries if not e.is_deleted), key=order)


def updated(items: Sequence[Item], active: int, changes: Iterable[tuple[str, Entry | None]]) -> list[Item]:
    """The list after a section's ``changes`` (memory ID → the entry written, None:
    removed), given the list before and the user's ``active`` count before."""
    partial = len(items) < active
    last = order(items[-1]) if items else None
    changes = list(changes)
    changed = {memory_id for memory_id, _ in changes}
    kept = [item for item in items if item[2] not in changed]
    for _, entry in changes:
        if entry is None or entry.is_deleted:
            continue
        item = item_of(entry)
        # With only a beginning listed, a memory past its end may have unlisted ones before it.
        if partial and (last is None or order(item) > last):
            continue
        kept.append(item)
    kept.sort(key=order)
    return kept[:KEPT]


def encode(items: Sequence[Item]) -> str:
    return json.dumps([list(item) for item in items], separators=(",", ":"))


def decode(text: object) -> tuple[Item, ...] | None:
    """The list stored as ``text`` (None: none, or not readable)."""
    if not isinstance(text, str):
        return None
    try:
        return tuple((int(u), int(c), str(i)) for u, c, i in json.loads(text))
    except (ValueError, TypeError):
        return None


def readable(items: Sequence[Item] | None, active: int, limit: int) -> bool:
    """Whether the list answers ``read(limit)`` (``limit`` > 0) of a user with ``active`` memories."""
    return items is not None and (limit <= len(items) or len(items) >= active)
