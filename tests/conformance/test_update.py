"""The update state machine (reference §5 and the seed's table), every row."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from memchat.engine import MemoryConflictError, MemoryNotFoundError, Metadata, UserKey, memory_id

KEY = UserKey("test-app", "user-1")


@pytest.fixture(params=[False, True], ids=["hard", "soft"])
def soft(request) -> bool:
    return request.param


async def test_unchanged_identity_updates_in_place(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    entry = await svc.add(KEY, "User likes coffee", topics=["food"])
    result = await svc.update(KEY, entry.id, "User likes coffee", topics=["drinks"])
    assert result.memory_id == entry.id
    [stored] = await svc.read(KEY, include_deleted=True)
    assert stored.memory.topics == ("drinks",)
    assert stored.created_at == entry.created_at
    assert stored.updated_at > entry.updated_at


async def test_new_text_rotates_to_the_new_canonical_id(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    source = await svc.add(KEY, "User likes coffee", topics=["food"])
    result = await svc.update(KEY, source.id, "User likes tea", topics=["food"])
    assert result.memory_id == memory_id("User likes tea", KEY.app, KEY.user)
    [active] = await svc.read(KEY)
    assert active.id == result.memory_id
    assert active.memory.text == "User likes tea"
    # A newly inserted target inherits the source's creation time.
    assert active.created_at == source.created_at
    assert active.updated_at > source.updated_at
    with pytest.raises(MemoryNotFoundError):
        await svc.get(KEY, source.id)
    everything = {e.id: e for e in await svc.read(KEY, include_deleted=True)}
    if soft:
        # Soft mode keeps the source as a tombstone.
        assert everything[source.id].is_deleted
        assert len(everything) == 2
    else:
        assert set(everything) == {result.memory_id}


async def test_update_onto_an_active_memory_is_a_conflict_and_changes_nothing(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    tea = await svc.add(KEY, "User likes tea", topics=["a"])
    coffee = await svc.add(KEY, "User likes coffee", topics=["b"])
    before = {e.id: e for e in await svc.read(KEY, include_deleted=True)}
    with pytest.raises(MemoryConflictError, match=f"memory with id {tea.id} already exists"):
        await svc.update(KEY, coffee.id, "User likes tea", topics=["c"])
    after = {e.id: e for e in await svc.read(KEY, include_deleted=True)}
    assert after == before


async def test_soft_mode_revives_a_tombstoned_target_with_its_own_created_at(make_service) -> None:
    svc = make_service(soft_delete=True)
    tea = await svc.add(KEY, "User likes tea", topics=["old"])
    await svc.delete(KEY, tea.id)
    coffee = await svc.add(KEY, "User likes coffee")
    result = await svc.update(KEY, coffee.id, "User likes tea", topics=["new"])
    assert result.memory_id == tea.id
    revived = await svc.get(KEY, tea.id)
    assert revived.created_at == tea.created_at
    assert revived.memory.topics == ("new",)
    assert revived.updated_at > coffee.updated_at
    assert (await svc.get(KEY, coffee.id, include_deleted=True)).is_deleted
    assert [e.id for e in await svc.read(KEY)] == [tea.id]


async def test_hard_mode_replaces_a_stale_tombstone_and_inherits_the_source_created_at(make_service) -> None:
    soft_svc = make_service(soft_delete=True)
    tea = await soft_svc.add(KEY, "User likes tea")
    await soft_svc.delete(KEY, tea.id)  # a tombstone left by a soft-mode service
    hard_svc = make_service(soft_delete=False)
    coffee = await hard_svc.add(KEY, "User likes coffee")
    result = await hard_svc.update(KEY, coffee.id, "User likes tea")
    assert result.memory_id == tea.id
    replacement = await hard_svc.get(KEY, tea.id)
    assert replacement.created_at == coffee.created_at
    assert replacement.deleted_at is None
    assert [e.id for e in await hard_svc.read(KEY, include_deleted=True)] == [tea.id]


async def test_missing_or_deleted_source_is_not_found(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    with pytest.raises(MemoryNotFoundError, match="memory with id deadbeef not found"):
        await svc.update(KEY, "deadbeef", "anything")
    entry = await svc.add(KEY, "User likes coffee")
    await svc.delete(KEY, entry.id)
    with pytest.raises(MemoryNotFoundError):
        await svc.update(KEY, entry.id, "User likes tea")
    assert await svc.read(KEY) == []


async def test_a_tombstone_is_never_an_update_source_even_in_hard_mode(make_service) -> None:
    soft_svc = make_service(soft_delete=True)
    entry = await soft_svc.add(KEY, "User likes coffee")
    await soft_svc.delete(KEY, entry.id)
    hard_svc = make_service(soft_delete=False)
    with pytest.raises(MemoryNotFoundError):
        await hard_svc.update(KEY, entry.id, "User likes tea")


async def test_metadata_is_patched_not_cleared(make_service) -> None:
    svc = make_service()
    when = datetime(2024, 5, 1, tzinfo=UTC)
    entry = await svc.add(
        KEY,
        "User met Alice",
        metadata=Metadata(kind="episode", event_time=when, participants=["Alice"], location="Kyoto"),
    )
    assert entry.id == "368e55b92accc209e1e840780fde1397ff8adc895c5386af6acf07eb856944c7"
    result = await svc.update(
        KEY, entry.id, "User met Alice and Bob", metadata=Metadata(participants=["Bob"])
    )
    stored = await svc.get(KEY, result.memory_id)
    assert stored.memory.kind == "episode"
    assert stored.memory.event_time == when
    assert stored.memory.location == "Kyoto"
    assert stored.memory.participants == ("Bob",)
    again = await svc.update(KEY, result.memory_id, "User met Alice and Bob", metadata=None)
    assert again.memory_id == result.memory_id
    assert (await svc.get(KEY, again.memory_id)).memory.participants == ("Bob",)


async def test_topics_are_replaced_by_an_update(make_service) -> None:
    svc = make_service()
    entry = await svc.add(KEY, "Likes jazz", topics=["music", "evenings"])
    await svc.update(KEY, entry.id, "Likes jazz")
    assert (await svc.get(KEY, entry.id)).memory.topics == ()


async def test_two_concurrent_updates_of_one_memory_never_both_win(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    entry = await svc.add(KEY, "User likes coffee")
    results = await asyncio.gather(
        svc.update(KEY, entry.id, "User likes tea"),
        svc.update(KEY, entry.id, "User likes water"),
        return_exceptions=True,
    )
    wins = [r for r in results if not isinstance(r, BaseException)]
    losses = [r for r in results if isinstance(r, BaseException)]
    assert len(wins) == 1 and len(losses) == 1
    assert isinstance(losses[0], MemoryNotFoundError)
    [active] = await svc.read(KEY)
    assert active.id == wins[0].memory_id
