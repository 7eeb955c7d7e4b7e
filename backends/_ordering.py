"""The one "newest first" order every store returns (reference §1.5)."""

from __future__ import annotations

from collections.abc import Iterable

from memchat.engine.model import Entry


def newest_first(entries: Iterable[Entry]) -> list[Entry]:
    """updated_at desc, then created_at desc, then id asc."""
    ordered = sorted(entries, key=lambda e: e.id)
    ordered.sort(key=lambda e: (e.updated_at, e.created_at), reverse=True)
    return ordered


def newest(entries: Iterable[Entry], limit: int) -> list[Entry]:
    """The ``limit`` first of :func:`newest_first` (one pass, no full sort)."""
    import heapq

    return heapq.nsmallest(
        limit, entries, key=lambda e: (-e.updated_at.timestamp(), -e.created_at.timestamp(), e.id)
    )
