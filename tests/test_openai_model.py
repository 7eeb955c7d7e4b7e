"""OpenAIChatModel against a scripted OpenAI-compatible server, through the real SDK."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from memchat.agent.llm import ChatModel, ModelConfig, ModelError, ModelReply, TextChunk, ToolCall, Usage
from memchat.agent.openai_model import OpenAIChatModel, describe_endpoint
from tests.scripted_openai import ScriptedOpenAI

KEY = "sk-test-SECRET123"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "memory_add",
            "description": "Remember a fact.",
            "parameters": {
                "type": "object",
                "properties": {"memory": {"type": "string"}},
                "required": ["memory"],
            },
        },
    }
]


@pytest.fixture
def server():
    with ScriptedOpenAI() as s:
        yield s


def make_model(base_url: str, **overrides) -> OpenAIChatModel:
    config = ModelConfig(model="test-model", api_key=KEY, base_url=base_url, timeout=5.0, max_retries=2)
    for name, value in overrides.items():
        setattr(config, name, value)
    model = OpenAIChatModel(config)
    model.retry_base_delay = 0.01  # keep retry tests fast
    return model


async def collect(model, messages=MESSAGES, tools=(), streaming=True):
    try:
        return [event async for event in model.stream(messages, tools, streaming=streaming)]
    finally:
        await model.close()


def split(events):
    chunks = [e for e in events if isinstance(e, TextChunk)]
    replies = [e for e in events if isinstance(e, ModelReply)]
    assert len(replies) == 1 and events[-1] is replies[0], events
    return chunks, replies[0]


async def failure(model, **kwargs) -> str:
    with pytest.raises(ModelError) as info:
        await collect(model, **kwargs)
    message = str(info.value)
    assert "SECRET123" not in message
    return message


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- shape -------------------------------------------------------------------


def test_implements_the_protocol_and_describes_endpoint():
    config = ModelConfig(model="deepseek-chat", api_key=KEY, base_url="https://user:pw@api.deepseek.com/v1")
    model = OpenAIChatModel(config)
    assert isinstance(model, ChatModel)
    assert model.name == "deepseek-chat"
    assert describe_endpoint(config) == "deepseek-chat @ api.deepseek.com"
    assert "SECRET123" not in repr(model) and "pw" not in repr(model)
    local = ModelConfig(model="llama3", base_url="http://127.0.0.1:11434/v1")
    assert describe_endpoint(local) == "llama3 @ 127.0.0.1:11434"


def test_importing_the_module_does_not_import_openai():
    code = (
        "import sys, memchat.agent.openai_model as m\n"
        "m.OpenAIChatModel(m.ModelConfig()); m.describe_endpoint(m.ModelConfig())\n"
        "assert 'openai' not in sys.modules, 'openai imported eagerly'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- text ----------------------------------------------------------------------


async def test_streamed_text_arrives_in_several_chunks(server):
    server.reply_text("Hello there, friend!", chunks=4)
    chunks, reply = split(await collect(make_model(server.base_url)))
    assert len(chunks) == 4
    assert "".join(c.text for c in chunks) == "Hello there, friend!"
    assert reply.text == "Hello there, friend!"
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    sent = server.requests[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"] == MESSAGES
    assert sent["model"] == "test-model"
    assert sent["max_tokens"] == 2000
    assert "tools" not in sent
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"


async def test_non_streaming_gives_the_same_events(server):
    server.reply_text("Hello there, friend!", chunks=4, usage=(11, 7))
    server.reply_text("Hello there, friend!", chunks=4, usage=(11, 7))
    streamed = await collect(make_model(server.base_url))
    whole = await collect(make_model(server.base_url), streaming=False)
    assert whole == [TextChunk("Hello there, friend!"), streamed[-1]]
    assert server.requests[1]["stream"] is False
    assert "stream_options" not in server.requests[1]


async def test_usage_is_captured_both_ways(server):
    server.reply_text("ok", usage=(42, 3))
    server.reply_text("ok", usage=(42, 3))
    _, streamed = split(await collect(make_model(server.base_url)))
    _, whole = split(await collect(make_model(server.base_url), streaming=False))
    assert streamed.usage == whole.usage == Usage(prompt_tokens=42, completion_tokens=3)


async def test_empty_text_non_streaming_yields_only_the_reply(server):
    server.reply_tool_calls([("call_1", "memory_add", '{"memory":"x"}')])
    events = await collect(make_model(server.base_url), tools=TOOLS, streaming=False)
    assert len(events) == 1 and isinstance(events[0], ModelReply)


async def test_server_without_stream_options_is_retried_without_them():
    with ScriptedOpenAI(reject_stream_options=True) as server:
        server.reply_text("fine", chunks=2)
        server.reply_text("again", chunks=2)
        model = make_model(server.base_url)
        _, reply = split([e async for e in model.stream(MESSAGES)])
        assert reply.text == "fine" and reply.usage is None
        _, reply = split([e async for e in model.stream(MESSAGES)])
        await model.close()
        assert reply.text == "again"
        assert ["stream_options" in r for r in server.requests] == [True, False, False]


async def test_max_completion_tokens_fallback(server):
    server.reply_error(
        400,
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'.",
    )
    server.reply_text("ok")
    _, reply = split(await collect(make_model(server.base_url)))
    assert reply.text == "ok"
    assert "max_tokens" in server.requests[0]
    assert server.requests[1]["max_completion_tokens"] == 2000 and "max_tokens" not in server.requests[1]


# -- tool calls -----------------------------------------------------------------


async def test_streamed_tool_call_with_fragmented_arguments(server):
    args = '{"memory": "Alice likes green tea", "topics": ["drinks", "preferences"]}'
    server.reply_tool_calls([("call_abc", "memory_add", args)], fragments=5)
    chunks, reply = split(await collect(make_model(server.base_url), tools=TOOLS))
    assert chunks == []
    assert reply.tool_calls == (ToolCall("call_abc", "memory_add", args),)
    assert reply.finish_reason == "tool_calls"
    assert reply.text == ""
    assert server.requests[0]["tools"] == TOOLS


async def test_two_parallel_tool_calls_interleaved_with_text_first(server):
    calls = [
        ("call_1", "memory_add", '{"memory": "likes tea", "topics": ["food"]}'),
        ("call_2", "memory_search", '{"query": "tea"}'),
    ]
    server.reply_tool_calls(calls, text="Let me note that.", fragments=4)
    chunks, reply = split(await collect(make_model(server.base_url), tools=TOOLS))
    assert "".join(c.text for c in chunks) == "Let me note that."
    assert reply.text == "Let me note that."
    assert reply.tool_calls == tuple(ToolCall(*c) for c in calls)
    assert reply.to_message()["tool_calls"][1]["function"]["arguments"] == '{"query": "tea"}'


async def test_non_streaming_tool_calls_match_streamed(server):
    calls = [("call_1", "memory_add", '{"memory": "x"}'), ("call_2", "memory_add", '{"memory": "y"}')]
    server.reply_tool_calls(calls)
    server.reply_tool_calls(calls)
    _, streamed = split(await collect(make_model(server.base_url), tools=TOOLS))
    _, whole = split(await collect(make_model(server.base_url), tools=TOOLS, streaming=False))
    assert streamed.tool_calls == whole.tool_calls == tuple(ToolCall(*c) for c in calls)
    assert whole.finish_reason == "tool_calls"


@pytest.mark.parametrize("streaming", [True, False])
async def test_malformed_tool_arguments_pass_through_verbatim(server, streaming):
    broken = '{"memory": "unterminated'
    server.reply_tool_calls([("call_9", "memory_add", broken)])
    _, reply = split(await collect(make_model(server.base_url), tools=TOOLS, streaming=streaming))
    assert reply.tool_calls == (ToolCall("call_9", "memory_add", broken),)


async def test_multi_round_turn_sends_tool_results_back(server):
    server.reply_tool_calls([("call_1", "memory_add", '{"memory":"x"}')])
    server.reply_text("Saved.")
    model = make_model(server.base_url)
    _, first = split([e async for e in model.stream(MESSAGES, TOOLS)])
    history = [
        *MESSAGES,
        first.to_message(),
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"ok": True})},
    ]
    _, second = split([e async for e in model.stream(history, TOOLS)])
    await model.close()
    assert second.text == "Saved."
    assert server.requests[1]["messages"] == history


# -- errors ----------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_names_the_variable_and_hides_the_key(server, status):
    server.reply_error(status, f"Incorrect API key provided: {KEY}. Find your key at platform.openai.com.")
    message = await failure(make_model(server.base_url))
    assert "OPENAI_API_KEY" in message
    assert "sk-test" not in message
    assert len(server.requests) == 1  # not retried


async def test_missing_key_says_to_set_it(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.reply_error(401, "You didn't provide an API key.")
    message = await failure(make_model(server.base_url, api_key=""))
    assert "set OPENAI_API_KEY" in message
    assert server.headers[0]["authorization"] == "Bearer not-set"


async def test_unknown_model_names_the_model_and_url(server):
    server.reply_error(404, "The model `test-model` does not exist or you do not have access to it.")
    message = await failure(make_model(server.base_url))
    assert "'test-model'" in message
    assert server.base_url in message
    assert "MEMCHAT_MODEL" in message


async def test_other_bad_request_shows_the_server_reason(server):
    server.reply_error(400, f"This model's maximum context length is 8192 tokens (key {KEY}).")
    message = await failure(make_model(server.base_url))
    assert "maximum context length" in message
    assert "(400)" in message


async def test_server_error_then_success_is_retried(server):
    server.reply_error(500, "boom")
    server.reply_error(503, "overloaded")
    server.reply_text("recovered")
    _, reply = split(await collect(make_model(server.base_url)))
    assert reply.text == "recovered"
    assert len(server.requests) == 3


async def test_server_error_forever_is_reported_after_retries(server):
    for _ in range(3):
        server.reply_error(500, "internal failure")
    message = await failure(make_model(server.base_url))
    assert message.startswith(
        f"server error 500 from 127.0.0.1:{server.base_url.split(':')[2][:-3]} after 2 retries"
    )
    assert len(server.requests) == 3
    assert server.pending == 0


async def test_rate_limit_honours_retry_after(server):
    server.reply_error(429, "slow down", headers={"Retry-After": "0.6"})
    server.reply_text("ok")
    started = time.monotonic()
    _, reply = split(await collect(make_model(server.base_url)))
    assert reply.text == "ok"
    assert time.monotonic() - started >= 0.55


async def test_rate_limit_forever_says_wait(server):
    for _ in range(2):
        server.reply_error(429, "slow down", headers={"Retry-After": "0"})
    message = await failure(make_model(server.base_url, max_retries=1))
    assert message.startswith("rate limited (429) by 127.0.0.1:")
    assert "after 1 retry" in message and "wait and try again" in message
    assert len(server.requests) == 2


async def test_backoff_grows_and_is_capped():
    model = OpenAIChatModel(ModelConfig())
    delays = [model._backoff(object(), n) for n in range(6)]
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(delays) == model.retry_max_delay


async def test_connection_refused_names_the_base_url():
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    message = await failure(make_model(base_url))
    assert base_url in message
    assert "OPENAI_BASE_URL" in message


async def test_timeout_is_reported(server):
    server.reply_delay(3)
    server.reply_text("too late")
    started = time.monotonic()
    message = await failure(make_model(server.base_url, timeout=0.3))
    assert time.monotonic() - started < 2.5
    assert "no answer from 127.0.0.1:" in message and "within 0.3s" in message


async def test_stream_breaking_off_after_text_raises_with_text_delivered(server):
    server.reply_text("partial answer", chunks=2, cut=True)
    model = make_model(server.base_url)
    received = []
    with pytest.raises(ModelError) as info:
        async for event in model.stream(MESSAGES):
            received.append(event)
    await model.close()

    assert "".join(e.text for e in received) == "partial answer"
    assert "mid-answer" in str(info.value)
    assert len(server.requests) == 1  # never retried once text was shown


async def test_exhausted_script_is_a_clear_500(server):
    message = await failure(make_model(server.base_url, max_retries=0))
    assert "script exhausted" in message
    assert server.unscripted == 1


async def test_consumer_stopping_early_closes_the_stream(server):
    server.reply_text("one two three four", chunks=4, chunk_delay=0.05)
    server.reply_text("next")
    model = make_model(server.base_url)
    events = model.stream(MESSAGES)
    first = await anext(events)
    await events.aclose()
    assert isinstance(first, TextChunk)
    _, reply = split([e async for e in model.stream(MESSAGES)])
    await model.close()
    assert reply.text == "next"
