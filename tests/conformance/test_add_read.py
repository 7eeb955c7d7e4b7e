"""Adding and reading: canonical IDs, idempotent add, metadata, ordering."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from backends import BACKEND_NAMES
from memchat.engine import InvalidKeyError, InvalidMemoryError, Metadata, UserKey, memory_id

from .harness import HARNESSES

KEY = UserKey("test-app", "user-1")


def test_every_registered_backend_has_a_harness() -> None:
    assert set(HARNESSES) == set(BACKEND_NAMES)


async def test_add_returns_the_canonical_id_and_read_returns_the_memory(make_service) -> None:
    svc = make_service()
    entry = await svc.add(KEY, "User likes coffee", topics=["food", "drinks"])
    assert entry.id == "3102230037d4eec7b4e713ccded4bf31f75d0401cf485998052b234f158eb22a"
    [read] = await svc.read(KEY)
    assert read.id == entry.id
    assert (read.app, read.user) == ("test-app", "user-1")
    assert read.memory.text == "User likes coffee"
    assert read.memory.topics == ("food", "drinks")
    assert read.memory.kind == "fact"
    assert read.created_at == read.updated_at == entry.created_at
    assert read.created_at.tzinfo is not None and read.created_at.utcoffset().total_seconds() == 0
    assert read.deleted_at is None
    assert await svc.count(KEY) == 1


async def test_re_adding_is_an_idempotent_upsert(make_service) -> None:
    svc = make_service()
    first = await svc.add(KEY, "User likes coffee", topics=["food"])
    second = await svc.add(KEY, "User likes coffee", topics=["drinks", "morning"])
    assert second.id == first.id
    [stored] = await svc.read(KEY)
    assert stored.memory.topics == ("drinks", "morning")
    assert stored.created_at == first.created_at
    assert stored.updated_at > first.updated_at
    assert await svc.count(KEY) == 1


async def test_episode_metadata_round_trips_normalised(make_service) -> None:
    svc = make_service()
    when = datetime(2024, 5, 1, tzinfo=UTC)
    meta = Metadata(
        kind="episode", event_time=when, participants=["Bob", " Alice ", "Bob", "alice"], location="  Kyoto "
    )
    entry = await svc.add(KEY, "User met friends", topics=["travel"], metadata=meta)
    [stored] = await svc.read(KEY)
    assert stored.id == entry.id
    assert stored.memory.kind == "episode"
    assert stored.memory.event_time == when
    assert stored.memory.participants == ("Alice", "Bob")
    assert stored.memory.location == "Kyoto"
    same = Metadata(kind="episode", event_time=when, participants=["Alice", "Bob"], location="Kyoto")
    assert entry.id == memory_id("User met friends", "test-app", "user-1", same)


async def test_same_text_with_different_metadata_is_a_different_memory(make_service) -> None:
    svc = make_service()
    plain = await svc.add(KEY, "Went hiking")
    dated = await svc.add(
        KEY, "Went hiking", metadata=Metadata(kind="episode", event_time=datetime(2024, 1, 2, tzinfo=UTC))
    )
    placed = await svc.add(KEY, "Went hiking", metadata=Metadata(location="Alps"))
    assert len({plain.id, dated.id, placed.id}) == 3
    assert await svc.count(KEY) == 3
    assert placed.memory.kind == "fact"


async def test_topics_are_not_part_of_identity(make_service) -> None:
    svc = make_service()
    a = await svc.add(KEY, "Likes jazz", topics=["music"])
    b = await svc.add(KEY, "Likes jazz", topics=["evenings", "music"])
    assert a.id == b.id
    assert a.id == memory_id("Likes jazz", KEY.app, KEY.user)


async def test_read_is_newest_first_and_honours_limit(make_service) -> None:
    svc = make_service()
    texts = [f"memory number {i}" for i in range(6)]
    for text in texts:
        await svc.add(KEY, text)
    await svc.add(KEY, "memory number 1")  # re-adding refreshes: it becomes the newest
    read = [e.memory.text for e in await svc.read(KEY)]
    assert read == [
        "memory number 1",
        "memory number 5",
        "memory number 4",
        "memory number 3",
        "memory number 2",
        "memory number 0",
    ]
    assert [e.memory.text for e in await svc.read(KEY, limit=2)] == read[:2]
    assert await svc.read(KEY, limit=0) == await svc.read(KEY)


async def test_unknown_user_reads_empty(make_service) -> None:
    svc = make_service()
    assert await svc.read(UserKey("test-app", "nobody")) == []
    assert await svc.count(UserKey("test-app", "nobody")) == 0
    assert await svc.search(UserKey("test-app", "nobody"), "anything") == []


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (UserKey("", "u"), "appName is required"),
        (UserKey("a", ""), "userID is required"),
        (UserKey("", ""), "appName is required"),
    ],
)
async def test_invalid_keys_are_rejected_in_the_reference_order(make_service, key, message) -> None:
    svc = make_service()
    with pytest.raises(InvalidKeyError, match=message):
        await svc.add(key, "text")
    with pytest.raises(InvalidKeyError, match=message):
        await svc.read(key)


@pytest.mark.parametrize("text", ["", "   \n\t", "x" * 10_001])
async def test_unusable_text_is_rejected_and_nothing_is_stored(make_service, text) -> None:
    svc = make_service()
    with pytest.raises(InvalidMemoryError):
        await svc.add(KEY, text)
    assert await svc.count(KEY, include_deleted=True) == 0


async def test_many_concurrent_adds_all_land(make_service) -> None:
    svc = make_service()
    await asyncio.gather(*(svc.add(KEY, f"concurrent fact {i}") for i in range(40)))
    assert await svc.count(KEY) == 40
    assert len({e.id for e in await svc.read(KEY)}) == 40
