"""Pilot tests of saved sessions in the TUI: the sessions screen (/sessions,
f2) lists, searches, opens, renames and deletes; a continued session is
back in the log with its tool panels and reaches the model; ↑/↓ history and
/export. The runner is the test one over a SQLite file, with sessions
attached as the real app attaches them."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from memchat.agent.sessions import attach_sessions, recorder_of
from memchat.tui.app import MemchatApp
from memchat.tui.screens.confirm import ConfirmScreen
from memchat.tui.screens.sessions import RenameScreen, SessionsScreen
from memchat.tui.widgets.message import AssistantMessage, Note, UserMessage

from .support import FIXED_NOW, SEED_TELL, make_settings, ready, runner_factory, say, wait_until

SIZE = (120, 40)


def sessions_app(tmp_path, **settings) -> MemchatApp:
    base = runner_factory(store_options={"dsn": f"sqlite:///{tmp_path / 'chat.db'}"})

    async def factory(values):
        runner = await base(values)
        await attach_sessions(runner, values)
        return runner

    return MemchatApp(
        make_settings(memory="sqlite", **settings),
        runner_factory=factory,
        clock=lambda: FIXED_NOW,
        cursor_blink=False,
    )


async def open_sessions(pilot) -> SessionsScreen:
    await say(pilot, "/sessions")
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
    screen = app.screen
    await wait_until(
        pilot, lambda: "session" in str(screen.query_one("#sessions-status").render()), what="the list"
    )
    return screen


def rows(screen: SessionsScreen) -> list[tuple[str, str]]:
    """(session id, title) of each row, top to bottom."""
    table = screen.query_one(DataTable)
    return [(str(table.get_row_at(i)[4]), str(table.get_row_at(i)[1])) for i in range(table.row_count)]


async def test_sessions_lists_both_after_new_and_opens_the_first_with_its_tool_panels(tmp_path) -> None:
    app = sessions_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, SEED_TELL)
        first = app.runner.session_id
        await say(pilot, "/new")
        await say(pilot, "hello")
        second = app.runner.session_id
        screen = await open_sessions(pilot)
        assert rows(screen) == [(second, "hello"), (first, SEED_TELL)]
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: app.runner.session_id == first, what="the first session")
        await wait_until(pilot, lambda: app.chat.chat_log.query(AssistantMessage), what="the conversation")
        log = app.chat.chat_log
        assert [m.text for m in log.query(UserMessage)] == [SEED_TELL]
        [answer] = log.query(AssistantMessage)
        [panel] = answer.panels.values()
        assert panel.call.name == "memory_add" and panel.state == "done" and "Memory added" in panel.result
        assert "张三喜欢 Go 语言编程" in answer.copy_text() and answer.query(".stats")
        assert app.chat.header.session == first
        assert any("Continuing session" in n.text for n in log.query(Note))
        assert [m["role"] for m in app.runner.history] == ["user", "assistant", "tool", "assistant"]
        # The model continues from there: it is given the first conversation.
        await say(pilot, "What did I just say?")
        assert f"“{SEED_TELL}”" in app.chat.chat_log.last_assistant().copy_text()


async def test_resume_on_start_shows_the_conversation_and_keeps_the_typed_history(tmp_path) -> None:
    app = sessions_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I like Go")
        await say(pilot, "/help")
        kept = app.runner.session_id

    again = sessions_app(tmp_path, resume=True)
    async with again.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(
            pilot, lambda: again.chat.chat_log.query(UserMessage), what="the resumed conversation"
        )
        assert again.runner.session_id == kept and again.chat.header.session == kept
        banner = next(n.text for n in again.chat.chat_log.query(Note) if n.kind == "banner")
        assert f"Session: {kept}" in banner  # the banner names the session being continued
        assert [m.text for m in again.chat.chat_log.query(UserMessage)] == ["I like Go"]
        # ↑ brings back what was typed in the previous run, newest first.
        chat_input = again.chat.chat_input
        chat_input.focus()
        await pilot.press("up")
        assert chat_input.text == "/help"
        await pilot.press("up")
        assert chat_input.text == "I like Go"
        chat_input.clear()
        await say(pilot, "What did I just say?")
        assert "“I like Go”" in again.chat.chat_log.last_assistant().copy_text()


async def test_search_rename_and_delete_with_confirmation(tmp_path) -> None:
    app = sessions_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I like Go")
        go = app.runner.session_id
        await say(pilot, "/new")
        await say(pilot, "我喜欢喝绿茶")
        tea = app.runner.session_id
        screen = await open_sessions(pilot)

        search = screen.query_one("#sessions-search", Input)
        search.focus()
        await pilot.press(*"user likes go")
        await wait_until(pilot, lambda: [r[0] for r in rows(screen)] == [go], what="the search")
        search.value = ""
        await wait_until(pilot, lambda: len(rows(screen)) == 2, what="the full list")

        screen.query_one(DataTable).focus()
        await pilot.press("down", "r")  # the Go session
        await wait_until(pilot, lambda: isinstance(app.screen, RenameScreen), what="the rename box")
        app.screen.query_one(Input).value = "Programming"
        await pilot.press("enter")
        await wait_until(pilot, lambda: "Programming" in [r[1] for r in rows(screen)], what="the new title")
        recorder = recorder_of(app.runner)
        assert (await recorder.store.get(app.runner.key, go)).title == "Programming"

        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("n")  # no: nothing changes
        assert len(rows(screen)) == 2
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: [r[0] for r in rows(screen)] == [tea], what="the deletion")
        assert await recorder.store.get(app.runner.key, go) is None
        await pilot.press("escape")
        assert app.runner.session_id == tea  # the conversation on screen is untouched


async def test_ctrl_o_opens_the_screen_and_export_writes_markdown(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = sessions_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I like Go")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
        await pilot.press("escape")
        await say(pilot, "/export")
        path = tmp_path / f"{app.runner.session_id}.md"
        assert any(
            f"Exported {app.runner.session_id} (2 messages)" in n.text for n in app.chat.chat_log.query(Note)
        )
        assert path.read_text(encoding="utf-8").startswith("# I like Go")


async def test_deleting_the_conversation_on_screen_starts_a_new_session(tmp_path) -> None:
    app = sessions_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I like Go")
        doomed = app.runner.session_id
        screen = await open_sessions(pilot)
        assert [r[0] for r in rows(screen)] == [doomed]
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        assert "This is the conversation on screen" in str(app.screen.query_one("#confirm-detail").render())
        await pilot.press("y")
        await wait_until(pilot, lambda: rows(screen) == [], what="the deletion")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.runner.session_id != doomed, what="a new session")
        assert app.runner.history == [] and app.chat.header.session == app.runner.session_id
        await say(pilot, "hello")
        recorder = recorder_of(app.runner)
        await recorder.flush()
        assert [s.title for s in await recorder.store.list(app.runner.key)] == ["hello"]


async def test_a_long_session_shows_its_newest_turns_live_and_the_rest_as_text(tmp_path) -> None:
    from memchat.sessions.model import SessionInfo, SessionRecord

    app = sessions_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        recorder = recorder_of(app.runner)
        records = []
        for i in range(12):
            records += [
                SessionRecord("message", {"role": "user", "content": f"question {i}"}),
                SessionRecord("message", {"role": "assistant", "content": f"answer {i}"}),
            ]
        await recorder.store.append(
            app.runner.key, SessionInfo(id="memory-session-1600000000", title="long"), records
        )
        app.open_session("memory-session-1600000000")
        await wait_until(pilot, lambda: len(app.chat.chat_log.query(UserMessage)) == 8, what="the live turns")
        assert [m.text for m in app.chat.chat_log.query(UserMessage)] == [
            f"question {i}" for i in range(4, 12)
        ]
        earlier = app.chat.chat_log.earlier
        assert earlier.display and earlier.pruned == 4 and "question 0" in earlier.entries[0]
        assert [m["content"] for m in app.runner.history][-2:] == ["question 11", "answer 11"]


async def test_an_unknown_session_is_said_and_a_new_one_starts(tmp_path) -> None:
    app = sessions_app(tmp_path, session="memory-session-42")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(
            pilot, lambda: any(n.kind == "error" for n in app.chat.chat_log.query(Note)), what="the note"
        )
        [note] = [n.text for n in app.chat.chat_log.query(Note) if n.kind == "error"]
        assert "no saved session 'memory-session-42'" in note and "this is a new session" in note
        await say(pilot, "hello")  # and the chat works, saved as a new session
        assert app.runner.session_id != "memory-session-42"
