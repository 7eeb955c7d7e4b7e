"""Line-mode chat for pipes, scripts and plain terminals (no TUI).

It prints what the reference example prints (the seed's demo transcript):
banner, 🔧 tool calls with ID and Args, 🔄 executing, ✅ tool responses and
the streamed answer, so ``printf 'I like Go\\n/new\\nWhat do I like?\\n/exit\\n' |
memchat --plain`` gives a readable transcript.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from .agent.commands import COMMANDS, Command, parse_command
from .agent.events import TextDelta, ToolCallsRequested, ToolFinished, TurnDone, TurnError
from .agent.runner import Runner, tool_summary

RULE = "=" * 50


def banner(runner: Runner, *, offline_reason: str = "") -> list[str]:
    enabled, disabled_note = tool_summary(runner)
    lines = [
        "🧠 Simple Memory Chat",
        f"Model: {runner.model.name}",
        f"Memory Service: {runner.service.store.name}",
        runner.service.store.describe(),
        f"Streaming: {'true' if runner.streaming else 'false'}",
        f"Available tools: {enabled}",
    ]
    if disabled_note:
        lines.append(disabled_note)
    if offline_reason:
        lines.append(
            f"ℹ️  Offline model ({offline_reason}): it remembers and recalls what you tell it. "
            "Set OPENAI_API_KEY (and OPENAI_BASE_URL) for a real model."
        )
    lines += [
        RULE,
        f"✅ Memory chat ready! Session: {runner.session_id}",
        "",
        *command_help(),
        "",
    ]
    return lines


def command_help() -> list[str]:
    return ["💡 Special commands:", *(f"   {name:<9} - {what}" for name, what in COMMANDS.items())]


class Console:
    def __init__(self, runner: Runner, out: TextIO, *, echo_input: bool, offline_reason: str = "") -> None:
        self.runner = runner
        self.out = out
        self.echo_input = echo_input
        self.offline_reason = offline_reason

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def render_turn(self, text: str) -> None:
        self.write("🤖 Assistant: ")
        at_line_start = False  # the prefix is on the line
        printed_text = False
        async for event in self.runner.run(text):
            if isinstance(event, TextDelta):
                self.write(event.text)
                printed_text = True
                at_line_start = event.text.endswith("\n")
            elif isinstance(event, ToolCallsRequested):
                if not at_line_start:
                    self.write("\n")
                self.write("🔧 Memory tool calls initiated:\n")
                for call in event.calls:
                    self.write(f"   • {call.name} (ID: {call.id})\n")
                    if call.arguments.strip():
                        self.write(f"     Args: {call.arguments}\n")
                self.write("\n🔄 Executing memory tools...\n")
                at_line_start = True
            elif isinstance(event, ToolFinished):
                mark, label = (
                    ("❌", "Memory tool error") if event.is_error else ("✅", "Memory tool response")
                )
                self.write(f"{mark} {label} (ID: {event.call.id}): {event.content.strip()}\n")
                at_line_start = True
            elif isinstance(event, TurnError):
                self.write(f"\n❌ Error: {event.message}\n")
                at_line_start = True
            elif isinstance(event, TurnDone) and (not at_line_start or not printed_text):
                self.write("\n")
        self.write("\n")

    async def handle(self, line: str) -> bool:
        """Handle one input line; False means quit."""
        command = parse_command(line)
        if command.kind is Command.EMPTY:
            return True
        if command.kind is Command.EXIT:
            self.write("👋 Goodbye!\n")
            return False
        if command.kind is Command.NEW:
            previous, current = self.runner.new_session()
            self.write(
                "🆕 Started new memory session!\n"
                f"   Previous: {previous}\n"
                f"   Current:  {current}\n"
                "   (Conversation history has been reset, memories are preserved)\n\n"
            )
            return True
        if command.kind is Command.HELP:
            self.write("\n".join(command_help()) + "\n\n")
            return True
        if command.kind is Command.STREAM:
            self.runner.streaming = not self.runner.streaming
            self.write(f"🔁 Streaming: {'true' if self.runner.streaming else 'false'}\n\n")
            return True
        if command.kind is Command.UNKNOWN:
            self.write(f"❓ Unknown command {command.text}: type /help for the list\n\n")
            return True
        # MESSAGE, and MEMORY (rewritten into a message as the reference does).
        await self.render_turn(command.text)
        return True

    async def run(self, stdin: TextIO) -> int:
        self.write("\n".join(banner(self.runner, offline_reason=self.offline_reason)) + "\n")
        while True:
            self.write("👤 You: ")
            line = await asyncio.to_thread(stdin.readline)
            if not line:  # end of input
                self.write("\n👋 Goodbye!\n")
                return 0
            if self.echo_input:
                self.write(line if line.endswith("\n") else line + "\n")
            try:
                if not await self.handle(line):
                    return 0
            except KeyboardInterrupt:
                self.write("\n⏹️  Stopped.\n\n")


async def run_console(settings, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Open the chat described by ``settings`` and run it until /exit or EOF."""
    from .agent.factory import close_runner, open_runner

    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    runner = await open_runner(settings)
    try:
        console = Console(
            runner,
            stdout,
            echo_input=not stdin.isatty(),
            offline_reason=settings.offline_reason if settings.offline else "",
        )
        return await console.run(stdin)
    finally:
        await close_runner(runner)
