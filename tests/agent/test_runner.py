"""The Runner's turn loop: events, tool errors, limits, stopping, preload."""

from __future__ import annotations

import asyncio
import json

import pytest

from backends import create
from memchat.agent.events import (
    TextDelta,
    ToolCallsRequested,
    ToolExecuting,
    ToolFinished,
    TurnDone,
    TurnError,
    TurnStats,
)
from memchat.agent.llm import ToolCall
from memchat.agent.runner import Runner, SessionClock
from memchat.engine import MemoryService

from .scripted_model import ScriptedModel, Step


def assert_history_is_valid(history: list[dict]) -> None:
    """Every tool call has exactly one result, as the chat APIs require."""
    wanted = [c["id"] for m in history for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    assert sorted(wanted) == sorted(answered)


@pytest.fixture
async def service():
    svc = MemoryService(create("inmemory"))
    yield svc
    await svc.close()


async def collect(runner: Runner, text: str) -> list:
    return [e async for e in runner.run(text)]


async def test_a_tool_round_then_an_answer(service) -> None:
    model = ScriptedModel(
        [
            Step("Saving that.", [("c1", "memory_add", '{"memory": "User likes Go", "topics": ["go"]}')]),
            Step("Done, remembered."),
        ]
    )
    runner = Runner(model, service)
    events = await collect(runner, "I like Go")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TextDelta",
        "TextDelta",
        "ToolCallsRequested",
        "ToolExecuting",
        "ToolFinished",
        "TextDelta",
        "TextDelta",
        "TurnStats",
        "TurnDone",
    ]
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert not finished.is_error and json.loads(finished.content)["message"] == "Memory added successfully"
    assert events[-1] == TurnDone("Saving that.Done, remembered.")
    assert [e.memory.text for e in await service.read(runner.key)] == ["User likes Go"]
    # The second request carried the tool result back to the model.
    assert model.requests[1][-1]["role"] == "tool" and model.requests[1][-1]["tool_call_id"] == "c1"
    assert_history_is_valid(runner.history)


async def test_parallel_calls_run_and_report_in_order(service) -> None:
    model = ScriptedModel(
        [
            Step(
                "",
                [
                    ("a", "memory_add", '{"memory": "Likes tea"}'),
                    ("b", "memory_add", '{"memory": "Likes jazz"}'),
                ],
            ),
            Step("ok"),
        ]
    )
    events = await collect(Runner(model, service), "tea and jazz")
    finished = [e.call.id for e in events if isinstance(e, ToolFinished)]
    executing = [e.call.id for e in events if isinstance(e, ToolExecuting)]
    assert executing == finished == ["a", "b"]
    assert await service.count(Runner(model, service).key) == 2


@pytest.mark.parametrize(
    ("name", "arguments", "needle"),
    [
        ("memory_add", '{"memory": "unterminated', "invalid"),
        ("memory_add", "[1, 2]", "object"),
        ("memory_add", '{"topics": ["x"]}', "memory content is required"),
        ("memory_explode", "{}", "unknown tool memory_explode"),
    ],
)
async def test_bad_tool_calls_go_back_to_the_model_and_the_turn_continues(service, name, arguments, needle):
    model = ScriptedModel([Step("", [("c1", name, arguments)]), Step("Sorry about that.")])
    runner = Runner(model, service)
    events = await collect(runner, "hi")
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.is_error and needle in finished.content
    assert events[-1] == TurnDone("Sorry about that.")
    assert model.requests[1][-1]["content"] == finished.content
    assert_history_is_valid(runner.history)


async def test_the_tool_round_limit_stops_an_endless_loop(service) -> None:
    looping = [Step("", [(f"c{i}", "memory_search", '{"query": "x"}')]) for i in range(10)]
    runner = Runner(ScriptedModel(looping), service, max_tool_rounds=3)
    events = await collect(runner, "loop")
    assert sum(isinstance(e, ToolCallsRequested) for e in events) == 3
    assert any(isinstance(e, TurnError) and "3 rounds" in e.message for e in events)
    assert isinstance(events[-1], TurnDone)
    assert_history_is_valid(runner.history)


async def test_a_model_error_ends_the_turn_and_the_next_turn_works(service) -> None:
    model = ScriptedModel(
        [Step("partial answer", error="server error 500 from api after 2 retries"), Step("second turn fine")]
    )
    runner = Runner(model, service)
    events = await collect(runner, "first")
    assert TurnError("server error 500 from api after 2 retries") in events
    assert isinstance(events[-1], TurnDone)
    assert runner.history[-1] == {"role": "assistant", "content": "partial answer"}
    events = await collect(runner, "second")
    assert events[-1] == TurnDone("second turn fine")


async def test_stopping_mid_stream_keeps_the_partial_answer_and_a_valid_session(service) -> None:
    model = ScriptedModel([Step(" ".join(f"word{i}" for i in range(200)), delay=0.01), Step("next turn")])
    runner = Runner(model, service)
    seen: list[str] = []

    async def consume() -> None:
        async for event in runner.run("tell me a long story"):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    task = asyncio.create_task(consume())
    while len(seen) < 5:
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = runner.history[-1]
    assert last["role"] == "assistant" and last["content"].startswith("word0 word1")
    assert last["content"].endswith("[stopped]")
    events = await collect(runner, "again")
    assert events[-1] == TurnDone("next turn")


async def test_stopping_during_tool_execution_answers_every_call(service) -> None:
    model = ScriptedModel([Step("", [("c1", "memory_add", '{"memory": "x"}')]), Step("after")])
    runner = Runner(model, service)
    agen = runner.run("add")
    async for event in agen:
        if isinstance(event, ToolExecuting):
            break
    await agen.aclose()
    assert_history_is_valid(runner.history)
    events = await collect(runner, "again")
    assert isinstance(events[-1], TurnDone)


async def test_preload_merges_memories_into_the_one_system_message(service) -> None:
    runner_key_service = service
    model = ScriptedModel([Step("hi"), Step("hi")])
    runner = Runner(model, runner_key_service, preload=-1)
    await service.add(runner.key, "User likes Go", topics=["go"])
    await collect(runner, "hello")
    system = [m for m in model.requests[0] if m["role"] == "system"]
    assert len(system) == 1
    content = system[0]["content"]
    assert "## Memory" in content and "PRELOADED_USER_MEMORIES BEGINS" in content
    assert "User likes Go (kind=fact)" in content and "go" not in content.split("User likes Go")[1][:20]
    off = Runner(ScriptedModel([Step("x")]), service, preload=0)
    await collect(off, "hello")
    assert "PRELOADED" not in off.model.requests[0][0]["content"]


async def test_adaptive_preload_searches_when_over_budget(service) -> None:
    model = ScriptedModel([Step("ok")])
    runner = Runner(model, service, preload=2)
    for text in ("User likes Go", "User lives in Berlin", "User has a cat", "User plays chess"):
        await service.add(runner.key, text)
    await collect(runner, "where does the user live? Berlin?")
    block = model.requests[0][0]["content"]
    assert "User lives in Berlin" in block and "User plays chess" not in block


async def test_stats_report_first_token_and_rate(service) -> None:
    events = await collect(Runner(ScriptedModel([Step("one two three four")]), service), "hi")
    [stats] = [e for e in events if isinstance(e, TurnStats)]
    assert stats.time_to_first_token is not None and stats.completion_tokens == 4


def test_session_ids_are_unique_even_within_one_second() -> None:
    clock = SessionClock(now=lambda: 1765504743.2)
    assert [clock.new_id() for _ in range(3)] == [
        "memory-session-1765504743",
        "memory-session-1765504744",
        "memory-session-1765504745",
    ]


async def test_new_session_resets_history_but_keeps_memories(service) -> None:
    runner = Runner(ScriptedModel([Step("", [("c", "memory_add", '{"memory": "x"}')]), Step("ok")]), service)
    await collect(runner, "remember x")
    previous, current = runner.new_session()
    assert previous != current and runner.session_id == current
    assert runner.history == [] and await service.count(runner.key) == 1


async def test_tool_errors_stay_valid_json_whatever_the_tool_name_or_reason(service) -> None:
    """A quote, backslash or newline in a tool's name or in the reason a call was
    not run must not break the history the next request sends to the API."""
    name = 'memory"\\\nodd'
    looping = [Step("", [(f"c{i}", name, "{}")]) for i in range(3)]
    runner = Runner(ScriptedModel(looping), service, max_tool_rounds=1)
    events = await collect(runner, "loop")
    assert any(isinstance(e, TurnError) and "1 rounds" in e.message for e in events)
    runner._answer_pending([ToolCall("c9", name, "{}")], 'stopped: "quoted" \\ and\na new line')
    assert_history_is_valid(runner.history[:-1])
    errors = [json.loads(m["content"])["error"] for m in runner.history if m["role"] == "tool"]
    assert errors == [
        f"unknown tool {name}; available tools: memory_add, memory_load, memory_search, memory_update",
        "not run: the tool round limit was reached",
        'stopped: "quoted" \\ and\na new line',
    ]
    assert json.loads(json.dumps(runner.history)) == runner.history


async def test_without_the_delete_tool_the_model_is_told_how_the_person_forgets() -> None:
    """memory_delete is off by default: a real model asked to forget must point to
    /forget and the panel's d, not just refuse; with the tool on it is not told."""
    from backends import create
    from memchat.agent.runner import FORGET_YOURSELF_PROMPT, SYSTEM_PROMPT, Runner
    from memchat.engine import MemoryService
    from memchat.engine.tools import ToolSettings
    from tests.agent.scripted_model import ScriptedModel, Step

    default = Runner(ScriptedModel([Step("ok")]), MemoryService(create("inmemory")))
    assert "memory_delete" not in default.tools
    assert default.system_prompt == SYSTEM_PROMPT + FORGET_YOURSELF_PROMPT
    assert "/forget" in default.system_prompt and "press d" in default.system_prompt
    [event async for event in default.run("forget that I like Go")]
    assert default.model.requests[0][0]["content"] == default.system_prompt  # what the model reads

    enabled = MemoryService(create("inmemory"), tool_settings=ToolSettings(enabled={"memory_delete": True}))
    with_tool = Runner(ScriptedModel([Step("ok")]), enabled)
    assert "memory_delete" in with_tool.tools and with_tool.system_prompt == SYSTEM_PROMPT
