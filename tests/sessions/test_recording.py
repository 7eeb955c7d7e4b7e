"""The conversation is saved as it happens (through the runner's recorder),
and a saved session continues: the model is given its history, trimmed to
fit, with a result for every tool call — on a real SQLite file, the way the
console and the TUI open it (``open_runner``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from memchat.agent.factory import close_runner, open_runner
from memchat.agent.runner import Runner
from memchat.agent.sessions import recorder_of, resume, resume_latest, start
from memchat.sessions.history import model_messages, trim_history
from memchat.sessions.model import SessionNotFoundError, SessionRecord
from memchat.settings import Settings
from tests.agent.scripted_model import ScriptedModel, Step


def settings_for(tmp_path, **values) -> Settings:
    env = {"SQLITE_MEMORY_DSN": f"sqlite:///{tmp_path / 'chat.db'}"}
    return Settings(memory="sqlite", embedder="none", env=env, **values).validated()


async def open_chat(tmp_path, model=None, **values) -> Runner:
    runner = await open_runner(settings_for(tmp_path, **values))
    if model is not None:
        runner.model = model
        recorder_of(runner).model = model.name
    return runner


async def run_turn(runner: Runner, text: str) -> list:
    return [event async for event in runner.run(text)]


async def saved(runner: Runner, session_id: str | None = None) -> list[SessionRecord]:
    recorder = recorder_of(runner)
    await recorder.flush()
    return await recorder.store.records(recorder.key, session_id or runner.session_id)


TOOL_TURN = [
    Step(
        text="Let me note that.",
        calls=[("call_1", "memory_add", '{"memory": "User likes Go", "topics": ["go"]}')],
    ),
    Step(text="Noted: you like Go."),
]


async def test_every_message_tool_call_result_and_stats_is_saved_as_it_happens(tmp_path) -> None:
    runner = await open_chat(tmp_path, ScriptedModel(list(TOOL_TURN)))
    try:
        events = runner.run("I like Go")
        async for event in events:
            if type(event).__name__ == "ToolCallsRequested":
                # Mid-turn: the user's message and the tool call are already saved.
                records = await saved(runner)
                assert [r.role for r in records] == ["user", "assistant"]
                assert records[1].data["tool_calls"][0]["function"]["arguments"] == (
                    '{"memory": "User likes Go", "topics": ["go"]}'
                )
        records = await saved(runner)
        assert [(r.kind, r.role) for r in records] == [
            ("message", "user"), ("message", "assistant"), ("message", "tool"), ("message", "assistant"),
            ("stats", ""),
        ]  # fmt: skip
        assert [r.data for r in records[:4]] == runner.history
        tool = records[2]
        assert (
            tool.meta["name"] == "memory_add" and tool.meta["is_error"] is False and tool.meta["elapsed"] >= 0
        )
        assert json.loads(tool.data["content"])["message"] == "Memory added successfully"
        assert records[4].data["model"] == "scripted" and records[4].data["tool_calls"] == 1
        info = await recorder_of(runner).store.get(runner.key, runner.session_id)
        assert (info.title, info.message_count, info.model, info.backend) == (
            "I like Go",
            3,
            "scripted",
            "sqlite",
        )
    finally:
        await close_runner(runner)


async def test_resume_gives_the_model_the_saved_history_in_a_new_process(tmp_path) -> None:
    first = await open_chat(tmp_path, ScriptedModel(list(TOOL_TURN)))
    try:
        await run_turn(first, "I like Go")
        kept_id, kept_history = first.session_id, list(first.history)
    finally:
        await close_runner(first)

    model = ScriptedModel([Step(text="You like Go.")])
    second = await open_chat(tmp_path, model)
    try:
        resumed = await start(second, settings_for(tmp_path, resume=True))  # memchat -c
        assert resumed is not None and resumed.info.id == kept_id and second.session_id == kept_id
        assert [r.role for r in resumed.records if r.kind == "message"] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        await run_turn(second, "What do I like?")
        sent = model.requests[0]
        assert sent[0]["role"] == "system" and sent[1:] == [
            *kept_history,
            {"role": "user", "content": "What do I like?"},
        ]
        records = await saved(second)
        assert [r.data.get("content") for r in records if r.role == "user"] == [
            "I like Go",
            "What do I like?",
        ]
        assert [r.seq for r in records] == list(range(len(records)))
    finally:
        await close_runner(second)


async def test_new_starts_another_saved_session_and_the_previous_stays(tmp_path) -> None:
    runner = await open_chat(tmp_path)
    try:
        await run_turn(runner, "I like Go")
        previous, current = runner.new_session()
        await run_turn(runner, "hello")
        recorder = recorder_of(runner)
        await recorder.flush()
        listed = await recorder.store.list(runner.key)
        assert [s.id for s in listed] == [current, previous]
        assert [s.title for s in listed] == ["hello", "I like Go"]
        # Continuing the first one switches the model's history to it.
        resumed = await resume(runner, previous)
        assert runner.session_id == previous and runner.history[0] == {"role": "user", "content": "I like Go"}
        assert resumed.sent == resumed.total == 4
    finally:
        await close_runner(runner)


async def test_a_restart_within_the_same_second_starts_a_new_session(tmp_path) -> None:
    from memchat.agent.runner import SessionClock

    runner = await open_chat(tmp_path)
    try:
        await run_turn(runner, "hello")
        stored = runner.session_id
    finally:
        await close_runner(runner)
    # A second process whose clock still says the same second.
    settings = settings_for(tmp_path)
    again = await open_runner(settings)
    try:
        again._sessions = SessionClock(now=lambda: float(stored.rpartition("-")[2]))
        again.session_id = again._sessions.new_id()
        from memchat.agent.sessions import attach_sessions

        await recorder_of(again).close()
        await attach_sessions(again, settings)
        assert again.session_id != stored
        await run_turn(again, "second run")
        assert [r.data.get("content") for r in await saved(again, stored) if r.role == "user"] == ["hello"]
    finally:
        await close_runner(again)


async def test_an_unknown_session_is_one_clear_error_and_the_end_of_an_id_is_enough(tmp_path) -> None:
    runner = await open_chat(tmp_path)
    try:
        await run_turn(runner, "hello")
        kept = runner.session_id
        runner.new_session()
        with pytest.raises(SessionNotFoundError, match="no saved session 'memory-session-1'"):
            await resume(runner, "memory-session-1")
        resumed = await resume(runner, kept[-6:])
        assert resumed.info.id == kept == runner.session_id
    finally:
        await close_runner(runner)


async def test_resume_with_nothing_saved_starts_a_new_session(tmp_path) -> None:
    runner = await open_chat(tmp_path)
    try:
        fresh = runner.session_id
        assert await resume_latest(runner) is None and runner.session_id == fresh
    finally:
        await close_runner(runner)


async def test_a_stopped_turn_is_saved_with_its_partial_answer(tmp_path) -> None:
    model = ScriptedModel([Step(text="one two three four five six seven eight", delay=0.05)])
    runner = await open_chat(tmp_path, model)
    try:

        async def consume() -> None:
            async for _ in runner.run("tell me a story"):
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.18)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        records = await saved(runner)
        assert records[-1].role == "assistant" and records[-1].meta == {"stopped": True}
        assert records[-1].data["content"].endswith(" [stopped]")
    finally:
        await close_runner(runner)


async def test_a_backend_that_is_down_never_holds_up_the_turn_and_is_said_once(tmp_path) -> None:
    """Sessions on a Redis server that is not there: the turn finishes, the
    problem is reported once, the records wait for the next attempt."""
    pytest.importorskip("redis")
    from backends import create
    from memchat.engine import MemoryService, UserKey
    from memchat.sessions.recorder import SessionRecorder
    from memchat.sessions.redis import RedisSessionStore

    problems: list[str] = []
    dead = RedisSessionStore(create("redis", url="redis://127.0.0.1:1/0", timeout=1), owns_store=True)
    service = MemoryService(create("inmemory"))
    await service.open()
    runner = Runner(ScriptedModel([Step(text="hi there")]), service)
    runner.recorder = SessionRecorder(dead, UserKey("memory-chat", "user"), on_problem=problems.append)
    try:
        events = await asyncio.wait_for(run_turn(runner, "hello"), timeout=2)
        assert type(events[-1]).__name__ == "TurnDone"
        assert await runner.recorder.flush(timeout=3) is False
        assert await runner.recorder.flush(timeout=3) is False
        assert len(problems) == 1 and "refused" in problems[0] and "127.0.0.1:1" in problems[0]
        assert runner.recorder.pending == 3  # user, answer, stats: kept for the next attempt
    finally:
        await runner.recorder.close(timeout=1)
        await service.close()


SEARCH = {"name": "memory_search", "arguments": "{}"}


def test_history_repair_and_trimming_keep_every_tool_call_answered() -> None:
    def message(data):
        return SessionRecord("message", data)

    records = [
        message({"role": "user", "content": "a" * 400}),
        message({"role": "assistant", "content": "ok"}),
        message({"role": "user", "content": "find it"}),
        message({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": SEARCH}]}),
        # the process died here: no result for c1
        message({"role": "user", "content": "again"}),
        SessionRecord("stats", {"elapsed": 1}),
    ]  # fmt: skip
    messages = model_messages(records)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "tool", "user"]
    assert messages[4]["tool_call_id"] == "c1" and "not run" in messages[4]["content"]
    # A small budget keeps the newest whole turns, never splitting a call from its result.
    kept = trim_history(messages, budget=40)
    assert [m["role"] for m in kept] == ["user", "assistant", "tool", "user"]
    assert trim_history(messages, budget=1) == [messages[-1]]  # the last turn is always kept
    assert trim_history(messages, budget=10_000) == messages


async def test_a_record_the_store_refuses_is_skipped_and_the_rest_is_saved(tmp_path) -> None:
    """A record that cannot be stored (here: not JSON) while the backend works:
    it is reported and skipped; what comes after it is saved."""
    runner = await open_chat(tmp_path)
    problems: list[str] = []
    recorder = recorder_of(runner)
    recorder.on_problem = problems.append
    try:
        recorder.message(runner.session_id, {"role": "user", "content": object()}, {})
        await recorder.flush()
        await run_turn(runner, "hello")
        assert [r.data.get("content") for r in await saved(runner) if r.role == "user"] == ["hello"]
        assert len(problems) == 1 and "could not be saved and were skipped" in problems[0]
    finally:
        await close_runner(runner)
