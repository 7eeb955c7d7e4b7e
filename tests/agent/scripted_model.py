"""A ChatModel that plays back a script, for testing the Runner's loop.

The runner's own contract with any model (events in, history out) is tested
with this; the real OpenAI SDK path is tested against tests/scripted_openai.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memchat.agent.llm import ModelError, ModelReply, TextChunk, ToolCall, Usage


@dataclass
class Step:
    text: str = ""
    calls: Sequence[tuple[str, str, str]] = ()
    error: str = ""
    #: Seconds to wait between text pieces (to test stopping mid-stream).
    delay: float = 0.0


@dataclass
class ScriptedModel:
    steps: list[Step]
    name: str = "scripted"
    requests: list[list[dict[str, Any]]] = field(default_factory=list)

    async def close(self) -> None:
        return None

    async def stream(self, messages, tools=(), *, streaming: bool = True) -> AsyncIterator[Any]:
        self.requests.append([dict(m) for m in messages])
        step = self.steps.pop(0) if self.steps else Step(text="(script exhausted)")
        pieces = step.text.split(" ") if step.text else []
        for i, piece in enumerate(pieces):
            if step.delay:
                await asyncio.sleep(step.delay)
            yield TextChunk(piece + (" " if i < len(pieces) - 1 else ""))
        if step.error:
            raise ModelError(step.error)
        calls = tuple(ToolCall(i, n, a) for i, n, a in step.calls)
        yield ModelReply(step.text, calls, Usage(completion_tokens=len(pieces)))
