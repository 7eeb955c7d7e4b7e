"""One contract for every session store, run on the real backends (inmemory,
SQLite, Redis, MariaDB, PostgreSQL): what is appended comes back in order,
sessions are listed newest first with their counts, search finds text in
titles and messages, rename and delete work and say when a session is
missing, users never see each other's sessions, and typed inputs persist."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from memchat.engine import UserKey
from memchat.engine.model import ConfigError
from memchat.sessions.model import SessionInfo, SessionNotFoundError, SessionRecord

ALICE = UserKey("memory-chat", "alice")
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def user(text: str, when: float = 0) -> SessionRecord:
    return SessionRecord("message", {"role": "user", "content": text}, {}, at(when))


def answer(text: str, when: float = 0, calls=()) -> SessionRecord:
    data = {"role": "assistant", "content": text or None}
    if calls:
        data["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
    return SessionRecord("message", data, {}, at(when))


def tool(call_id: str, content: str, when: float = 0, *, error: bool = False) -> SessionRecord:
    return SessionRecord(
        "message",
        {"role": "tool", "tool_call_id": call_id, "content": content},
        {"name": "memory_add", "is_error": error, "elapsed": 0.25},
        at(when),
    )


def session(sid: str, title: str = "", when: float = 0) -> SessionInfo:
    return SessionInfo(
        id=sid, title=title or sid, created_at=at(when), updated_at=at(when), model="m", backend="b"
    )


async def test_appended_records_come_back_in_order_exactly(make_sessions) -> None:
    store = make_sessions()
    await store.open()
    turn = [
        user("I like Go 🐹 and 中文", 1),
        answer("", 2, [("call_1", "memory_add", '{"memory": "User likes Go"}')]),
        tool("call_1", '{"message": "Memory added"}', 3),
        SessionRecord("stats", {"elapsed": 1.5, "tool_calls": 1, "model": "offline"}, {}, at(4)),
        answer("Got it.", 5),
    ]
    info = await store.append(ALICE, session("s1", "I like Go"), turn[:1])
    assert (info.id, info.title, info.message_count, info.record_count) == ("s1", "I like Go", 1, 1)
    info = await store.append(ALICE, session("s1", "ignored: the title is set once"), turn[1:])
    assert (info.title, info.message_count, info.record_count) == ("I like Go", 2, 5)
    assert info.updated_at == at(5) and info.created_at == at(0)

    back = await store.records(ALICE, "s1")
    assert [r.seq for r in back] == [0, 1, 2, 3, 4]
    assert [(r.kind, r.data, r.meta) for r in back] == [(r.kind, r.data, r.meta) for r in turn]
    assert [r.created_at for r in back] == [r.created_at for r in turn]
    assert back[2].meta == {"name": "memory_add", "is_error": False, "elapsed": 0.25}

    got = await store.get(ALICE, "s1")
    assert got is not None and (got.model, got.backend, got.message_count) == ("m", "b", 2)
    assert await store.get(ALICE, "nope") is None
    assert await store.records(ALICE, "nope") == []


async def test_sessions_are_listed_by_last_activity_with_a_limit(make_sessions) -> None:
    store = make_sessions()
    await store.open()
    await store.append(ALICE, session("old", when=0), [user("first", 10)])
    await store.append(ALICE, session("new", when=20), [user("second", 30)])
    assert [s.id for s in await store.list(ALICE)] == ["new", "old"]
    await store.append(ALICE, session("old"), [answer("later", 40)])  # old is active again
    listed = await store.list(ALICE)
    assert [s.id for s in listed] == ["old", "new"]
    assert [s.message_count for s in listed] == [2, 1]
    assert [s.id for s in await store.list(ALICE, limit=1)] == ["old"]


async def test_search_finds_text_in_titles_and_messages_ignoring_case(make_sessions) -> None:
    store = make_sessions()
    await store.open()
    await store.append(
        ALICE, session("go", "Talking about Go"), [user("I like Go", 1), answer("Noted: GoLang", 2)]
    )
    await store.append(ALICE, session("tea", "Drinks"), [user("我喜欢喝绿茶", 3)])
    await store.append(
        ALICE,
        session("tools", "Tools"),
        [user("x", 4), answer("", 5, [("c", "memory_search", '{"query": "kitten"}')])],
    )
    assert [s.id for s in await store.list(ALICE, query="golang")] == ["go"]
    assert [s.id for s in await store.list(ALICE, query="TALKING")] == ["go"]
    assert [s.id for s in await store.list(ALICE, query="绿茶")] == ["tea"]
    assert [s.id for s in await store.list(ALICE, query="kitten")] == ["tools"]
    assert await store.list(ALICE, query="100%_") == []  # LIKE wildcards are text
    await store.append(ALICE, session("pct"), [user("a discount of 100%_ off", 6)])
    assert [s.id for s in await store.list(ALICE, query="100%_")] == ["pct"]


async def test_rename_and_delete_and_their_errors(make_sessions) -> None:
    store = make_sessions()
    await store.open()
    await store.append(ALICE, session("s1", "first title"), [user("hello", 1)])
    await store.append(ALICE, session("s2"), [user("other", 2)])
    renamed = await store.rename(ALICE, "s1", "  A   better  title ")
    assert renamed.title == "A better title"
    assert (await store.get(ALICE, "s1")).title == "A better title"
    with pytest.raises(ConfigError, match="empty"):
        await store.rename(ALICE, "s1", "   ")
    with pytest.raises(SessionNotFoundError, match="no saved session 'nope'"):
        await store.rename(ALICE, "nope", "x")
    await store.delete(ALICE, "s1")
    assert await store.get(ALICE, "s1") is None and await store.records(ALICE, "s1") == []
    assert [s.id for s in await store.list(ALICE)] == ["s2"]
    with pytest.raises(SessionNotFoundError):
        await store.delete(ALICE, "s1")
    with pytest.raises(SessionNotFoundError):  # a rename never brings a deleted session back
        await store.rename(ALICE, "s1", "back?")
    assert await store.get(ALICE, "s1") is None


@pytest.mark.parametrize(
    "other",
    [UserKey("memory-chat", "bob"), UserKey("other-app", "alice"), UserKey("memory-chat", "Alice"),
     UserKey("memory-chat", "alice "), UserKey("memory-chat:alice", "x"), UserKey("memory-chat", "*")],
)  # fmt: skip
async def test_users_never_see_each_others_sessions(make_sessions, other) -> None:
    store = make_sessions()
    await store.open()
    await store.append(ALICE, session("shared-id", "alice's"), [user("alice secret", 1)])
    await store.append(other, session("shared-id", "theirs"), [user("their text", 2)])
    assert [(s.id, s.title) for s in await store.list(ALICE)] == [("shared-id", "alice's")]
    assert [r.data["content"] for r in await store.records(other, "shared-id")] == ["their text"]
    assert await store.list(other, query="secret") == []
    await store.delete(other, "shared-id")
    assert (await store.get(ALICE, "shared-id")).title == "alice's"
    await store.add_input(ALICE, "typed by alice")
    assert await store.inputs(other) == []


async def test_typed_inputs_persist_oldest_first_and_are_capped(make_sessions, monkeypatch) -> None:
    import memchat.sessions.memory as memory_module
    import memchat.sessions.redis as redis_module
    import memchat.sessions.sql as sql_module

    for module in (memory_module, redis_module, sql_module):
        monkeypatch.setattr(module, "INPUT_HISTORY", 5)
    store = make_sessions()
    await store.open()
    for i in range(8):
        await store.add_input(ALICE, f"line {i}\nsecond line")
    assert await store.inputs(ALICE) == [f"line {i}\nsecond line" for i in range(3, 8)]
    assert await store.inputs(ALICE, 2) == ["line 6\nsecond line", "line 7\nsecond line"]
    again = make_sessions()  # another process sees them
    assert await again.inputs(ALICE, 1) == ["line 7\nsecond line"]


async def test_concurrent_appends_to_one_session_keep_every_record(make_sessions) -> None:
    """Two writers (two processes on the shared backends) appending to one
    session: no record is lost or given the same position."""
    first, second = make_sessions(), make_sessions()
    await first.open()
    await second.open()

    async def write(store, name: str) -> None:
        for i in range(10):
            await store.append(ALICE, session("busy"), [user(f"{name} {i}", i)])

    await asyncio.gather(write(first, "a"), write(second, "b"))
    records = await first.records(ALICE, "busy")
    assert sorted(r.data["content"] for r in records) == sorted(
        [f"a {i}" for i in range(10)] + [f"b {i}" for i in range(10)]
    )
    assert [r.seq for r in records] == list(range(20))
    assert (await second.get(ALICE, "busy")).message_count == 20


async def test_any_text_round_trips_exactly_and_stays_searchable(make_sessions) -> None:
    """NUL, a lone surrogate (undecodable input), escapes and emoji: the record
    comes back exactly; search and the title see a replacement character."""
    store = make_sessions()
    await store.open()
    text = "nul\x00 here \udcff bad byte \x1b[2J 🐹 '; DROP TABLE x; -- %_"
    await store.append(ALICE, session("odd", "odd\x00title"), [user(text, 1)])
    [back] = await store.records(ALICE, "odd")
    assert back.data["content"] == text
    assert [s.id for s in await store.list(ALICE, query="bad byte")] == ["odd"]
    assert [s.id for s in await store.list(ALICE, query="drop table")] == ["odd"]
    await store.add_input(ALICE, "typed\x00")
    assert await store.inputs(ALICE) == ["typed\ufffd"]
    assert (await store.get(ALICE, "odd")).title == "odd\ufffdtitle"
