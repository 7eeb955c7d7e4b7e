"""What is left to do once the TUI has given the terminal back: in auto mode
the memories of the conversation are extracted (bounded by the job timeout,
said in the terminal), then the model and the backend are closed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from memchat.agent.events import ExtractionFinished
from memchat.safe_text import one_line

if TYPE_CHECKING:
    from memchat.agent.runner import Runner


async def finish_after_exit(runner: Runner, out: TextIO | None = None) -> None:
    """Close ``runner``; when background extraction is pending, say so and what it saved."""
    from .services import close_default_runner

    out = out or sys.stdout
    runner.flush_extraction()
    pending = runner.auto_extraction and runner.extraction_pending > 0
    changes: list[str] = []
    stop_listening = None
    if pending:
        out.write("💾 Saving memories from this conversation… (ctrl+c skips)\n")
        out.flush()

        def listen(event: object) -> None:
            if isinstance(event, ExtractionFinished) and (event.changed or not event.ok):
                changes.append(one_line(event.summary()) if event.ok else f"failed ({event.status})")

        stop_listening = runner.add_extraction_listener(listen)
    try:
        await close_default_runner(runner)
    except Exception as exc:  # the chat is over: say it, never raise into the shell
        out.write(f"❌ Closing the memory backend failed: {one_line(str(exc)) or type(exc).__name__}\n")
    finally:
        if stop_listening is not None:
            stop_listening()
    if pending:
        out.write(f"✅ Memories saved{': ' + '; '.join(changes) if changes else ' (nothing new)'}.\n")
        out.flush()
