"""Line-mode chat for pipes, scripts and plain terminals (no TUI).

It prints what the reference example prints (the seed's demo transcript):
banner, 🔧 tool calls with ID and Args, 🔄 executing, ✅ tool responses and
the streamed answer, so ``printf 'I like Go\\n/new\\nWhat do I like?\\n/exit\\n' |
memchat --plain`` gives a readable transcript.

Everything shown that a model or a person wrote (answers, tool arguments and
results, memories, echoed input) goes through :func:`printable`: no control or
escape sequence reaches the terminal. Input that is not UTF-8 is decoded with
U+FFFD for the bad bytes, so the chat goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TextIO

from .agent.commands import Command, console_help, parse_command
from .agent.events import (
    ExtractionFinished,
    TextDelta,
    ToolCallsRequested,
    ToolFinished,
    TurnDone,
    TurnError,
)
from .agent.runner import Runner, tool_summary
from .safe_text import one_line, printable

if TYPE_CHECKING:
    from memchat.engine.vectors import EmbeddingProgress, IndexingProgress

    from .agent.sessions import Resumed

RULE = "=" * 50


def extraction_lines(event: ExtractionFinished) -> list[str]:
    """What a finished background extraction changed, for line mode ([] when nothing happened)."""
    if event.status == "cancelled":
        return []
    if event.status != "ok":
        what = "timed out" if event.status == "timeout" else "failed"
        reason = f": {one_line(event.errors[-1])}" if event.errors else ""
        return [f"🧩 Background extraction {what}{reason} (the messages are kept for the next try)"]
    if not event.changed and not event.skipped and not event.errors:
        return []
    notes = []
    if event.skipped:
        notes.append(
            f"{len(event.skipped)} invalid operation{'s' if len(event.skipped) != 1 else ''} skipped"
        )
    if event.errors:
        notes.append(f"{len(event.errors)} failed")
    lines = [f"🧩 Background extraction: {event.summary()}" + (f" ({', '.join(notes)})" if notes else "")]
    lines += [f"   + {one_line(entry.memory.text)}" for entry in event.added]
    for before, after in event.updated:
        was = (
            f"  (was: {one_line(before.memory.text)})"
            if before is not None and before.memory.text != after.memory.text
            else ""
        )
        lines.append(f"   ~ {one_line(after.memory.text)}{was}")
    lines += [f"   - {one_line(entry.memory.text)}" for entry in event.deleted]
    return lines


def banner(runner: Runner, *, offline_reason: str = "", extraction: str = "") -> list[str]:
    enabled, disabled_note = tool_summary(runner)
    lines = [
        "🧠 Simple Memory Chat",
        f"Model: {runner.model.name}",
        f"Memory Service: {runner.memory.backend}",
        runner.memory.describe(),
        f"Streaming: {'true' if runner.streaming else 'false'}",
        f"Available tools: {enabled}",
    ]
    if disabled_note:
        lines.append(disabled_note)
    if extraction:
        lines.append(extraction)
    if offline_reason:
        lines.append(
            f"ℹ️  Offline model ({offline_reason}): it remembers and recalls what you tell it. "
            "Set OPENAI_API_KEY (and OPENAI_BASE_URL) for a real model."
        )
    lines += [
        RULE,
        f"✅ Memory chat ready! Session: {runner.session_id}",
        "",
        *console_help(),
        "",
    ]
    return lines


def tool_calls_text(event: ToolCallsRequested) -> str:
    """The 🔧 block of the reference's transcript for one round of tool calls."""
    lines = ["🔧 Memory tool calls initiated:"]
    for call in event.calls:
        lines.append(f"   • {one_line(call.name)} (ID: {one_line(call.id)})")
        if call.arguments.strip():
            lines.append(f"     Args: {printable(call.arguments)}")
    return "\n".join(lines) + "\n\n🔄 Executing memory tools...\n"


def tool_result_text(event: ToolFinished) -> str:
    mark, label = ("❌", "Memory tool error") if event.is_error else ("✅", "Memory tool response")
    return f"{mark} {label} (ID: {one_line(event.call.id)}): {printable(event.content.strip())}\n"


class Console:
    def __init__(
        self, runner: Runner, out: TextIO, *, echo_input: bool, offline_reason: str = "", extraction: str = ""
    ) -> None:
        self.runner = runner
        self.out = out
        self.echo_input = echo_input
        self.offline_reason = offline_reason
        self.extraction = extraction
        #: Background-extraction lines that arrived during a turn, printed after it.
        self._notes: list[str] = []
        self._in_turn = False
        self._at_prompt = False
        runner.add_extraction_listener(self._on_extraction)

    def _on_extraction(self, event: object) -> None:
        if not isinstance(event, ExtractionFinished):
            return
        lines = extraction_lines(event)
        if not lines:
            return
        if self._in_turn or not self._at_prompt or self.echo_input:
            # Mid-turn, or piped input (the next line is already on its way): print at the next pause.
            self._notes += lines
            return
        # Idle at an interactive prompt: print now and prompt again.
        self.write("\n" + "\n".join(lines) + "\n\n👤 You: ")

    def _print_notes(self) -> None:
        if self._notes:
            lines, self._notes = self._notes, []
            self.write("\n".join(lines) + "\n\n")

    async def finish_extraction(self) -> None:
        """At the end of the chat: extract what is pending, wait (bounded) and show it."""
        if not self.runner.auto_extraction:
            return
        self.runner.flush_extraction()
        if self.runner.extraction_pending:
            self.write("⏳ Saving memories from this conversation...\n")
            if not await self.runner.drain_extraction():
                self.write("⚠️  Background extraction did not finish in time; it is cancelled.\n")
        self._print_notes()

    async def show_memories(self) -> None:
        """/memory in auto mode: list the stored memories directly (the agent cannot load them)."""
        entries = await self.runner.memory.read(100)
        if not entries:
            self.write(
                "📭 No memories stored yet. (Auto extraction runs in the background after each turn.)\n\n"
            )
            return
        self.write(f"📚 Stored memories ({len(entries)}):\n")
        for i, entry in enumerate(entries, start=1):
            self.write(f"   {i}. [{entry.id[:12]}] {one_line(entry.memory.text)}\n")
        self.write("\n")

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def render_turn(self, text: str) -> None:
        self._in_turn = True
        try:
            await self._render_turn(text)
        finally:
            self._in_turn = False
        self._print_notes()

    async def _render_turn(self, text: str) -> None:
        self.write("🤖 Assistant: ")
        at_line_start = False  # the prefix is on the line
        printed_text = False
        async for event in self.runner.run(text):
            if isinstance(event, TextDelta):
                self.write(printable(event.text))
                printed_text = True
                at_line_start = event.text.endswith("\n")
            elif isinstance(event, ToolCallsRequested):
                if not at_line_start:
                    self.write("\n")
                self.write(tool_calls_text(event))
                at_line_start = True
            elif isinstance(event, ToolFinished):
                self.write(tool_result_text(event))
                at_line_start = True
            elif isinstance(event, TurnError):
                self.write(f"\n❌ Error: {printable(event.message)}\n")
                at_line_start = True
            elif isinstance(event, TurnDone) and (not at_line_start or not printed_text):
                self.write("\n")
        self.write("\n")

    async def handle(self, line: str) -> bool:
        """Handle one input line; False means quit."""
        command = parse_command(line)
        if command.kind is Command.EMPTY:
            return True
        if command.kind is Command.UNKNOWN:
            self.write(f"❓ Unknown command {one_line(command.text)}: type /help for the list\n\n")
            return True
        action = command.action
        if action is None:  # a message
            await self.render_turn(command.text)
            return True
        # A slash command runs its registry entry's ``command_<action>`` (memchat.agent.commands).
        handler: Callable[[str], Awaitable[bool]] = getattr(self, f"command_{action.action}")
        return await handler(command.text)

    # -- the slash commands (each gets the command's argument; False means quit) --------
    async def command_quit(self, argument: str) -> bool:
        await self.finish_extraction()
        self.write("👋 Goodbye!\n")
        return False

    async def command_new_session(self, argument: str) -> bool:
        previous, current = self.runner.new_session()
        self.write(
            "🆕 Started new memory session!\n"
            f"   Previous: {previous}\n"
            f"   Current:  {current}\n"
            "   (Conversation history has been reset, memories are preserved)\n\n"
        )
        return True

    async def command_help(self, argument: str) -> bool:
        self.write("\n".join(console_help()) + "\n\n")
        return True

    async def command_toggle_streaming(self, argument: str) -> bool:
        self.runner.streaming = not self.runner.streaming
        self.write(f"🔁 Streaming: {'true' if self.runner.streaming else 'false'}\n\n")
        return True

    async def command_sessions(self, argument: str) -> bool:
        from .sessions_text import session_lines

        self.write("\n".join(await session_lines(self.runner)) + "\n\n")
        return True

    async def command_export(self, argument: str) -> bool:
        from .sessions_text import export_current

        self.write(await export_current(self.runner, argument) + "\n\n")
        return True

    async def command_forget(self, argument: str) -> bool:
        self.write(
            "🗑  /forget asks before deleting, which a line-mode chat cannot do safely: find the memory "
            "with `memchat memory search TEXT`, then `memchat memory delete ID` (or use the TUI).\n\n"
        )
        return True

    async def command_toggle_memories(self, prompt: str) -> bool:
        """/memory: in auto mode the stored memories, else ``prompt`` sent to the model (as the
        reference does)."""
        if self.runner.auto_extraction:
            await self.show_memories()
        else:
            await self.render_turn(prompt)
        return True

    async def run(self, stdin: TextIO, resumed: Resumed | None = None) -> int:
        lines = banner(self.runner, offline_reason=self.offline_reason, extraction=self.extraction)
        if resumed is not None:
            from .sessions_text import resumed_lines

            lines += [*resumed_lines(resumed), ""]
        self.write("\n".join(lines) + "\n")
        while True:
            self._print_notes()
            self.write("👤 You: ")
            self._at_prompt = True
            try:
                line = await asyncio.to_thread(stdin.readline)
            finally:
                self._at_prompt = False
            if not line:  # end of input
                self.write("\n")
                await self.finish_extraction()
                self.write("👋 Goodbye!\n")
                return 0
            line = _UNDECODED.sub("\ufffd", line)  # bytes that were not UTF-8 (surrogate escapes)
            if self.echo_input:
                self.write(printable(line.removesuffix("\n").removesuffix("\r")) + "\n")
            try:
                if not await self.handle(line):
                    return 0
            except KeyboardInterrupt:
                self.write("\n⏹️  Stopped.\n\n")


#: Lone surrogates: what undecodable input bytes become under ``surrogateescape``.
_UNDECODED = re.compile("[\ud800-\udfff]")


def tolerate_bad_input(stdin: TextIO) -> None:
    """Decode input that is not UTF-8 with U+FFFD for the bad bytes instead of
    failing (a strict stream) or passing surrogate escapes on."""
    reconfigure = getattr(stdin, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError, TypeError):
            reconfigure(errors="replace")


class ProgressPrinter:
    """The ``progress`` hook for filling in missing vectors on open: the line
    "Embedding 1,234 memories for semantic search… 40%" on ``stream`` (stderr),
    rewritten in place on a terminal, else printed when it starts and when it
    ends. Nothing for 0 memories. Safe to call from a worker thread."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        try:
            self.live = stream.isatty()
        except (AttributeError, ValueError):
            self.live = False
        self._last = -1

    def __call__(self, state: EmbeddingProgress | IndexingProgress) -> None:
        if state.total <= 0 or state.percent == self._last:
            return
        line = printable(state.message())
        if self.live:
            self.stream.write("\r" + line + ("\n" if state.finished else ""))
        elif self._last < 0 or state.finished:
            self.stream.write(line + "\n")
        self._last = state.percent
        with contextlib.suppress(ValueError, OSError):
            self.stream.flush()


async def run_console(
    settings, stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Open the chat described by ``settings`` and run it until /exit or EOF.
    Notices (semantic search off, vectors being filled in) go to ``stderr``."""
    from .agent.factory import close_runner, embedder_notice, extraction_summary, open_runner

    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    tolerate_bad_input(stdin)
    notice = embedder_notice(settings)
    if notice:
        stderr.write(notice + "\n")
        stderr.flush()
    runner = await open_runner(settings, progress=ProgressPrinter(stderr))
    try:
        from .agent.sessions import start

        resumed = await start(runner, settings)  # --resume / --session
        if settings.resume and resumed is None:
            stderr.write("memchat: there is no saved session to continue yet: starting a new one\n")
        console = Console(
            runner,
            stdout,
            echo_input=not stdin.isatty(),
            offline_reason=settings.offline_reason if settings.offline else "",
            extraction=extraction_summary(settings),
        )
        return await console.run(stdin, resumed)
    finally:
        await close_runner(runner)


async def ask(settings, question: str, *, stdout: TextIO, stderr: TextIO, verbose: bool = False) -> int:
    """One question, one answer (``memchat ask``): the same runner, memory and
    tools as the chat, but only the answer goes to ``stdout``. The text a model
    writes before calling tools, the tool traffic and the banner go to
    ``stderr`` with ``verbose``, and nowhere otherwise. 0, or 1 when the turn
    hit an error (said on stderr)."""
    from .agent.factory import close_runner, embedder_notice, extraction_summary, open_runner

    notice = embedder_notice(settings)
    if notice:
        stderr.write(notice + "\n")
    runner = await open_runner(settings, progress=ProgressPrinter(stderr))
    # The answer is printed whole once its round ends (the text of a round that calls
    # tools is not the answer), so pacing a stream would only make it slower.
    runner.streaming = False
    trace = stderr if verbose else None
    failed = False
    try:
        if trace:
            offline = settings.offline_reason if settings.offline else ""
            lines = banner(runner, offline_reason=offline, extraction=extraction_summary(settings))
            trace.write("\n".join(lines[: lines.index(RULE)]) + "\n")
        answer: list[str] = []
        async for event in runner.run(question):
            if isinstance(event, TextDelta):
                answer.append(event.text)
            elif isinstance(event, ToolCallsRequested):
                if trace:
                    said = "".join(answer).strip()
                    trace.write((f"🤖 {printable(said)}\n" if said else "") + tool_calls_text(event))
                answer.clear()
            elif isinstance(event, ToolFinished) and trace:
                trace.write(tool_result_text(event))
            elif isinstance(event, TurnError):
                failed = True
                stderr.write(f"memchat: {one_line(event.message)}\n")
        text = printable("".join(answer).strip("\n"))
        if text:
            stdout.write(text + "\n")
            stdout.flush()
        return 1 if failed else 0
    finally:
        await close_runner(runner)
