"""Soft and hard delete, restore, clear, and the per-user limit."""

from __future__ import annotations

import pytest

from memchat.engine import MemoryLimitError, MemoryNotFoundError, UserKey

KEY = UserKey("test-app", "user-1")
OTHER = UserKey("test-app", "user-2")


async def test_hard_delete_removes_the_memory_for_good(make_service) -> None:
    svc = make_service(soft_delete=False)
    entry = await svc.add(KEY, "User likes coffee")
    await svc.delete(KEY, entry.id)
    assert await svc.read(KEY, include_deleted=True) == []
    with pytest.raises(MemoryNotFoundError):
        await svc.get(KEY, entry.id, include_deleted=True)
    with pytest.raises(MemoryNotFoundError):
        await svc.restore(KEY, entry.id)


async def test_soft_delete_hides_the_memory_and_restore_brings_it_back_as_it_was(make_service) -> None:
    svc = make_service(soft_delete=True)
    entry = await svc.add(KEY, "User likes coffee", topics=["food"])
    await svc.delete(KEY, entry.id)
    assert await svc.read(KEY) == []
    assert await svc.search(KEY, "coffee") == []
    assert await svc.count(KEY) == 0
    tomb = await svc.get(KEY, entry.id, include_deleted=True)
    assert tomb.is_deleted and tomb.deleted_at >= entry.updated_at
    restored = await svc.restore(KEY, entry.id)
    assert restored.deleted_at is None
    assert (restored.created_at, restored.updated_at, restored.memory) == (
        entry.created_at,
        entry.updated_at,
        entry.memory,
    )
    assert [e.id for e in await svc.search(KEY, "coffee")] == [entry.id]


async def test_deleting_a_missing_or_already_deleted_memory_is_not_found(make_service) -> None:
    svc = make_service(soft_delete=True)
    with pytest.raises(MemoryNotFoundError):
        await svc.delete(KEY, "0" * 64)
    entry = await svc.add(KEY, "User likes coffee")
    await svc.delete(KEY, entry.id)
    with pytest.raises(MemoryNotFoundError):
        await svc.delete(KEY, entry.id)


async def test_tombstones_are_hidden_from_a_hard_mode_service_too(make_service) -> None:
    soft_svc = make_service(soft_delete=True)
    entry = await soft_svc.add(KEY, "User likes coffee")
    await soft_svc.delete(KEY, entry.id)
    hard_svc = make_service(soft_delete=False)
    assert await hard_svc.read(KEY) == []
    assert await hard_svc.search(KEY, "coffee") == []
    assert await hard_svc.count(KEY) == 0


async def test_re_adding_a_deleted_memory_reactivates_it_and_keeps_created_at(make_service) -> None:
    svc = make_service(soft_delete=True)
    entry = await svc.add(KEY, "User likes coffee", topics=["old"])
    await svc.delete(KEY, entry.id)
    again = await svc.add(KEY, "User likes coffee", topics=["new"])
    assert again.id == entry.id
    [active] = await svc.read(KEY)
    assert active.created_at == entry.created_at
    assert active.memory.topics == ("new",)
    assert await svc.count(KEY, include_deleted=True) == 1


@pytest.mark.parametrize("soft", [False, True], ids=["hard", "soft"])
async def test_clear_removes_only_this_users_memories(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    for i in range(3):
        await svc.add(KEY, f"fact {i}")
    await svc.add(OTHER, "someone else's fact")
    assert await svc.clear(KEY) == 3
    assert await svc.read(KEY) == []
    assert await svc.count(KEY, include_deleted=True) == (3 if soft else 0)
    assert [e.memory.text for e in await svc.read(OTHER)] == ["someone else's fact"]
    assert await svc.clear(KEY) == 0


async def test_the_limit_stops_new_memories_with_a_clear_error(make_service) -> None:
    svc = make_service(limit=3)
    entries = [await svc.add(KEY, f"fact {i}") for i in range(3)]
    with pytest.raises(MemoryLimitError) as info:
        await svc.add(KEY, "one too many")
    assert "memory limit exceeded for user user-1, limit: 3, current: 3" in str(info.value)
    assert await svc.count(KEY) == 3
    # Re-adding or updating an existing memory never trips it.
    await svc.add(KEY, "fact 0", topics=["refreshed"])
    await svc.update(KEY, entries[1].id, "fact one, rewritten")
    assert await svc.count(KEY) == 3
    # The limit is per user.
    await svc.add(OTHER, "another user's first fact")


async def test_the_default_limit_is_1000(make_service) -> None:
    svc = make_service()
    assert svc.limit == 1000


async def test_reviving_or_restoring_at_the_limit_is_blocked(make_service) -> None:
    svc = make_service(soft_delete=True, limit=2)
    gone = await svc.add(KEY, "fact 0")
    await svc.delete(KEY, gone.id)
    await svc.add(KEY, "fact 1")
    await svc.add(KEY, "fact 2")
    with pytest.raises(MemoryLimitError):
        await svc.add(KEY, "fact 0")
    with pytest.raises(MemoryLimitError):
        await svc.restore(KEY, gone.id)
    assert (await svc.get(KEY, gone.id, include_deleted=True)).is_deleted
    # Tombstones do not count: deleting makes room again.
    [newest, _] = await svc.read(KEY)
    await svc.delete(KEY, newest.id)
    assert (await svc.restore(KEY, gone.id)).deleted_at is None


async def test_limit_zero_means_unlimited(make_service) -> None:
    svc = make_service(limit=0)
    for i in range(5):
        await svc.add(KEY, f"fact {i}")
    assert await svc.count(KEY) == 5
