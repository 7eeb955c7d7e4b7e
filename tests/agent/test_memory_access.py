"""runner.memory, the UI's one door to the memories: every call is the runner's
user's, whatever memory ID the UI passes."""

from __future__ import annotations

import pytest

from backends import create
from memchat.agent.runner import Runner
from memchat.engine import MemoryService
from memchat.engine.model import MemoryNotFoundError, UserKey
from memchat.engine.vectors import NO_EMBEDDER

from .scripted_model import ScriptedModel


@pytest.fixture
async def service():
    svc = MemoryService(create("inmemory"), soft_delete=True, embedder=NO_EMBEDDER)
    yield svc
    await svc.close()


async def test_reads_searches_and_changes_only_the_runners_user(service) -> None:
    ann = Runner(ScriptedModel([]), service, user="ann")
    bob = UserKey(ann.key.app, "bob")
    mine = await service.add(ann.key, "User likes green tea", topics=["drinks"])
    theirs = await service.add(bob, "User likes green tea and coffee", topics=["drinks"])
    memory = ann.memory

    assert memory.backend == "inmemory" and memory.soft_delete
    assert [e.id for e in await memory.read()] == [mine.id]
    assert [e.id for e in await memory.search("green tea", 5)] == [mine.id]
    assert await memory.count() == 1
    with pytest.raises(MemoryNotFoundError):
        await memory.delete(theirs.id)  # another user's ID: not found, nothing deleted
    assert await service.count(bob) == 1

    await memory.delete(mine.id)
    assert await memory.count() == 0
    assert [e.id for e in await memory.read(include_deleted=True)] == [mine.id]  # a tombstone
    restored = await memory.restore(mine.id)
    assert restored.memory.text == "User likes green tea" and await memory.count() == 1
