"""Isolation between (app, user) scopes, and hostile text stored verbatim."""

from __future__ import annotations

import pytest

from memchat.engine import SEARCH_MODES, InvalidMemoryError, MemoryNotFoundError, SearchOptions, UserKey

ALICE = UserKey("memory-chat", "alice")
BOB = UserKey("memory-chat", "bob")
ALICE_OTHER_APP = UserKey("other-app", "alice")

HOSTILE_KEYS = [
    "*",
    "user:*",
    "a:b:c",
    "{alice}",
    "mem:{memory-chat:alice}",
    "with space",
    "rtl\u200fmark and zero\u200bwidth",
    "'; DROP TABLE memories; --",
    "%",
    "_",
    "\\",
    "ユーザー",
    "🙂",
    "a" * 255,
]

HOSTILE_TEXTS = [
    "'; DROP TABLE memories; --",
    'Robert"); DELETE FROM memories WHERE ("1"="1',
    "100% of _everything_ \\ matches? LIKE '%'",
    "KEYS * ; FLUSHALL",
    "mem:{memory-chat:bob}",
    "emoji 🎉👩‍👩‍👧 and CJK 张三喜欢 Go 语言编程 and かな and 한국어",
    "right-to-left עברית العربية",
    "combining: e\u0301 vs é, zero-width\u200bjoiner",
    "line one\nline two\r\n\ttabbed",
    '{"json": [1, 2, {"nested": null}]}',
    "  leading and trailing spaces are kept  ",
    "x" * 10_000,
]


async def test_another_users_id_is_not_found_and_never_touched(make_service) -> None:
    svc = make_service(soft_delete=True)
    mine = await svc.add(ALICE, "Alice likes tea")
    for key in (BOB, ALICE_OTHER_APP):
        with pytest.raises(MemoryNotFoundError):
            await svc.get(key, mine.id)
        with pytest.raises(MemoryNotFoundError):
            await svc.update(key, mine.id, "hijacked")
        with pytest.raises(MemoryNotFoundError):
            await svc.delete(key, mine.id)
        with pytest.raises(MemoryNotFoundError):
            await svc.restore(key, mine.id)
        assert await svc.read(key) == []
        assert await svc.search(key, "tea") == []
        assert await svc.clear(key) == 0
    [still] = await svc.read(ALICE)
    assert still == mine


async def test_same_text_for_two_users_is_two_memories(make_service) -> None:
    svc = make_service()
    a = await svc.add(ALICE, "Likes tea")
    b = await svc.add(BOB, "Likes tea")
    c = await svc.add(ALICE_OTHER_APP, "Likes tea")
    assert len({a.id, b.id, c.id}) == 3
    await svc.delete(BOB, b.id)
    assert [e.id for e in await svc.read(ALICE)] == [a.id]
    assert [e.id for e in await svc.read(ALICE_OTHER_APP)] == [c.id]


@pytest.mark.parametrize("user", HOSTILE_KEYS)
async def test_hostile_user_ids_are_isolated(make_service, user) -> None:
    svc = make_service()
    key = UserKey("memory-chat", user)
    await svc.add(ALICE, "Alice's secret")
    await svc.add(BOB, "Bob's secret")
    entry = await svc.add(key, f"memory of {user!r}")
    assert [e.id for e in await svc.read(key)] == [entry.id]
    # Search ranks this user's memories only: the others' secrets never appear, in any mode.
    for mode in SEARCH_MODES:
        found = await svc.search(key, "secret", SearchOptions(mode=mode))
        assert [(e.user, e.memory.text) for e in found] in ([], [(user, f"memory of {user!r}")])
    assert await svc.clear(key) == 1
    assert await svc.count(ALICE) == 1 and await svc.count(BOB) == 1


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
async def test_hostile_and_unicode_text_is_stored_verbatim(make_service, text) -> None:
    svc = make_service()
    topics = [text[:100], "topic with 'quotes' and \"doubles\"", "🏷️"]
    entry = await svc.add(ALICE, text, topics=topics)
    [stored] = await svc.read(ALICE)
    assert stored.memory.text == text
    assert stored.memory.topics == tuple(t.strip() for t in topics)
    assert (await svc.get(ALICE, entry.id)).memory.text == text
    assert await svc.count(BOB) == 0


async def test_a_nul_character_is_rejected_with_a_clear_error(make_service) -> None:
    svc = make_service()
    with pytest.raises(InvalidMemoryError, match="NUL"):
        await svc.add(ALICE, "before\x00after")
    assert await svc.count(ALICE) == 0
