"""The ChatModel seam: one streaming interface over every model.

A model receives OpenAI-format messages and tool schemas and yields
``TextChunk``s as text arrives, then exactly one ``ModelReply`` with the whole
text and any tool calls. Streaming and non-streaming produce the same events
(non-streaming yields the text as one chunk), so the runner, the console and
the TUI never care which mode is on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]


class ModelError(Exception):
    """A model call failed; the message is one sentence a person can act on
    (never containing the API key)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    #: Raw JSON text exactly as the model sent it (may be malformed).
    arguments: str

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str = ""

    def to_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return message


ModelEvent = TextChunk | ModelReply


@runtime_checkable
class ChatModel(Protocol):
    #: Shown in the banner and header, e.g. "deepseek-v4-flash" or "offline".
    name: str

    def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        *,
        streaming: bool = True,
    ) -> AsyncIterator[ModelEvent]:
        """Yield TextChunk* then one ModelReply; raise ModelError on failure."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class MemoryModeAware(Protocol):
    """A model whose answers depend on who writes the memories (the offline
    model): the Runner tells it explicitly, once, when it is set up."""

    def set_background_memory(self, on: bool) -> None:
        """``on``: memories are written by the background extractor, not by the model."""
        ...


@dataclass
class ModelConfig:
    """Where the OpenAI-compatible model lives (never printed with the key)."""

    model: str = "deepseek-v4-flash"
    api_key: str = field(default="", repr=False)
    base_url: str = ""
    timeout: float = 60.0
    max_retries: int = 2
    max_tokens: int = 2000
    temperature: float | None = None
