"""From saved records back to what the model sees: the messages, repaired
where a crash cut a turn short, and trimmed to fit the model's context."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .model import SessionRecord

Message = dict[str, Any]

#: Estimated tokens of history sent to the model when a session is resumed.
DEFAULT_HISTORY_TOKENS = 24_000
#: Added per message for its role and framing.
MESSAGE_OVERHEAD = 4


def model_messages(records: Iterable[SessionRecord]) -> list[Message]:
    """The saved messages in order, with a result for every tool call (a crash
    between a call and its result would make the API refuse the history)."""
    messages: list[Message] = []
    open_calls: list[str] = []
    for record in records:
        if record.kind != "message":
            continue
        message = dict(record.data)
        if message.get("role") != "tool" and open_calls:
            messages += [_unanswered(call_id) for call_id in open_calls]
            open_calls = []
        if message.get("role") == "assistant":
            open_calls = [str(c.get("id")) for c in message.get("tool_calls") or ()]
        elif message.get("role") == "tool" and message.get("tool_call_id") in open_calls:
            open_calls.remove(message["tool_call_id"])
        messages.append(message)
    messages += [_unanswered(call_id) for call_id in open_calls]
    return messages


def _unanswered(call_id: str) -> Message:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": '{"error": "not run: the session ended first"}',
    }


def estimate_tokens(message: Message) -> int:
    """A cheap, model-independent estimate: about 4 characters of Latin text
    per token, one token per CJK (or other non-ASCII) character."""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        text += str(function.get("name") or "") + str(function.get("arguments") or "")
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return MESSAGE_OVERHEAD + ascii_chars // 4 + (len(text) - ascii_chars)


def trim_history(messages: Sequence[Message], budget: int = DEFAULT_HISTORY_TOKENS) -> list[Message]:
    """The newest whole turns (each starting at a user message) whose estimated
    tokens fit ``budget``; the last turn is always kept. Cutting only at user
    messages keeps every tool call with its result."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not starts:
        return list(messages)
    costs = [estimate_tokens(m) for m in messages]
    keep_from = starts[-1]
    for start in reversed(starts[:-1]):
        if sum(costs[start:]) > budget:
            break
        keep_from = start
    return list(messages[keep_from:])
