"""MemchatApp: the Textual chat with long-term memory.

The app owns the state (the runner, the running turn, the panel's query) and
drives the widgets with method calls. Workers do the slow work (opening the
backend, running a turn, reading memories) and only post messages back.
Heavy modules (the backend's driver, SQLAlchemy, the openai SDK) are imported
after the first frame, in a thread.

Auto mode (a background extractor makes the memories): the runner's
extraction listener posts ``ExtractionProgress``; the header shows
"🧩 extracting…" while a job runs, the chat log gets what it changed, and
the memory panel reloads. Quitting from ``memchat`` (``close_after_exit``)
exits at once and hands the runner over: run_tui saves what is pending after
the terminal is restored. Otherwise (tests, embedding the app) quitting waits
(bounded, without freezing the screen) for the pending extraction; quitting
again does not wait.

The memory panel's work is in memory_actions.py, run-time toggles and their
remembering in toggles.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen

from memchat.agent.commands import Command, parse_command
from memchat.safe_text import one_line

from .memory_actions import MemoryActions, describe_error
from .messages import (
    EmbeddingProgress,
    ExtractionDrained,
    ExtractionProgress,
    RunnerFailed,
    RunnerReady,
    TurnEnded,
    TurnEvent,
)
from .screens.chat import ChatScreen
from .services import (
    RunnerFactory,
    cancel_extraction,
    clipboard_problem,
    close_default_runner,
    describe_open_failure,
    open_default_runner,
)
from .sessions import SessionActions
from .toggles import Toggles
from .widgets.chat_input import COMMAND_HELP, ChatInput
from .widgets.message import AssistantMessage, ChatMessage, ExtractionNote

if TYPE_CHECKING:
    from memchat.agent.runner import Runner
    from memchat.engine.vectors import EmbeddingProgress as EmbeddingState
    from memchat.settings import Settings

#: Seconds between two text updates of a streaming answer (at most ~30 a second).
TEXT_FLUSH_INTERVAL = 0.033

#: Key for each command, shown in /help.
COMMAND_KEYS = {
    "/memory": "ctrl+b", "/new": "ctrl+n", "/stream": "ctrl+t", "/sessions": "f2",
    "/export": "md or json", "/forget": "d in the panel", "/help": "f1", "/exit": "ctrl+q",
}  # fmt: skip

#: Actions that make no sense while a dialog is open.
CHAT_ACTIONS = {
    "new_session", "toggle_memories", "toggle_streaming", "toggle_tool_panels", "copy_message", "help",
    "stop", "sessions", "export",
}  # fmt: skip

#: Actions that make no sense while the app saves memories before quitting.
QUITTING_ACTIONS = {"new_session", "toggle_streaming", "stop"}


class MemchatApp(SessionActions, MemoryActions, Toggles, App[int]):
    #: Absolute, so that subclasses defined elsewhere (tests, benchmarks) find it.
    CSS_PATH = Path(__file__).parent / "memchat.tcss"
    TITLE = "memchat"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "stop", "Stop", tooltip="Stop the answer being written"),
        Binding("ctrl+n", "new_session", "New", tooltip="Start a new session (memories are kept)"),
        Binding("ctrl+b", "toggle_memories", "Memories", tooltip="Show or hide the memory panel"),
        Binding("ctrl+t", "toggle_streaming", "Stream", tooltip="Toggle streaming output"),
        Binding("ctrl+o", "toggle_tool_panels", "Tools", tooltip="Open or fold every tool-call panel"),
        # Not in the footer (it is full): /help and the command palette list it.
        Binding("f2", "sessions", "Sessions", show=False, tooltip="Saved sessions: open, rename, delete"),
        Binding("ctrl+y", "copy_message", "Copy", priority=True, tooltip="Copy the selected or last answer"),
        Binding("f1", "help", "Help", tooltip="Show commands and keys"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        runner_factory: RunnerFactory | None = None,
        runner_closer: Callable[[Runner], Awaitable[None]] | None = None,
        clock: Callable[[], datetime] | None = None,
        cursor_blink: bool = True,
        max_live_messages: int | None = None,
        close_after_exit: bool = False,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.runner: Runner | None = None
        self.runner_error = ""
        self.streaming = settings.streaming
        self.tools_expanded = settings.tool_panels == "expanded"
        self._told_preferences = False
        self.busy = False
        self.turn = 0
        self.first_frame_at: float | None = None
        self.clock = clock or (lambda: datetime.now(UTC))
        self._runner_factory = runner_factory or self._open_default_runner
        self._runner_closer = runner_closer or close_default_runner
        self._cursor_blink = cursor_blink
        self._max_live = max_live_messages
        self._views: dict[int, AssistantMessage] = {}
        self._turn_worker = None
        self._connecting = False
        self._queued: str | None = None
        self._memories_stale = True
        #: Auto mode: background extraction jobs running, and how to stop listening.
        self.extracting = 0
        self._stop_listening: Callable[[], None] | None = None
        #: Semantic search is off (MEMCHAT_EMBEDDER=none): said once, as a notification.
        self._told_keyword_only = False
        self._told_progress = False
        #: The exit code, while waiting for the background extraction before exiting.
        self.quitting: int | None = None
        self._drain_worker = None
        #: Quit at once and leave the runner in ``leftover_runner`` for the caller to close
        #: after the terminal is back (run_tui); else it is closed (and drained) in the app.
        self.close_after_exit = close_after_exit
        self.leftover_runner: Runner | None = None
        self._exit_asked = False

    def alert(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None:
        """``notify`` for text that is not ours (errors, memories): shown as
        text, never as markup (``memchat[redis]`` stays), on one line, with
        control and escape sequences made visible."""
        self.notify(
            one_line(message), title=one_line(title), severity=severity, timeout=timeout, markup=False
        )

    # -- screens and widgets ----------------------------------------------
    def get_default_screen(self) -> Screen:
        settings = self.settings
        return ChatScreen(
            model=settings.model_label,
            backend=settings.memory,
            user=settings.user,
            streaming=self.streaming,
            cursor_blink=self._cursor_blink,
        )

    @property
    def chat(self) -> ChatScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, ChatScreen)
        return screen

    # -- start-up ----------------------------------------------------------
    def on_mount(self) -> None:
        self.apply_theme()
        self.call_after_refresh(self._after_first_frame)

    def _after_first_frame(self) -> None:
        """The first frame is on screen: now load the heavy parts."""
        self.first_frame_at = time.perf_counter()
        if self._max_live:
            self.chat.chat_log.max_live = self._max_live
        self.connect()

    def connect(self) -> None:
        if self._connecting:
            return
        self._connecting = True
        self.chat.header.status = "connecting"
        self._open_runner()

    async def _open_default_runner(self, settings: Settings) -> Runner:
        return await open_default_runner(settings, progress=self._embedding_progress)

    def _embedding_progress(self, state: EmbeddingState) -> None:
        """Filling in missing vectors on open (called in the opening worker, maybe from a thread)."""
        if state.total > 0:
            self.post_message(EmbeddingProgress(state))

    def on_embedding_progress(self, message: EmbeddingProgress) -> None:
        state = message.state
        if self.runner is not None or not self._connecting:
            return
        self.chat.header.status = "connecting" if state.finished else f"{state.label} {state.percent}%"
        if not self._told_progress:
            self._told_progress = True
            line = state.message().rsplit(" ", 1)[0]  # without the percentage: the header has it
            self.alert(f"{line} The chat is ready when it is done.", title="Memories", timeout=8)

    @work(group="runner", exclusive=True, exit_on_error=False)
    async def _open_runner(self) -> None:
        try:
            runner = await self._runner_factory(self.settings)
        except Exception as exc:
            self.post_message(RunnerFailed(*describe_open_failure(exc)))
            return
        self.post_message(RunnerReady(runner))

    async def on_runner_ready(self, message: RunnerReady) -> None:
        self._connecting = False
        self.runner_error = ""
        runner = self.runner = message.runner
        runner.streaming = self.streaming
        show_session = await self.start_sessions(runner)  # ↑/↓ history; --resume / --session
        header = self.chat.header
        # "offline (no key for gpt-4o)" when a model was asked for without a key.
        header.model = self.settings.model_label if runner.model.name == "offline" else runner.model.name
        header.backend = runner.service.store.name
        header.session = runner.session_id
        header.status = "ready"
        header.auto = runner.auto_extraction
        if runner.auto_extraction and self._stop_listening is None:
            self._stop_listening = runner.add_extraction_listener(self._on_extraction)
        self.sub_title = runner.session_id
        await self.chat.chat_log.add_note(self._banner(runner), "banner")
        if not self._told_keyword_only:
            from memchat.agent.factory import embedder_notice

            notice = embedder_notice(self.settings)
            if notice:
                self._told_keyword_only = True
                self.notify(notice.removeprefix("memchat: "), title="Memory search", timeout=10)
        if self.chat.memory_panel.display:
            self.load_memories()
        await show_session()
        if self._queued is not None:
            text, self._queued = self._queued, None
            await self._start_turn(text)

    async def on_runner_failed(self, message: RunnerFailed) -> None:
        self._connecting = False
        self.runner_error = message.error
        self.chat.header.status = "not installed" if message.missing_package else "down"
        self.alert(message.error, title=f"Cannot open the {self.settings.memory} backend", severity="error")
        fix = (
            "Install it, then restart memchat."
            if message.missing_package
            else "Fix the cause (is the server running? is the address right?), then send your message "
            "again: memchat reconnects."
        )
        text = f"❌ Cannot open the {self.settings.memory} memory backend: {message.error}\n{fix}"
        await self.chat.chat_log.add_note(text, "error")
        if self._queued is not None:
            chat_input = self.chat.chat_input
            if not chat_input.text:
                chat_input.load_text(self._queued)
                chat_input.move_cursor(chat_input.document.end)
            self._queued = None

    def _banner(self, runner: Runner) -> Content:
        from memchat.agent.runner import tool_summary

        enabled, note = tool_summary(runner)
        lines = [
            Content.from_markup("✅ [b]Memory chat ready![/b]  Session: $s", s=runner.session_id),
            Content.from_markup("[$text-muted]Memory service:[/] $d", d=runner.service.store.describe()),
            Content.from_markup("[$text-muted]Available tools:[/] $t", t=enabled),
        ]
        if note:
            lines.append(Content.from_markup("[$text-muted]$n[/]", n=note))
        if runner.auto_extraction:
            from memchat.agent.factory import extraction_summary

            summary = extraction_summary(self.settings) or "🧩 Auto extraction: on (in the background)"
            lines.append(Content(summary))
        if self.settings.offline:
            lines.append(
                Content.from_markup(
                    "ℹ  Offline model ($why): it remembers and recalls what you tell it. "
                    "Set OPENAI_API_KEY (and OPENAI_BASE_URL) for a real model.",
                    why=self.settings.offline_reason,
                )
            )
        lines.append(
            Content.from_markup("[$text-muted]Type a message and press Enter · /help for commands · "
                                "ctrl+b shows your memories[/]")
        )  # fmt: skip
        return Content("\n").join(lines)

    async def on_unmount(self) -> None:
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        runner, self.runner = self.runner, None
        if runner is not None and self.close_after_exit:
            self.leftover_runner = runner
        elif runner is not None:
            with contextlib.suppress(Exception):  # closing must never keep the app from exiting
                await self._runner_closer(runner)

    # -- the message box -----------------------------------------------------
    async def on_chat_input_submitted(self, event: ChatInput.Submitted) -> None:
        event.stop()
        chat_input = event.chat_input
        parsed = parse_command(event.text)
        kind = parsed.kind
        if kind is Command.EMPTY:
            return
        if self.quitting is not None and kind is not Command.EXIT:
            self.notify("Saving memories before quitting (ctrl+q quits without waiting).", severity="warning")
            return
        if kind is Command.MESSAGE and self.busy:
            self.notify("An answer is still being written: press Esc to stop it.", severity="warning")
            return
        if kind is Command.NEW and self.busy:
            self.notify("Stop the answer being written first (Esc).", severity="warning")
            return
        chat_input.accept()
        self.remember_input(event.text)
        if kind is Command.EXIT:
            await self.request_quit(0)
        elif kind is Command.HELP:
            await self.action_help()
        elif kind is Command.STREAM:
            await self.action_toggle_streaming()
        elif kind is Command.MEMORY:
            self.action_toggle_memories()
        elif kind is Command.NEW:
            await self.action_new_session()
        elif kind is Command.SESSIONS:
            self.action_sessions()
        elif kind is Command.EXPORT:
            await self.export_session(parsed.text)
        elif kind is Command.FORGET:
            await self.forget(parsed.text)
        elif kind is Command.UNKNOWN:
            await self.chat.chat_log.add_note(
                f"❓ Unknown command {parsed.text}: type /help for the list", "warn"
            )
        else:
            await self.send(parsed.text)

    async def send(self, text: str) -> None:
        """Show the user's message and run a turn (connecting first if needed)."""
        await self.chat.chat_log.add_user(text)
        if self.runner is None:
            self._queued = text
            self.connect()
            return
        await self._start_turn(text)

    # -- turns -----------------------------------------------------------------
    async def _start_turn(self, text: str) -> None:
        self.turn += 1
        view = await self.chat.chat_log.add_assistant()
        self._views[self.turn] = view
        self._set_busy(True)
        self._turn_worker = self._run_turn(self.turn, text)

    @work(group="turn", exit_on_error=False)
    async def _run_turn(self, turn: int, text: str) -> None:
        """Run one turn, posting its events. Text arriving faster than the
        screen can use is coalesced: at most one text message per
        ``TEXT_FLUSH_INTERVAL`` (a fast model sends thousands of tokens a
        second; one message each would only queue up behind the layout)."""
        from memchat.agent.events import TextDelta

        runner = self.runner
        assert runner is not None
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
                self.post_message(TurnEvent(turn, TextDelta("".join(pending))))
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
                self.post_message(TurnEvent(turn, event))
        except asyncio.CancelledError:
            flush()
            self.post_message(TurnEnded(turn, stopped=True))
            raise
        except Exception as exc:
            flush()
            self.post_message(TurnEnded(turn, error=describe_error(exc)))
            return
        flush()
        self.post_message(TurnEnded(turn))

    @property
    def _shutting_down(self) -> bool:
        """Shutting down: messages from cancelled workers may still arrive (and
        widgets being removed must not be mounted into)."""
        return self._exit_asked or not self.screen_stack or not isinstance(self.screen_stack[0], ChatScreen)

    async def on_turn_event(self, message: TurnEvent) -> None:
        view = self._views.get(message.turn)
        if view is None or self._shutting_down:
            return
        from memchat.agent import events as e  # loaded by the runner already, after the first frame

        event = message.event
        if isinstance(event, e.TextDelta):
            await view.append_text(event.text)
        elif isinstance(event, e.ToolCallsRequested):
            await view.add_tool_calls(event.calls, expanded=self.tools_expanded)
        elif isinstance(event, e.ToolExecuting):
            view.tool_executing(event.call)
        elif isinstance(event, e.ToolFinished):
            view.tool_finished(event.call, event.content, event.is_error, event.elapsed)
            if event.call.name.startswith("memory_"):
                self._memories_changed()
        elif isinstance(event, e.TurnError):
            await view.add_error(event.message)
            self.alert(event.message, title="The turn hit an error", severity="error")
        elif isinstance(event, e.TurnStats):
            await view.set_stats(event)
        elif isinstance(event, e.TurnDone):
            await view.finish()

    async def on_turn_ended(self, message: TurnEnded) -> None:
        if self._shutting_down:
            return
        view = self._views.pop(message.turn, None)
        if view is not None:
            if message.error:
                await view.add_error(message.error)
                self.alert(message.error, title="The turn failed", severity="error")
            await view.finish(stopped=message.stopped)
        if message.turn == self.turn:
            self._turn_worker = None
            self._set_busy(False)

    def _set_busy(self, busy: bool) -> None:
        self.busy = busy
        chat_input = self.chat.chat_input
        if self.quitting is not None:
            self.chat.header.status = "saving"
            chat_input.border_subtitle = "saving memories · ctrl+q again quits without waiting"
        else:
            self.chat.header.status = "thinking" if busy else "ready"
            chat_input.border_subtitle = "esc stops the answer" if busy else ""
        self.refresh_bindings()

    # -- background extraction (auto mode) ---------------------------------------
    def _on_extraction(self, event: object) -> None:
        """The runner's extraction listener (called on the event loop, from the
        extractor's task): hand the event to the app as a message."""
        from memchat.agent.events import ExtractionFinished, ExtractionStarted

        if isinstance(event, ExtractionStarted | ExtractionFinished):
            self.post_message(ExtractionProgress(event))

    async def on_extraction_progress(self, message: ExtractionProgress) -> None:
        from memchat.agent.events import ExtractionFinished, ExtractionStarted

        event = message.event
        if isinstance(event, ExtractionStarted):
            self.extracting += 1
        else:
            self.extracting = max(0, self.extracting - 1)
        if self._shutting_down:
            return
        self.chat.header.extracting = self.extracting
        if not isinstance(event, ExtractionFinished):
            return
        if event.changed:
            self._memories_changed()
        if event.status == "cancelled":  # the app is closing
            return
        if event.ok and not event.changed and not event.skipped and not event.errors:
            return  # nothing to say: the header's indicator went out
        await self.chat.chat_log.add(ExtractionNote(event))

    # -- quitting ----------------------------------------------------------------
    async def action_quit(self) -> None:
        await self.request_quit(0)

    async def request_quit(self, code: int = 0) -> None:
        """Exit; in auto mode first extract what is pending of the conversation
        and wait for it (bounded by the job timeout; the screen stays live).
        Asked again while waiting: exit now, cancelling the extraction."""
        runner = self.runner
        if self.quitting is not None:
            if self._drain_worker is not None:
                self._drain_worker.cancel()
            if runner is not None:
                with contextlib.suppress(Exception):
                    await cancel_extraction(runner)
            self._exit_now(self.quitting)
            return
        if runner is None or not runner.auto_extraction or self.close_after_exit:
            # With close_after_exit, run_tui saves what is pending once the terminal is back.
            self._exit_now(code)
            return
        if self.busy and self._turn_worker is not None:
            self._turn_worker.cancel()
        runner.flush_extraction()
        if not runner.extraction_pending:
            self._exit_now(code)
            return
        self.quitting = code
        self._set_busy(self.busy)
        text = Content.from_markup(
            "💾 [b]Saving memories from this conversation before quitting…[/b]\n"
            "   [$text-muted]ctrl+q again quits without waiting (what is not saved yet is lost)[/]"
        )
        await self.chat.chat_log.add_note(text, "warn")
        self._drain_worker = self._drain_extraction(code)

    @work(group="quit", exclusive=True, exit_on_error=False)
    async def _drain_extraction(self, code: int) -> None:
        runner = self.runner
        finished = True
        if runner is not None:
            finished = await runner.drain_extraction()
            if not finished:  # gave up: do not wait again when the service closes
                with contextlib.suppress(Exception):
                    await cancel_extraction(runner)
        self.post_message(ExtractionDrained(code, finished=finished))

    def on_extraction_drained(self, message: ExtractionDrained) -> None:
        self._exit_now(message.code)

    def _exit_now(self, code: int) -> None:
        """Stop the turn being written (its partial answer is in the history) and exit."""
        self._exit_asked = True
        if self._turn_worker is not None:
            self._turn_worker.cancel()
        self.exit(code)

    # -- actions (keys, commands and the command palette) ------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CHAT_ACTIONS and isinstance(self.screen, ModalScreen):
            return False
        if action in QUITTING_ACTIONS and self.quitting is not None:
            return False
        if action == "stop":
            return self.busy
        return True

    def action_stop(self) -> None:
        """Stop the running turn: the partial answer stays, marked stopped."""
        if self.busy and self._turn_worker is not None:
            self._turn_worker.cancel()

    async def action_new_session(self) -> None:
        if self.busy:
            self.notify("Stop the answer being written first (Esc).", severity="warning")
            return
        if self.runner is None:
            self.notify("Not connected to the memory backend yet.", severity="warning")
            return
        previous, current = self.runner.new_session()
        self.chat.header.session = current
        self.sub_title = current
        text = Content.from_markup(
            "🆕 [b]Started new memory session![/b]\n"
            "   Previous: $previous\n   Current:  $current\n"
            "   [$text-muted](Conversation history has been reset, memories are preserved)[/]",
            previous=previous,
            current=current,
        )
        await self.chat.chat_log.add_note(text, "session")

    def action_toggle_memories(self) -> None:
        panel = self.chat.memory_panel
        panel.display = not panel.display
        if panel.display:
            self.load_memories()
            panel.focus_filter()
        else:
            self.action_focus_input()

    async def action_help(self) -> None:
        lines = [Content.from_markup("💡 [b]Special commands[/b]")]
        width = max(map(len, COMMAND_HELP))
        for name in COMMAND_HELP:
            lines.append(
                Content.from_markup(
                    "   [b $accent]$name[/]$what  [$text-muted]($key)[/]",
                    name=name.ljust(width + 2),
                    what=COMMAND_HELP[name],
                    key=COMMAND_KEYS[name],
                )
            )
        lines.append(
            Content.from_markup(
                "[$text-muted]Keys: Enter send · ctrl+j new line · ↑/↓ history · Tab completes a command · "
                "Esc stops an answer · PgUp/PgDn scroll the conversation (ctrl+Home/ctrl+End: top, end) · "
                "ctrl+o opens or folds all tool calls (Enter or a click: one) · "
                "ctrl+y copies the selected (click it) or last answer · ctrl+p command palette[/]"
            )
        )
        await self.chat.chat_log.add_note(Content("\n").join(lines), "help")

    def action_focus_input(self) -> None:
        self.chat.chat_input.focus()

    def action_copy_message(self) -> None:
        message: ChatMessage | None = None
        node = self.focused
        while node is not None:
            if isinstance(node, ChatMessage):
                message = node
                break
            node = node.parent
        if message is None:
            chat_log = self.chat.chat_log
            message = chat_log.last_assistant() or next(reversed(chat_log.messages), None)
        text = message.copy_text() if message is not None else ""
        if not text:
            self.notify("Nothing to copy yet.", severity="warning")
            return
        self.copy_to_clipboard(text)
        problem = clipboard_problem()
        if problem:
            self.alert(
                f"This terminal cannot copy: {problem}. To copy anyway, hold Shift (Option on macOS) "
                "and select the text with the mouse.",
                title="Copy",
                severity="warning",
                timeout=10,
            )
        else:
            self.notify(f"Copied {len(text)} characters.", title="Copy")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield SystemCommand(
            "New session",
            "Start a new conversation; memories are kept (/new, ctrl+n)",
            self.action_new_session,
        )
        yield SystemCommand(
            "Sessions",
            "Saved conversations: open, rename, delete, search (/sessions, f2)",
            self.action_sessions,
        )
        yield SystemCommand(
            "Export conversation",
            "Save this session as Markdown in the current folder (/export)",
            self.action_export,
        )
        yield SystemCommand(
            "Memory panel", "Show or hide your memories (/memory, ctrl+b)", self.action_toggle_memories
        )
        yield SystemCommand(
            "Toggle streaming",
            "Stream answers token by token, or show them whole (/stream, ctrl+t)",
            self.action_toggle_streaming,
        )
        yield SystemCommand(
            "Tool panels", "Open or fold every tool-call panel (ctrl+o)", self.action_toggle_tool_panels
        )
        if self.busy:
            yield SystemCommand("Stop the answer", "Stop the turn being written (Esc)", self.action_stop)
        yield SystemCommand(
            "Copy message", "Copy the selected or the last answer (ctrl+y)", self.action_copy_message
        )
        yield SystemCommand(
            "Refresh memories", "Read the memories again (f5 in the panel)", self.action_refresh_memories
        )
        yield SystemCommand("Help", "Show commands and keys (/help, f1)", self.action_help)
        if self.runner is None:
            yield SystemCommand("Reconnect", "Open the memory backend again", self.connect)
        yield from super().get_system_commands(screen)  # fmt: skip
