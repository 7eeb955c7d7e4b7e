"""Pilot tests: start-up, commands, streaming, stop, errors, input, copy, pruning."""

from __future__ import annotations

import asyncio

import pytest
from textual import events

from memchat.engine import BackendError
from memchat.tui.app import MemchatApp
from memchat.tui.widgets.chat_input import ChatInput
from memchat.tui.widgets.message import AssistantMessage, Note, UserMessage
from tests.agent.scripted_model import ScriptedModel, Step

from .support import SEED_ASK, SEED_TELL, make_app, make_settings, ready, runner_factory, say, wait_until

SIZE = (120, 40)


def notes(app: MemchatApp, kind: str | None = None) -> list[str]:
    return [n.text for n in app.chat.chat_log.query(Note) if kind is None or n.kind == kind]


def answers(app: MemchatApp) -> list[AssistantMessage]:
    return list(app.chat.chat_log.query(AssistantMessage))


async def test_start_up_shows_the_banner_and_header() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.first_frame_at is not None
        header = app.chat.header
        assert (header.model, header.backend, header.user) == ("offline", "inmemory", "user")
        assert header.session == "memory-session-1700000000" and header.status == "ready"
        banner = notes(app, "banner")[0]
        assert "Memory chat ready!" in banner and "memory-session-1700000000" in banner
        assert "memory_add, memory_update, memory_search, memory_load" in banner
        assert "Offline model" in banner
        assert app.focused is app.chat.chat_input


async def test_seed_demo_remembers_across_sessions() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, SEED_TELL)
        first = answers(app)[-1]
        assert [p.call.name for p in first.panels.values()] == ["memory_add"]
        assert "张三喜欢 Go 语言编程" in first.copy_text()
        await say(pilot, "/new")
        await say(pilot, SEED_ASK)
        second = answers(app)[-1]
        panel = next(iter(second.panels.values()))
        assert panel.call.name == "memory_search" and panel.state == "done"
        assert "张三喜欢 Go 语言编程" in panel.result
        assert "张三喜欢 Go 语言编程" in second.copy_text()
        assert second.query(".stats")  # per-turn stats under the answer


async def test_streamed_answer_appears_piece_by_piece() -> None:
    text = "one two three four five six seven eight nine ten"
    settings = make_settings()
    app = MemchatApp(
        settings, runner_factory=runner_factory(lambda: ScriptedModel([Step(text, delay=0.05)])),
        cursor_blink=False,
    )  # fmt: skip
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "count to ten", wait=False)
        await wait_until(pilot, lambda: bool(answers(app)) and "three" in answers(app)[-1].copy_text())
        partial = answers(app)[-1].copy_text()
        assert app.busy and partial != text and app.chat.header.status == "thinking"
        await wait_until(pilot, lambda: not app.busy)
        message = answers(app)[-1]
        assert message.copy_text() == text
        markdown = message.query_one("Markdown")
        assert markdown.source == text
        assert "tok/s" in str(message.query_one(".stats").render())


async def test_escape_stops_mid_stream_and_keeps_the_session_usable() -> None:
    long = " ".join(f"word{i}" for i in range(200))
    model = ScriptedModel([Step(long, delay=0.02), Step("second answer")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "talk a lot", wait=False)
        await wait_until(pilot, lambda: "word5 " in (answers(app) or [None])[-1].copy_text())
        assert app.check_action("stop", ()) is True
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy, what="the stop")
        stopped = answers(app)[-1]
        assert stopped.stopped and stopped.has_class("-stopped")
        assert stopped.query(".stopped-mark")
        assert 0 < len(stopped.copy_text()) < len(long)
        history = app.runner.history
        assert history[-1]["role"] == "assistant" and history[-1]["content"].endswith("[stopped]")
        assert app.check_action("stop", ()) is False
        await say(pilot, "are you there?")
        assert answers(app)[-1].copy_text() == "second answer"


async def test_stream_command_toggles_streaming() -> None:
    seen: list[bool] = []

    class Spy(ScriptedModel):
        def stream(self, messages, tools=(), *, streaming=True):
            seen.append(streaming)
            return super().stream(messages, tools, streaming=streaming)

    app = MemchatApp(
        make_settings(), runner_factory=runner_factory(lambda: Spy([Step("a b c"), Step("d e f")])),
        cursor_blink=False,
    )  # fmt: skip
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "/stream")
        assert app.runner.streaming is False and app.chat.header.streaming is False
        assert "Streaming off" in notes(app)[-1]
        await say(pilot, "hello")
        await pilot.press("ctrl+t")
        assert app.runner.streaming is True
        await say(pilot, "hello again")
        assert seen == [False, True]


async def test_new_session_command_and_key() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I'm Zhang San and I like Go")
        assert app.runner.history
        await say(pilot, "/new")
        note = notes(app, "session")[-1]
        assert "Previous: memory-session-1700000000" in note and "Current:  memory-session-1700000001" in note
        assert app.runner.history == [] and app.chat.header.session == "memory-session-1700000001"
        await pilot.press("ctrl+n")
        assert app.chat.header.session == "memory-session-1700000002"
        await say(pilot, "what do I like?")
        assert "Go" in answers(app)[-1].copy_text()


async def test_help_unknown_and_exit_commands() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "/help")
        help_text = notes(app, "help")[-1]
        for name in ("/memory", "/new", "/stream", "/help", "/exit"):
            assert name in help_text
        await pilot.press("f1")
        assert len(notes(app, "help")) == 2
        await say(pilot, "/frobnicate")
        assert "Unknown command /frobnicate" in notes(app, "warn")[-1]
        await say(pilot, "/exit")
        await wait_until(pilot, lambda: not app.is_running, what="the exit")
    assert app.return_code == 0


async def test_memory_command_toggles_the_panel() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert not app.chat.memory_panel_shown
        await say(pilot, "/memory")
        panel = app.chat.memory_panel
        assert panel.display and app.focused is panel.filter_input  # type to filter at once
        await pilot.press("escape")
        assert app.focused is app.chat.chat_input
        await say(pilot, "/memory")
        assert not panel.display


async def test_the_panel_opens_at_once_after_start_and_fills_when_connected() -> None:
    """The panel is built when first opened: ctrl+b right after the first frame, before
    the backend is open, shows it with the filter focused, and its memories once connected."""
    opened = asyncio.Event()

    async def slow_factory(settings):
        await opened.wait()
        return await runner_factory()(settings)

    app = MemchatApp(make_settings(), runner_factory=slow_factory, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.first_frame_at is not None, what="the first frame")
        await pilot.press("ctrl+b")
        panel = app.chat.memory_panel
        assert panel.display and app.focused is panel.filter_input
        assert panel.memory_list.empty_text == "Connecting to the backend…"
        await pilot.press("i", "x")
        assert panel.filter_input.value == "ix"  # typing filters at once
        opened.set()
        await ready(pilot)
        await wait_until(pilot, lambda: panel.memory_list.empty_text != "Connecting to the backend…",
                         what="the memories once connected")  # fmt: skip
        assert "0 containing “ix”" in str(panel.query_one("#memory-status").render())
        await pilot.press("ctrl+b")
        assert not panel.display and app.focused is app.chat.chat_input


async def test_model_error_is_shown_and_the_next_message_works() -> None:
    model = ScriptedModel([Step(error="the model service answered 503: try again"), Step("all good now")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "hello")
        failed = answers(app)[-1]
        assert "503" in str(failed.query_one(".turn-error").render())
        assert any("503" in str(n.message) for n in app._notifications)
        await say(pilot, "hello again")
        assert answers(app)[-1].copy_text() == "all good now"


async def test_unexpected_model_crash_ends_the_turn_cleanly() -> None:
    class Broken(ScriptedModel):
        async def stream(self, messages, tools=(), *, streaming=True):
            raise RuntimeError("socket closed")
            yield  # pragma: no cover

    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: Broken([])), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "hello")
        assert "socket closed" in str(answers(app)[-1].query_one(".turn-error").render())
        assert not app.busy


async def test_backend_down_then_back() -> None:
    calls = 0
    working = runner_factory()

    async def flaky(settings):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise BackendError("redis backend at localhost:6379: connect failed: connection refused")
        return await working(settings)

    app = MemchatApp(make_settings(), runner_factory=flaky, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.runner_error != "", what="the failure")
        await pilot.pause()
        assert app.chat.header.status == "down"
        assert "connection refused" in notes(app, "error")[-1]
        assert any("connection refused" in str(n.message) for n in app._notifications)
        # The app stays usable: the next message reconnects and is answered.
        await say(pilot, "I like tea")
        await wait_until(pilot, lambda: app.runner is not None and not app.busy)
        await wait_until(pilot, lambda: bool(answers(app)) and answers(app)[-1].finished)
        assert calls == 2 and app.chat.header.status == "ready"
        assert "tea" in answers(app)[-1].copy_text()


async def test_backend_down_puts_the_message_back() -> None:
    async def down(settings):
        raise BackendError("postgres backend at db:5432: connect failed: timeout")

    app = MemchatApp(make_settings(), runner_factory=down, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.runner_error != "")
        await say(pilot, "remember this", wait=False)
        await wait_until(pilot, lambda: len(notes(app, "error")) == 2)
        await pilot.pause()
        assert app.chat.chat_input.text == "remember this"


async def test_message_sent_while_connecting_waits_for_the_backend() -> None:
    gate = asyncio.Event()
    working = runner_factory()

    async def slow(settings):
        await gate.wait()
        return await working(settings)

    app = MemchatApp(make_settings(), runner_factory=slow, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await say(pilot, "I like tea", wait=False)
        await pilot.pause(0.05)
        assert app.chat.header.status == "connecting" and not answers(app)
        gate.set()
        await wait_until(pilot, lambda: bool(answers(app)) and answers(app)[-1].finished)
        assert "tea" in answers(app)[-1].copy_text()


async def test_input_history_completion_and_newlines() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        chat_input = app.chat.chat_input
        await say(pilot, "first message")
        await say(pilot, "second message")
        await pilot.press("up")
        assert chat_input.text == "second message"
        await pilot.press("up")
        assert chat_input.text == "first message"
        await pilot.press("down", "down")
        assert chat_input.text == ""
        # Slash-command completion: a suggestion, Tab accepts it; hints list matches.
        await pilot.press("slash", "n", "e")
        assert chat_input.suggestion == "w"
        hint = app.chat.query_one("#command-hint")
        assert hint.display and "/new" in str(hint.render())
        await pilot.press("tab")
        assert chat_input.text == "/new"
        chat_input.clear()
        # ctrl+j adds a line; a multi-line paste stays in the box; Enter sends all of it.
        await pilot.press("a", "ctrl+j", "b")
        assert chat_input.text == "a\nb"
        chat_input.clear()
        app.post_message(events.Paste("line one\nline two\nline three"))
        await pilot.pause()
        assert chat_input.text == "line one\nline two\nline three"
        assert len(list(app.chat.chat_log.query(UserMessage))) == 2
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.busy)
        assert list(app.chat.chat_log.query(UserMessage))[-1].text == "line one\nline two\nline three"


async def test_typing_while_an_answer_runs_is_kept() -> None:
    model = ScriptedModel([Step(" ".join(["x"] * 100), delay=0.02)])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "go", wait=False)
        await wait_until(pilot, lambda: app.busy)
        await say(pilot, "too early", wait=False)
        assert app.chat.chat_input.text == "too early"
        assert any("Esc" in str(n.message) for n in app._notifications)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy)


async def test_copy_the_last_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TMUX", "STY", "TERM_PROGRAM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I'm Zhang San and I like Go")
        await pilot.press("ctrl+y")
        assert app.clipboard == answers(app)[-1].copy_text() != ""
        assert "Copied" in str(list(app._notifications)[-1].message)
        # A message focused with a click is the one copied.
        user_message = app.chat.chat_log.query_one(UserMessage)
        user_message.focus()
        await pilot.press("ctrl+y")
        assert app.clipboard == "I'm Zhang San and I like Go"


async def test_copy_warns_when_the_terminal_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM_PROGRAM", "Apple_Terminal")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "hello")
        await pilot.press("ctrl+y")
        notification = list(app._notifications)[-1]
        assert notification.severity == "warning" and "cannot copy" in notification.message
        assert app.clipboard  # still kept for pasting inside memchat


async def test_every_action_has_a_binding_and_a_palette_entry() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        keys = {b.action: b.key for b in MemchatApp.BINDINGS}
        for action in ("stop", "new_session", "toggle_memories", "toggle_streaming", "toggle_tool_panels",
                       "copy_message", "help"):  # fmt: skip
            assert action in keys
        titles = {c.title for c in app.get_system_commands(app.screen)}
        wanted = {"New session", "Memory panel", "Toggle streaming", "Tool panels", "Copy message", "Help"}
        assert wanted <= titles
        # Run one through the palette itself.
        await pilot.press("ctrl+p")
        await pilot.pause()
        for key in "New session":
            await pilot.press("space" if key == " " else key)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.header.session == "memory-session-1700000001")


async def test_long_chats_prune_old_messages_into_plain_text() -> None:
    app = MemchatApp(
        make_settings(), runner_factory=runner_factory(), cursor_blink=False, max_live_messages=6
    )
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        for i in range(6):
            await say(pilot, f"message number {i}")
        log = app.chat.chat_log
        assert len(log.messages) <= 6
        earlier = log.earlier
        assert earlier.display and earlier.pruned >= 7
        assert "message number 0" in str(earlier.render())
        assert list(log.query(UserMessage))[-1].text == "message number 5"


async def test_narrow_terminal() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await say(pilot, SEED_TELL)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: len(app.chat.memory_panel.memory_list.entries) == 1)
        chat_input = app.chat.chat_input
        assert chat_input.region.width >= 30 and chat_input.region.height >= 3
        assert app.chat.memory_panel.region.width <= 40
        assert app.chat.query_one("MemchatFooter").region.y == 23
        assert app.focused is app.chat.memory_panel.filter_input
        # The list gets more room than the details of the highlighted memory.
        memory_list = app.chat.memory_panel.memory_list
        details = app.chat.query_one("#memory-details")
        assert memory_list.region.height > details.region.height
        await pilot.press("escape")
        assert isinstance(app.focused, ChatInput)
