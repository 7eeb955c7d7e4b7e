"""Typed events a turn yields. The console, the TUI and the tests consume
exactly these; none of them talks to the model or a backend directly."""

from __future__ import annotations

from dataclasses import dataclass

from memchat.engine.extraction.types import ExtractionFinished, ExtractionStarted

from .llm import ToolCall


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant's answer (the whole answer when not streaming)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallsRequested:
    """The model asked for these tool calls (one round; possibly parallel)."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class ToolExecuting:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolFinished:
    call: ToolCall
    content: str
    is_error: bool
    elapsed: float


@dataclass(frozen=True, slots=True)
class TurnError:
    """Something went wrong; the turn ends but the session stays usable."""

    message: str


@dataclass(frozen=True, slots=True)
class TurnStats:
    time_to_first_token: float | None
    completion_tokens: int
    tokens_per_second: float | None
    tool_time: float
    tool_calls: int
    elapsed: float
    #: False when the answer came whole (non-streaming): there is then no first token
    #: or rate to speak of, only how long the model took (``model_time``).
    streamed: bool = True
    #: Seconds spent waiting for the model, over every round of the turn.
    model_time: float = 0.0


@dataclass(frozen=True, slots=True)
class TurnDone:
    """Always the last event of a turn."""

    text: str
    stopped: bool = False


Event = TextDelta | ToolCallsRequested | ToolExecuting | ToolFinished | TurnError | TurnStats | TurnDone

#: Background events of auto mode. They are not part of a turn's stream: they
#: reach the UI through ``Runner.add_extraction_listener(callback)`` and may
#: arrive at any time after a turn (ExtractionStarted when a job begins,
#: ExtractionFinished with what it added, updated and deleted).
BackgroundEvent = ExtractionStarted | ExtractionFinished

__all__ = [
    "BackgroundEvent",
    "Event",
    "ExtractionFinished",
    "ExtractionStarted",
    "TextDelta",
    "ToolCallsRequested",
    "ToolExecuting",
    "ToolFinished",
    "TurnDone",
    "TurnError",
    "TurnStats",
]
