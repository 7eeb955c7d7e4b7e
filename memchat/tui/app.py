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

Keys, slash commands and the command palette come from one registry
(memchat.agent.commands.ACTIONS, shown by actions.py): each entry runs the
app's ``action_<name>``. The memory panel's work is in memory_actions.py,
saved sessions in sessions.py, run-time toggles in toggles.py, running a turn
in turns.py. The app reaches the memories only through ``runner.memory``.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.content import Content
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen

from memchat.agent.commands import ACTIONS, Action, Command, parse_command
from memchat.safe_text import one_line

from . import gc_pause
from .actions import CHAT_ACTIONS, QUITTING_ACTIONS, help_note, key_bindings, palette_help
from .banner import ready_banner
from .memory_actions import MemoryActions
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
    clipboard_problem,
    close_default_runner,
    describe_open_failure,
    open_default_runner,
)
from .sessions import SessionActions
from .toggles import Toggles
from .turns import post_turn
from .widgets.chat_input import ChatInput
from .widgets.message import AssistantMessage, ChatMessage, ExtractionNote

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.worker import Worker

    from memchat.agent.runner import Runner
    from memchat.engine.vectors import EmbeddingProgress as EmbeddingState
    from memchat.engine.vectors import IndexingProgress as IndexingState
    from memchat.settings import Settings


class MemchatApp(SessionActions, MemoryActions, Toggles, App[int]):
    #: Absolute, so that subclasses defined elsewhere (tests, benchmarks) find it.
    CSS_PATH = Path(__file__).parent / "memchat.tcss"
    TITLE = "memchat"

    #: Every action with a key (memchat.agent.commands.ACTIONS).
    BINDINGS: ClassVar[list[BindingType]] = key_bindings()

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
        self._turn_worker: Worker[None] | None = None
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
        self._drain_worker: Worker[None] | None = None
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

    def _embedding_progress(self, state: EmbeddingState | IndexingState) -> None:
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
        header.backend = runner.memory.backend
        header.session = runner.session_id
        header.status = "ready"
        header.auto = runner.auto_extraction
        if runner.auto_extraction and self._stop_listening is None:
            self._stop_listening = runner.add_extraction_listener(self._on_extraction)
        self.sub_title = runner.session_id
        await self.chat.chat_log.add_note(ready_banner(runner, self.settings), "banner")
        if not self._told_keyword_only:
            from memchat.agent.factory import embedder_notice

            notice = embedder_notice(self.settings)
            if notice:
                self._told_keyword_only = True
                self.notify(notice.removeprefix("memchat: "), title="Memory search", timeout=10)
        if self.chat.memory_panel_shown:
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

    async def on_unmount(self) -> None:
        gc_pause.end()
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
        action = parsed.action
        if action is not None:  # /memory opens the panel here, where the console asks the model
            await self._run_command(action, parsed.text)
        elif kind is Command.UNKNOWN:
            await self.chat.chat_log.add_note(
                f"❓ Unknown command {parsed.text}: type /help for the list", "warn"
            )
        else:
            await self.send(parsed.text)

    async def _run_command(self, action: Action, argument: str) -> None:
        """A slash command runs its registry entry's ``action_<action>``."""
        method = getattr(self, f"action_{action.action}")
        done = method(argument) if action.takes_argument else method()
        if inspect.isawaitable(done):
            await done

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
        """Run one turn; its events come back as messages (on_turn_event, on_turn_ended)."""
        assert self.runner is not None
        await post_turn(self.runner, turn, text, self.post_message)

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
                    await runner.memory.cancel_extraction()
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
                    await runner.memory.cancel_extraction()
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
    def _offered(self, action: Action) -> bool:
        """In the command palette now: Stop while an answer is written, Reconnect when not connected."""
        if action.action == "stop":
            return self.busy
        if action.action == "reconnect":
            return self.runner is None
        return True

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

    async def action_toggle_memories(self) -> None:
        chat = self.chat
        if chat.memory_panel_shown:
            chat.memory_panel.display = False
            self.action_focus_input()
            return
        panel = await chat.show_memory_panel()
        self.load_memories()
        panel.focus_filter()

    async def action_help(self) -> None:
        await self.chat.chat_log.add_note(help_note(), "help")

    def action_reconnect(self) -> None:
        self.connect()

    def action_focus_input(self) -> None:
        self.chat.chat_input.focus()

    def action_copy_message(self) -> None:
        message: ChatMessage | None = None
        node: DOMNode | None = self.focused
        while node is not None:
            if isinstance(node, ChatMessage):
                message = node
                break
            node = node.parent
        if message is None:
            chat_log = self.chat.chat_log
            last = next(reversed(chat_log.messages), None)
            message = chat_log.last_assistant() or (last if isinstance(last, ChatMessage) else None)
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
        for action in ACTIONS:
            if not action.builtin_palette and self._offered(action):
                yield SystemCommand(
                    action.title, palette_help(action), getattr(self, f"action_{action.action}")
                )
        yield from super().get_system_commands(screen)
