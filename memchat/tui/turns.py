"""Running one turn for the TUI: the runner's events become messages to the
app, with streamed text coalesced to what the screen can use."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from .memory_actions import describe_error
from .messages import TurnEnded, TurnEvent

if TYPE_CHECKING:
    from textual.message import Message

    from memchat.agent.runner import Runner

#: Seconds between two text updates of a streaming answer (at most ~30 a second).
TEXT_FLUSH_INTERVAL = 0.033


async def post_turn(runner: Runner, turn: int, text: str, post: Callable[[Message], object]) -> None:
    """Run one turn, posting a ``TurnEvent`` per event and a ``TurnEnded`` at
    the end (stopped when cancelled, with the error when it failed). Text
    arriving faster than the screen can use is coalesced: at most one text
    message per ``TEXT_FLUSH_INTERVAL`` (a fast model sends thousands of
    tokens a second; one message each would only queue up behind the layout)."""
    from memchat.agent.events import TextDelta

    loop = asyncio.get_running_loop()
    pending: list[str] = []
    last_flush = 0.0
    timer: asyncio.TimerHandle | None = None

    def flush() -> None:
        nonlocal last_flush, timer
        if timer is not None:
            timer.cancel()
            timer = None
        if pending:
            post(TurnEvent(turn, TextDelta("".join(pending))))
            pending.clear()
        last_flush = loop.time()

    try:
        async for event in runner.run(text):
            if isinstance(event, TextDelta):
                pending.append(event.text)
                if loop.time() - last_flush >= TEXT_FLUSH_INTERVAL:
                    flush()
                elif timer is None:
                    timer = loop.call_at(last_flush + TEXT_FLUSH_INTERVAL, flush)
                continue
            flush()
            post(TurnEvent(turn, event))
    except asyncio.CancelledError:
        flush()
        post(TurnEnded(turn, stopped=True))
        raise
    except Exception as exc:
        flush()
        post(TurnEnded(turn, error=describe_error(exc)))
        return
    flush()
    post(TurnEnded(turn))
