"""The chat's saved sessions, as a mixin of MemchatApp: continuing a session
(``--resume``, ``--session``, or picked in the sessions screen) with its
conversation back in the log, tool panels included; the sessions screen
(``/sessions``, f2, the command palette); ``/export``; and the input
history (↑/↓) kept across runs.

The saving itself happens below the UI (``memchat.sessions.recorder``, told
by the runner); this module only shows and steers it."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from textual import work
from textual.content import Content

from memchat.safe_text import one_line, printable

from .host import AppHost
from .widgets.message import AssistantMessage

if TYPE_CHECKING:
    from memchat.agent.llm import ToolCall
    from memchat.agent.runner import Runner
    from memchat.agent.sessions import Resumed
    from memchat.sessions.model import SessionRecord
    from memchat.sessions.recorder import SessionRecorder

    from .screens.sessions import SessionsClosed
    from .widgets.chat_log import ChatLog

#: Turns of a continued session shown as live messages; older ones as plain text.
LIVE_TURNS = 8
#: Typed inputs loaded for ↑/↓.
INPUTS_LOADED = 500


def turns_of(records: Sequence[SessionRecord]) -> list[list[SessionRecord]]:
    """The records grouped by turn, each group starting at a user message."""
    turns: list[list[SessionRecord]] = []
    for record in records:
        if record.role == "user" or not turns:
            turns.append([])
        turns[-1].append(record)
    return turns


def turn_transcript(turn: Sequence[SessionRecord]) -> str:
    """A turn as the plain text of pruned messages."""
    from memchat.sessions_text import conversation_lines

    return printable("\n".join(conversation_lines(turn)))


async def show_turn(chat_log: ChatLog, turn: Sequence[SessionRecord]) -> None:
    """One saved turn as live messages: the user's, then the answer with its tool panels and stats."""
    from memchat.agent.events import TurnStats  # the engine's extraction types: after the first frame
    from memchat.agent.llm import ToolCall

    view: AssistantMessage | None = None
    calls: dict[str, ToolCall] = {}
    stopped = False
    for record in turn:
        data = record.data
        if record.role == "user":
            await chat_log.add_user(str(data.get("content") or ""))
            continue
        if view is None:
            view = await chat_log.add_assistant()
        if record.kind == "stats":
            fields: dict[str, Any] = {k: data.get(k) for k in TurnStats.__dataclass_fields__}
            with contextlib.suppress(TypeError, ValueError):
                await view.set_stats(TurnStats(**fields))
        elif record.kind == "error":
            await view.add_error(str(data.get("message", "")))
        elif record.role == "assistant":
            if data.get("content"):
                await view.append_text(str(data["content"]))
            stopped = stopped or bool(record.meta.get("stopped"))
            made = []
            for call in data.get("tool_calls") or ():
                function = call.get("function") or {}
                made.append(
                    ToolCall(
                        str(call.get("id")), str(function.get("name")), str(function.get("arguments") or "")
                    )
                )
            if made:
                calls.update((c.id, c) for c in made)
                await view.add_tool_calls(tuple(made))
        elif record.role == "tool":
            call = calls.get(str(data.get("tool_call_id")))
            if call is not None:
                view.tool_finished(
                    call,
                    str(data.get("content") or ""),
                    bool(record.meta.get("is_error")),
                    float(record.meta.get("elapsed") or 0.0),
                )
    if view is not None:
        await view.finish(stopped=stopped)


async def show_conversation(chat_log: ChatLog, records: Sequence[SessionRecord]) -> None:
    """A saved conversation in the log: the newest ``LIVE_TURNS`` turns as
    messages, the ones before as plain text (as long chats are pruned)."""
    turns = turns_of(records)
    older, live = turns[:-LIVE_TURNS], turns[-LIVE_TURNS:]
    if older:
        chat_log.earlier.add([turn_transcript(turn) for turn in older])
    for turn in live:
        await show_turn(chat_log, turn)


async def clear_log(chat_log: ChatLog) -> None:
    await chat_log.remove_children(chat_log.messages)
    earlier = chat_log.earlier
    earlier.entries.clear()
    earlier.pruned = 0
    earlier.update("")
    earlier.display = False


class SessionActions(AppHost):
    """Mixed into MemchatApp (what it uses of the app: host.AppHost)."""

    def _recorder(self) -> SessionRecorder | None:
        from memchat.agent.sessions import recorder_of

        return recorder_of(self.runner) if self.runner is not None else None

    # -- start-up ------------------------------------------------------------
    async def start_sessions(self, runner: Runner) -> Callable[[], Awaitable[object]]:
        """The runner is connected: bring back the typed inputs (↑/↓) and
        continue the session ``--resume`` / ``--session`` asked for (before the
        banner names the session). Returns what to show once the banner is up."""
        from memchat.agent.sessions import start
        from memchat.sessions.model import SessionNotFoundError

        recorder = self._recorder()
        chat_log = self.chat.chat_log

        async def nothing() -> None:
            pass

        if recorder is None:
            return nothing
        recorder.on_problem = self._session_problem
        try:
            typed = await recorder.store.inputs(recorder.key, INPUTS_LOADED)
            self.chat.chat_input.sent[:0] = typed
            resumed = await start(runner, self.settings)
        except SessionNotFoundError as exc:
            said = f"❌ {exc}; this is a new session."
            return lambda: chat_log.add_note(said, "error")
        except Exception as exc:
            self._session_problem(str(exc))
            return nothing
        if resumed is not None:
            return lambda: self.show_resumed(resumed)
        if self.settings.resume:
            return lambda: chat_log.add_note(
                "ℹ There is no saved session to continue yet: this is a new one."
            )
        return nothing

    def _session_problem(self, problem: str) -> None:
        self.alert(
            f"The conversation is not being saved: {problem}",
            title="Sessions",
            severity="warning",
            timeout=10,
        )

    async def show_resumed(self, resumed: Resumed) -> None:
        runner = self.runner
        assert runner is not None
        chat = self.chat
        chat.header.session = runner.session_id
        self.sub_title = runner.session_id
        info = resumed.info
        lines = [
            Content.from_markup(
                "↩ [b]Continuing session[/b] $id: $title  [$text-muted]($count messages)[/]",
                id=info.id,
                title=one_line(info.title),
                count=str(info.message_count),
            )
        ]
        if resumed.trimmed:
            lines.append(
                Content.from_markup(
                    "[$text-muted]The model is given the newest $sent of $total messages: "
                    "the rest do not fit its context.[/]",
                    sent=str(resumed.sent),
                    total=str(resumed.total),
                )
            )
        await chat.chat_log.add_note(Content("\n").join(lines), "session")
        await show_conversation(chat.chat_log, resumed.records)
        chat.chat_log.scroll_end(animate=False)

    def remember_input(self, text: str) -> None:
        recorder = self._recorder()
        if recorder is not None:
            recorder.input(text)

    # -- the sessions screen ---------------------------------------------------
    def action_sessions(self) -> None:
        recorder = self._recorder()
        if recorder is None:
            self.notify(
                "Not connected yet." if self.runner is None else "This chat does not save sessions.",
                severity="warning",
            )
            return
        assert self.runner is not None
        from .screens.sessions import SessionsScreen  # DataTable loads with the first use

        screen = SessionsScreen(recorder, current=self.runner.session_id)
        self.push_screen(screen, self._sessions_closed)

    async def _sessions_closed(self, result: SessionsClosed | None) -> None:
        runner = self.runner
        if result is None or runner is None:
            return
        if result.open and result.open != runner.session_id:
            self.open_session(result.open)
        elif runner.session_id in result.deleted:
            await self.action_new_session()

    @work(group="session-open", exclusive=True, exit_on_error=False)
    async def open_session(self, session_id: str) -> None:
        """Continue saved session ``session_id``: the log shows it, the model gets its history."""
        from memchat.agent.sessions import resume

        runner = self.runner
        if runner is None:
            return
        if self.busy:
            self.notify("Stop the answer being written first (Esc).", severity="warning")
            return
        try:
            resumed = await resume(runner, session_id, history_tokens=self.settings.history_tokens)
        except Exception as exc:
            self.alert(str(exc), title="Sessions", severity="error")
            return
        await clear_log(self.chat.chat_log)
        await self.show_resumed(resumed)

    # -- export ------------------------------------------------------------------
    async def action_export(self, argument: str = "") -> None:
        """/export [md | json | FILE], or the palette's entry (Markdown in the current folder)."""
        from memchat.sessions_text import export_current

        if self.runner is None:
            self.notify("Not connected yet.", severity="warning")
            return
        try:
            said = await export_current(self.runner, argument)
        except Exception as exc:
            said = f"❌ {exc}"
        await self.chat.chat_log.add_note(said, "error" if said.startswith("❌") else "info")
