"""Snapshot tests of the main states (pytest-textual-snapshot).

Deterministic: fixed session ids, memory times and "now", constant turn
timings, no cursor blink, UTC. Update after a deliberate change of the look
with ``pytest tests/tui/test_snapshots.py --snapshot-update`` and review the
SVGs in tests/tui/__snapshots__/.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from memchat.agent.llm import ModelReply, TextChunk, Usage
from memchat.engine import BackendError, Metadata
from memchat.tui.app import MemchatApp
from memchat.tui.screens.confirm import ConfirmScreen

from .support import (
    FIXED_NOW,
    SEED_ASK,
    SEED_TELL,
    make_app,
    make_settings,
    ready,
    runner_factory,
    say,
    settled,
    wait_until,
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class HaltingModel:
    """Streams a Markdown answer and then waits forever: a turn frozen mid-stream."""

    name = "scripted"
    TEXT = (
        "Here is what I keep about you:\n\n"
        "- **Name:** Zhang San\n"
        "- **Likes:** Go programming\n\n"
        '```go\nfmt.Println("hello, 张三")\n```\n\n'
        "I will keep "
    )

    async def close(self) -> None:
        return None

    async def stream(self, messages, tools=(), *, streaming=True) -> AsyncIterator:
        for piece in self.TEXT.split(" "):
            yield TextChunk(piece + " ")
        await asyncio.Event().wait()
        yield ModelReply(self.TEXT, (), Usage())  # pragma: no cover


async def seed_demo(pilot) -> None:
    await ready(pilot)
    await say(pilot, SEED_TELL)
    await say(pilot, "/new")
    await say(pilot, SEED_ASK)
    await settled(pilot)


def test_welcome(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=ready)


def test_seed_demo_with_tool_panels(snap_compare) -> None:
    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=seed_demo)


def test_memory_panel_with_tombstone(snap_compare) -> None:
    async def run_before(pilot) -> None:
        app = await ready(pilot)
        runner = app.runner
        await runner.service.add(runner.key, "User likes green tea", topics=["food", "drinks"])
        await runner.service.add(
            runner.key, "User hiked Mount Tai with Li Wei", topics=["travel"],
            metadata=Metadata(kind="episode", participants=["Li Wei"], location="Shandong"),
        )  # fmt: skip
        old = await runner.service.add(runner.key, "User uses vim", topics=["tools"])
        await runner.service.add(runner.key, "User is learning Rust", topics=["programming", "rust"])
        await runner.service.delete(runner.key, old.id)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: len(app.chat.memory_panel.memory_list.entries) == 4)
        await pilot.press("down", "down")  # from the filter into the list, then the second memory
        await settled(pilot)

    app = make_app(make_settings(soft_delete=True))
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_help_and_command_hint(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await ready(pilot)
        await say(pilot, "/help")
        await pilot.press("slash", "s")
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=run_before)


def test_confirm_delete(snap_compare) -> None:
    async def run_before(pilot) -> None:
        app = await ready(pilot)
        await app.runner.service.add(app.runner.key, "User likes green tea", topics=["food"])
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: len(app.chat.memory_panel.memory_list.entries) == 1)
        await pilot.press("down", "d")  # from the filter into the list; d deletes
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=run_before)


def test_narrow_terminal(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await ready(pilot)
        await say(pilot, SEED_TELL)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: len(pilot.app.chat.memory_panel.memory_list.entries) == 1)
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)


def test_backend_down(snap_compare) -> None:
    async def down(settings):
        raise BackendError("redis backend at localhost:6379: connect failed: connection refused")

    app = MemchatApp(make_settings(memory="redis"), runner_factory=down, clock=lambda: FIXED_NOW,
                     cursor_blink=False)  # fmt: skip

    async def run_before(pilot) -> None:
        await wait_until(pilot, lambda: app.runner_error != "")
        await settled(pilot)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


def _halting_app() -> MemchatApp:
    return MemchatApp(make_settings(), runner_factory=runner_factory(HaltingModel, fixed_timings=True),
                      clock=lambda: FIXED_NOW, cursor_blink=False)  # fmt: skip


async def _until_halted(pilot) -> None:
    app = await ready(pilot)
    await say(pilot, "what do you know about me?", wait=False)
    await wait_until(pilot, lambda: "I will keep" in getattr(app.chat.chat_log.last_assistant(), "copy_text",
                                                                 lambda: "")())  # fmt: skip
    await pilot.pause(0.2)


def test_mid_stream(snap_compare) -> None:
    assert snap_compare(_halting_app(), terminal_size=(100, 30), run_before=_until_halted)


def test_stopped(snap_compare) -> None:
    async def run_before(pilot) -> None:
        await _until_halted(pilot)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not pilot.app.busy)
        await settled(pilot)

    assert snap_compare(_halting_app(), terminal_size=(100, 30), run_before=run_before)


def test_auto_extraction(snap_compare) -> None:
    """Auto mode: the banner's extraction line, the header's indicator, what
    the background extraction added, and the panel that reloaded by itself."""

    async def run_before(pilot) -> None:
        app = await ready(pilot)
        await pilot.press("ctrl+b")
        await say(pilot, "I live in Berlin and I like jazz")
        await wait_until(pilot, lambda: len(app.chat.memory_panel.memory_list.entries) == 2)
        await wait_until(pilot, lambda: app.extracting == 0 and app.runner.extraction_pending == 0)
        await settled(pilot)

    assert snap_compare(make_app(make_settings(extract=True)), terminal_size=(120, 36), run_before=run_before)
