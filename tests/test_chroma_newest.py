"""The Chroma store's list of a user's newest memories (backends/_chroma_newest.py):
whatever the writes, it is the exact beginning of every store's newest-first order,
so ``read(limit)`` from it returns what reading every record would."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from backends import _chroma_newest as newest
from backends._ordering import newest_first
from memchat.engine.model import Entry, Memory

START = datetime(2026, 1, 1, tzinfo=UTC)


def entry(memory_id: str, updated: int, created: int, *, deleted: bool = False) -> Entry:
    at = START + timedelta(seconds=updated)
    return Entry(
        memory_id,
        "app",
        "user",
        Memory(text=f"memory {memory_id}"),
        START + timedelta(seconds=created),
        at,
        deleted_at=at if deleted else None,
    )


def test_random_sections_keep_the_list_the_beginning_of_the_true_order(monkeypatch) -> None:
    monkeypatch.setattr(newest, "KEPT", 16)  # a short list is often partial: the hard case
    rng = random.Random(7)
    stored: dict[str, Entry] = {}
    listed: list[newest.Item] = []
    answered = partial = 0
    created: dict[str, int] = {}
    for step in range(3000):
        # One section writes each memory once (its pending writes are keyed by ID).
        changes: dict[str, Entry | None] = {}
        for _ in range(rng.choice((1, 1, 1, 3, 20))):
            memory_id = f"m{rng.randrange(400):03d}"
            roll = rng.random()
            # Times repeat on purpose (ties go by ID), and some writes carry old times (an import).
            when = step if rng.random() < 0.8 else rng.randrange(step + 1)
            born = created.setdefault(memory_id, when) if memory_id in stored else when
            if roll < 0.6:
                changes[memory_id] = entry(memory_id, max(when, born), born)
            elif roll < 0.85:
                changes[memory_id] = None
            else:
                changes[memory_id] = entry(memory_id, max(when, born), born, deleted=True)
        active_before = sum(not e.is_deleted for e in stored.values())
        listed = newest.updated(listed, active_before, changes.items())
        for memory_id, written in changes.items():
            if written is None:
                stored.pop(memory_id, None)
                created.pop(memory_id, None)
            else:
                stored[memory_id] = written
                created[memory_id] = int((written.created_at - START).total_seconds())
        truth = [newest.item_of(e) for e in newest_first(e for e in stored.values() if not e.is_deleted)]
        assert listed == truth[: len(listed)], step
        assert len(listed) <= newest.KEPT
        partial += len(listed) < len(truth)
        limit = rng.choice((1, 5, 10, newest.KEPT, 500))
        if newest.readable(listed, len(truth), limit):
            answered += 1
            assert listed[:limit] == truth[:limit]
    assert partial > 1000 and answered > 1500  # the hard case came, and the list answered


def test_a_rebuild_lists_the_newest_active_memories_and_round_trips() -> None:
    entries = [entry(f"m{i:03d}", i % 37, i, deleted=i % 5 == 0) for i in range(300)]
    listed = newest.of_entries(entries)
    assert (
        listed
        == [newest.item_of(e) for e in newest_first(e for e in entries if not e.is_deleted)][: newest.KEPT]
    )
    assert newest.decode(newest.encode(listed)) == tuple(listed)
    assert newest.decode("not json") is None and newest.decode(None) is None
