"""The runner over the real openai SDK against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backends import create
from memchat.agent.events import TextDelta, ToolFinished, TurnDone, TurnError
from memchat.agent.llm import ModelConfig
from memchat.agent.openai_model import OpenAIChatModel
from memchat.agent.runner import Runner
from memchat.engine import MemoryService
from tests.scripted_openai import ScriptedOpenAI

SECRET = "sk-test-SECRET-4242"


@pytest.fixture
def server():
    with ScriptedOpenAI() as s:
        yield s


async def run_turn(runner: Runner, text: str) -> list:
    return [e async for e in runner.run(text)]


def make_runner(server, *, streaming: bool, timeout: float = 10.0) -> Runner:
    config = ModelConfig(
        model="test-model", api_key=SECRET, base_url=server.base_url, timeout=timeout, max_retries=2
    )
    model = OpenAIChatModel(config)
    model.retry_base_delay = 0.01
    return Runner(model, MemoryService(create("inmemory")), streaming=streaming)


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "non-streaming"])
async def test_add_then_search_round_trip(server, streaming) -> None:
    runner = make_runner(server, streaming=streaming)
    server.reply_tool_calls(
        [("call_1", "memory_add", '{"memory": "User likes Go", "topics": ["go"]}')], text="Saving. "
    )
    server.reply_text("Noted, you like Go.", chunks=4)
    events = await run_turn(runner, "I like Go")
    assert events[-1] == TurnDone("Saving. Noted, you like Go.")
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 2 if streaming else len(deltas) == 2
    assert [e.memory.text for e in await runner.service.read(runner.key)] == ["User likes Go"]
    # The tools went to the server, and the tool result came back in round two.
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} >= {"memory_add", "memory_search"}
    assert server.requests[1]["messages"][-1]["role"] == "tool"

    runner.new_session()
    server.reply_tool_calls([("call_2", "memory_search", '{"query": "Go"}')])
    server.reply_text("You like Go.")
    events = await run_turn(runner, "what do I like?")
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert json.loads(finished.content)["results"][0]["memory"] == "User likes Go"
    assert len(server.requests[2]["messages"]) == 2  # the new session sent no old history


async def test_two_parallel_calls(server) -> None:
    runner = make_runner(server, streaming=True)
    server.reply_tool_calls(
        [("a", "memory_add", '{"memory": "Likes tea"}'), ("b", "memory_add", '{"memory": "Likes jazz"}')],
        fragments=4,
    )
    server.reply_text("Both saved.")
    events = await run_turn(runner, "tea and jazz")
    assert [e.call.id for e in events if isinstance(e, ToolFinished)] == ["a", "b"]
    assert await runner.service.count(runner.key) == 2
    assert [m["tool_call_id"] for m in server.requests[1]["messages"] if m["role"] == "tool"] == ["a", "b"]


async def test_malformed_tool_json_from_the_model_is_reported_and_the_turn_goes_on(server) -> None:
    runner = make_runner(server, streaming=True)
    server.reply_tool_calls([("c", "memory_add", '{"memory": "Likes tea", "topics": [')])
    server.reply_text("Let me fix that.")
    events = await run_turn(runner, "tea")
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error and "invalid" in finished.content.lower()
    assert events[-1] == TurnDone("Let me fix that.")
    assert await runner.service.count(runner.key) == 0


async def test_401_is_a_turn_error_without_the_key(server) -> None:
    runner = make_runner(server, streaming=True)
    server.reply_error(401, f"Incorrect API key provided: {SECRET}")
    events = await run_turn(runner, "hello")
    [error] = [e for e in events if isinstance(e, TurnError)]
    assert "OPENAI_API_KEY" in error.message and "SECRET" not in error.message
    assert isinstance(events[-1], TurnDone)


async def test_500_then_success_is_retried(server) -> None:
    runner = make_runner(server, streaming=True)
    server.reply_error(500, "boom")
    server.reply_text("Recovered.")
    events = await run_turn(runner, "hello")
    assert events[-1] == TurnDone("Recovered.")
    assert not any(isinstance(e, TurnError) for e in events)


async def test_a_timeout_is_reported_and_the_session_goes_on(server) -> None:
    runner = make_runner(server, streaming=True, timeout=0.3)
    server.reply_delay(2.0)
    server.reply_text("too late")
    events = await run_turn(runner, "hello")
    [error] = [e for e in events if isinstance(e, TurnError)]
    assert "within" in error.message
    server.reply_text("back again")
    events = await run_turn(runner, "hello again")
    assert events[-1].text in ("back again", "too late")


def test_the_console_never_prints_the_key(server, tmp_path) -> None:
    server.reply_error(401, f"Incorrect API key provided: {SECRET}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMCHAT_"))}
    env |= {
        "OPENAI_API_KEY": SECRET,
        "OPENAI_BASE_URL": server.base_url,
        "SQLITE_MEMORY_DSN": str(tmp_path / "m.db"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "memchat", "--plain", "--model", "test-model"],
        input="hello\n/exit\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0
    assert "❌ Error:" in result.stdout and "OPENAI_API_KEY" in result.stdout
    assert "SECRET" not in result.stdout + result.stderr
    assert "Model: test-model" in result.stdout
