"""Pilot tests: text written by a model (memories, answers, tool arguments and
results) or quoted from an error never drives the terminal and is never read
as markup: ``[bold]x[/bold]`` and ``pip install 'memchat[redis]'`` show as written."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

from textual.widgets import Static
from textual.widgets._toast import Toast

from memchat.console import extraction_lines
from memchat.engine import Entry, Memory, UserKey
from memchat.engine.extraction.types import ExtractionFinished
from memchat.engine.model import BackendError
from memchat.tui.app import MemchatApp
from memchat.tui.screens.confirm import ConfirmScreen
from memchat.tui.widgets.message import AssistantMessage, extraction_content
from memchat.tui.widgets.tool_panel import ToolCallPanel
from tests.agent.scripted_model import ScriptedModel, Step

from .support import make_app, make_settings, ready, runner_factory, say, wait_until

SIZE = (120, 40)

#: Window title (OSC … BEL), clear screen (CSI), C1 CSI, markup-like text, an install hint.
HOSTILE = "\x1b]0;pwned\x07 tea\x1b[2J \x9b31m [bold]x[/bold] pip install 'memchat[redis]'"
#: What a terminal acts on: C0 controls (but newline), DEL, C1 controls; bidi overrides.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_inert(text: str) -> None:
    assert not RAW.search(text), repr(text)


def assert_literal(text: str) -> None:
    """The hostile memory, shown: controls visible, brackets kept."""
    assert_inert(text)
    assert "␛]0;pwned␇ tea␛[2J" in text and "\\x9b31m" in text
    assert "[bold]x[/bold]" in text and "pip install 'memchat[redis]'" in text


def row(app: MemchatApp, y: int) -> str:
    return "".join(segment.text for segment in app.chat.memory_panel.memory_list.render_line(y))


def toasts(app: MemchatApp) -> list[str]:
    return [toast.render().plain for toast in app.screen.query(Toast)]


async def test_memory_panel_shows_a_hostile_memory_as_text() -> None:
    app = make_app()
    async with app.run_test(size=(200, 40), notifications=True) as pilot:
        await ready(pilot)
        runner = app.runner
        await runner.service.add(runner.key, HOSTILE, topics=["\x1b[31mred", "[i]"])
        await pilot.press("ctrl+b")
        panel = app.chat.memory_panel
        await wait_until(pilot, lambda: len(panel.memory_list.entries) == 1, what="the memory")
        await pilot.pause()
        assert_inert(row(app, 0))  # the row is cut to the panel's width
        assert row(app, 0).startswith("● ␛]0;pwned␇ tea␛[2J \\x9b31m [bold]x[/bold]")
        assert_inert(row(app, 1))
        assert "␛[31mred, [i]" in row(app, 1)
        details = str(app.chat.query_one("#memory-details", Static).render())
        assert_literal(details)
        assert "␛[31mred" in details
        memory_list = app.chat.memory_panel.memory_list
        memory_list.entries[0] = replace(memory_list.entries[0], memory=Memory("a\nb\x1b[2J"))
        assert row(app, 0).startswith("● a⏎b␛[2J")  # one row per memory


async def test_delete_dialog_and_notification_show_the_memory_literally() -> None:
    app = make_app()
    async with app.run_test(size=(200, 40), notifications=True) as pilot:
        await ready(pilot)
        runner = app.runner
        await runner.service.add(runner.key, HOSTILE, topics=["test"])
        await pilot.press("ctrl+b")
        panel = app.chat.memory_panel
        await wait_until(pilot, lambda: len(panel.memory_list.entries) == 1, what="the memory")
        panel.memory_list.focus()
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        assert_literal(str(app.screen.query_one("#confirm-detail", Static).render()))
        await pilot.press("y")
        await wait_until(pilot, lambda: any("Deleted" in t for t in toasts(app)), what="the notification")
        shown = next(t for t in toasts(app) if "Deleted" in t)
        assert_literal(shown)


async def test_an_install_hint_in_an_error_is_not_eaten_as_markup() -> None:
    async def missing_driver(settings):
        raise BackendError(
            "the redis backend needs its driver: pip install 'memchat[redis]' [bold]now[/bold]"
        )

    app = MemchatApp(make_settings(), runner_factory=missing_driver, cursor_blink=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_until(pilot, lambda: bool(toasts(app)), what="the notification")
        toast = toasts(app)[0]
        assert "pip install 'memchat[redis]' [bold]now[/bold]" in toast
        notes = [str(note.render()) for note in app.chat.chat_log.query(".note")]
        assert any("pip install 'memchat[redis]' [bold]now[/bold]" in note for note in notes)


async def test_answers_tool_panels_and_errors_are_inert() -> None:
    args = '{"memory": "' + HOSTILE.replace("\x1b", "\\u001b").replace("\x07", "\\u0007") + '"}'
    model = ScriptedModel([
        Step("Saving \x1b]0;pwned\x07 it.", [("call\x1b[2J-1", "memory_add\x9b", "{\"memory\": \"\x9b\"}"),
                                             ("call-2", "memory_add", args)]),
        Step("Saved: \x1b[2J [bold]done[/bold] \u202eexe."),
        Step("", error="upstream said \x1b[31mno\x07 [bold]x[/bold]"),
    ])  # fmt: skip
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        await say(pilot, "remember \x1b[5mthis")
        user = str(app.chat.chat_log.query(".user-message").last().render())
        assert_inert(user)
        assert "remember ␛[5mthis" in user
        view = app.chat.chat_log.query(AssistantMessage).last()
        answer = view.copy_text()
        assert_inert(answer)
        assert "Saving ␛]0;pwned␇ it." in answer and "Saved: ␛[2J [bold]done[/bold] \\u202eexe." in answer
        panels = list(view.query(ToolCallPanel))
        await wait_until(pilot, lambda: all(p.state in ("done", "error") for p in panels), what="the tools")
        await pilot.press("ctrl+o")  # open them all: the details are built now
        await wait_until(pilot, lambda: all(p.query(".tool-result") for p in panels), what="the details")
        for panel in panels:
            assert_inert(panel.title.plain)
            for part in panel.query(".tool-label, .tool-json"):
                assert_inert(str(part.render()))
            assert_inert(panel.transcript())
        assert "call␛[2J-1" in str(panels[0].query_one(".tool-label", Static).render())
        result = str(panels[1].query_one(".tool-result", Static).render())
        assert "[bold]x[/bold]" in result and "memchat[redis]" in result
        await say(pilot, "again")
        error = str(app.chat.chat_log.query(AssistantMessage).last().query_one(".turn-error").render())
        assert_inert(error)
        assert "upstream said ␛[31mno␇ [bold]x[/bold]" in error
        shown = [t for t in toasts(app) if "upstream" in t]
        assert shown and all("␛[31mno␇ [bold]x[/bold]" in t for t in shown)


def test_extraction_notes_show_memories_inert() -> None:
    event = extraction_event()
    text = extraction_content(event).plain
    assert_inert(text)
    assert "[bold]x[/bold]" in text and "memchat[redis]" in text and "bad ␛[2J" in text
    assert "(was: old ␛[2J)" in text
    lines = extraction_lines(event)
    assert_inert("".join(lines))
    assert any("[bold]x[/bold]" in line for line in lines) and "(was: old ␛[2J)" in lines[2]


def extraction_event() -> ExtractionFinished:
    now = datetime.now(UTC)

    def entry(text: str) -> Entry:
        return Entry(id="a" * 64, app="a", user="u", memory=Memory(text), created_at=now, updated_at=now)

    return ExtractionFinished(
        key=UserKey("a", "u"), session_id="s", status="ok", added=(entry(HOSTILE),),
        updated=((entry("old \x1b[2J"), entry("new \x9b")),), deleted=(entry("gone \x07"),),
        errors=("bad \x1b[2J",), skipped=("skipped \x1b]0;x\x07",),
    )  # fmt: skip
