"""Quitting gives the terminal back at once: in auto mode what is pending of
the conversation is saved afterwards, saying so. A backend whose driver is not
installed is said as a package to install, not as a server that is down."""

from __future__ import annotations

import io
import sys

import pytest

from memchat.tui.app import MemchatApp
from memchat.tui.closing import finish_after_exit

from .support import make_settings, ready, runner_factory, say, wait_until
from .test_extraction import GatedExtractor

SIZE = (120, 40)


async def test_quit_hands_pending_memories_over_and_they_are_saved_after(tmp_path) -> None:
    extractor = GatedExtractor()
    dsn = f"sqlite:///{tmp_path / 'memories.db'}"
    app = MemchatApp(
        make_settings(memory="sqlite", extract=True),
        runner_factory=runner_factory(extractor=lambda settings: extractor, store_options={"dsn": dsn}),
        cursor_blink=False,
        close_after_exit=True,
    )
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I live in Berlin and I like jazz")
        await wait_until(pilot, lambda: extractor.started == 1, what="the extraction to start")
        await pilot.press("ctrl+q")  # the job is still held: quitting does not wait for it
        await wait_until(pilot, lambda: not app.is_running, what="the app to close")
    runner = app.leftover_runner
    assert runner is not None and runner.extraction_pending
    out = io.StringIO()
    extractor.gate.set()
    await finish_after_exit(runner, out)
    text = out.getvalue()
    assert "💾 Saving memories from this conversation" in text and "✅ Memories saved: +" in text
    # Saved for real: a new service on the same file finds them.
    from backends import create
    from memchat.engine import MemoryService

    service = MemoryService(create("sqlite", dsn=dsn))
    try:
        texts = [e.memory.text for e in await service.read(runner.key)]
    finally:
        await service.close()
    assert any("Berlin" in t for t in texts)


async def test_a_missing_driver_is_said_as_a_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "backends.redis", raising=False)
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis → ModuleNotFoundError
    app = MemchatApp(make_settings(memory="redis"), cursor_blink=False)  # the real opening path
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_until(pilot, lambda: bool(app.runner_error), what="the failure")
        await pilot.pause()
        assert app.chat.header.status == "not installed"
        notes = "\n".join(str(n.render()) for n in app.chat.chat_log.query(".note"))
        assert "pip install 'memchat[redis]'" in notes
        assert "is the server running" not in notes and "Install it, then restart memchat" in notes
