"""Building a MemchatApp for tests: an injected runner over inmemory (or
sqlite) with the offline or a scripted model, fixed clocks and session ids.
With ``extract=True`` in the settings the runner is in auto mode: the
extractor the settings describe (offline: the rule-based one), or one the
test passes as ``extractor``."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from backends import create
from memchat.agent.events import ToolFinished, TurnStats
from memchat.agent.factory import create_extractor
from memchat.agent.offline import OfflineModel
from memchat.agent.runner import Runner, SessionClock
from memchat.engine import MemoryService
from memchat.engine.extraction import AutoMemoryConfig
from memchat.engine.vectors import NO_EMBEDDER
from memchat.settings import Settings
from memchat.tui.app import MemchatApp

#: Session ids start at memory-session-1700000000.
SESSION_START = 1_700_000_000
#: "Now" for the app and the memory service in deterministic tests.
FIXED_NOW = datetime(2025, 6, 1, 9, 30, tzinfo=UTC)

SEED_TELL = "你好，我是张三，我喜欢 Go 语言编程"
SEED_ASK = "我喜欢什么?"


class FixedTimingRunner(Runner):
    """A runner whose measured durations are constants, for snapshots."""

    async def run(self, user_text: str):
        async for event in super().run(user_text):
            if isinstance(event, TurnStats):
                event = TurnStats(0.05, event.completion_tokens, 40.0 if event.completion_tokens else None,
                                  0.002 if event.tool_calls else 0.0, event.tool_calls, 0.5)  # fmt: skip
            elif isinstance(event, ToolFinished):
                event = dataclasses.replace(event, elapsed=0.002)
            yield event


class TickingClock:
    """Every call is one second after the previous one (stable memory times)."""

    def __init__(self, start: datetime = FIXED_NOW - timedelta(hours=1)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def make_settings(**values: Any) -> Settings:
    values.setdefault("memory", "inmemory")
    return Settings(**values).validated()


def runner_factory(
    model: Callable[[], Any] | None = None,
    *,
    fixed_timings: bool = False,
    store_options: dict[str, Any] | None = None,
    opened: list[Runner] | None = None,
    extractor: Callable[[Settings], Any] | None = None,
):
    """An async factory as MemchatApp accepts: the settings pick backend,
    soft delete, tools, streaming and auto mode; the model defaults to the
    offline one, the extractor to the one the settings describe."""

    async def factory(settings: Settings) -> Runner:
        auto: dict[str, Any] = {}
        if settings.extract:
            auto["extractor"] = (extractor or create_extractor)(settings)
            auto["auto_memory"] = AutoMemoryConfig(
                workers=settings.workers, queue_size=settings.queue_size, job_timeout=settings.job_timeout
            )
        service = MemoryService(
            create(settings.memory, **(store_options or {})),
            embedder=NO_EMBEDDER if settings.embedder == "none" else None,
            search_mode=settings.search,
            soft_delete=settings.soft_delete,
            limit=settings.limit,
            tool_settings=settings.tool_settings(),
            clock=TickingClock(),
            **auto,
        )
        await service.open()
        cls = FixedTimingRunner if fixed_timings else Runner
        runner = cls(
            model() if model else OfflineModel(delay=0),
            service,
            app=settings.app,
            user=settings.user,
            streaming=settings.streaming,
            session_clock=SessionClock(now=_counter(SESSION_START)),
        )
        if opened is not None:
            opened.append(runner)
        return runner

    return factory


def _counter(start: int) -> Callable[[], float]:
    return lambda: float(start)


def make_app(
    settings: Settings | None = None, *, deterministic: bool = True, **factory_options: Any
) -> MemchatApp:
    return MemchatApp(
        settings or make_settings(),
        runner_factory=runner_factory(fixed_timings=deterministic, **factory_options),
        clock=lambda: FIXED_NOW,
        cursor_blink=not deterministic,
    )


async def wait_until(pilot, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Let the app run until ``predicate()`` holds (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.01)


async def settled(pilot, timeout: float = 10.0, quiet: float = 0.3) -> None:
    """Let the app finish drawing: the screen is the same for ``quiet`` seconds.
    On a loaded machine a layout pass can still be pending after one
    ``pilot.pause()`` (the chat log, bottom-anchored, then sits a line off), and
    a snapshot taken then differs from the settled one."""
    import re

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout

    def screen() -> str:
        return re.sub(r"terminal-\d+", "", pilot.app.export_screenshot())

    await pilot.pause()
    last, since = screen(), loop.time()
    while loop.time() - since < quiet:
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the screen to stop changing")
        await pilot.pause(0.05)
        now = screen()
        if now != last:
            last, since = now, loop.time()


async def ready(pilot) -> MemchatApp:
    app = pilot.app
    await wait_until(pilot, lambda: app.runner is not None, what="the runner")
    await pilot.pause()
    return app


async def say(pilot, text: str, *, wait: bool = True) -> None:
    """Type ``text`` into the message box and press Enter; wait for the turn."""
    app = pilot.app
    chat_input = app.chat.chat_input
    chat_input.focus()
    chat_input.load_text(text)
    chat_input.move_cursor(chat_input.document.end)
    await pilot.press("enter")
    if wait:
        await wait_until(pilot, lambda: not app.busy, what=f"the answer to {text!r}")
        await pilot.pause()


async def memory_texts(app: MemchatApp, include_deleted: bool = False) -> list[str]:
    runner = app.runner
    assert runner is not None
    entries = await runner.service.read(runner.key, include_deleted=include_deleted)
    return [e.memory.text for e in entries]
