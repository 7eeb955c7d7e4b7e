"""The offline model streams at a model's pace without falling behind a slow
reader, and a non-streamed turn reports no first token or rate."""

from __future__ import annotations

import asyncio

from backends import create
from memchat.agent.events import TurnStats
from memchat.agent.llm import ModelReply, TextChunk
from memchat.agent.offline import OfflineModel
from memchat.agent.offline.language import chunks
from memchat.agent.runner import Runner
from memchat.engine import MemoryService
from memchat.tui.format import stats_line

PASTE = "Remember that " + "\n".join(f"line {i}: the quick brown fox jumps over a dog" for i in range(40))


async def turn_stats(streaming: bool) -> TurnStats:
    async with MemoryService(create("inmemory")) as svc:
        runner = Runner(OfflineModel(), svc, streaming=streaming)
        [stats] = [e async for e in runner.run("I live in Berlin") if isinstance(e, TurnStats)]
    return stats


async def test_a_turn_without_streaming_reports_no_first_token_or_rate() -> None:
    stats = await turn_stats(streaming=False)
    assert not stats.streamed and stats.time_to_first_token is None and stats.tokens_per_second is None
    assert stats.completion_tokens > 0 and 0 <= stats.model_time <= stats.elapsed
    line = stats_line(stats)
    assert "first token" not in line and "tok/s" not in line and "(not streamed)" in line
    streamed = await turn_stats(streaming=True)
    assert streamed.streamed and streamed.time_to_first_token is not None
    assert "first token" in stats_line(streamed) and "not streamed" not in stats_line(streamed)


async def test_a_slow_reader_gets_what_is_due_in_one_piece() -> None:
    """Pacing is by the clock: a reader that falls behind is not made to wait a sleep
    per piece on top, it gets everything already due at once; the text is intact."""
    model = OfflineModel(tokens_per_second=5000)
    messages = [{"role": "user", "content": PASTE}]
    tools = [{"type": "function", "function": {"name": "memory_add"}}]
    reply = None
    async for event in model.stream(messages, tools):
        reply = event  # the first round calls memory_add; answer it to get the long echo
    assert isinstance(reply, ModelReply) and reply.tool_calls
    call = reply.tool_calls[0]
    messages += [
        reply.to_message(),
        {"role": "tool", "tool_call_id": call.id, "content": '{"memory": "%s"}' % ("x " * 400)},
    ]
    received: list[str] = []
    async for event in model.stream(messages, tools):
        if isinstance(event, TextChunk):
            received.append(event.text)
            await asyncio.sleep(0.02)  # a busy screen
        else:
            final = event
    assert "".join(received) == final.text
    assert len(received) < len(chunks(final.text)) / 4  # coalesced, not one sleep per piece
