"""The Textual TUI. ``run_tui`` imports Textual only when called, so
``memchat --help`` and the console never pay for it."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memchat.settings import Settings


def run_tui(settings: Settings, *, end_process: bool = True) -> int:
    """Run the chat until the user quits; the exit code.

    Quitting gives the terminal back at once: the app hands its runner over,
    and what is left to do — saving the memories of the conversation in auto
    mode, closing the backend — is finished after the screen is restored, with
    a visible note (ctrl+c skips it).

    With ``end_process`` (the ``memchat`` command) the process then ends at
    once: Python's own teardown of the embedding runtime, the drivers and
    thousands of modules would add half a second or more to every quit."""
    import asyncio

    from .app import MemchatApp

    app = MemchatApp(settings, close_after_exit=True)

    async def session() -> object:
        result = await app.run_async()
        if app.leftover_runner is not None:
            from .closing import finish_after_exit

            await finish_after_exit(app.leftover_runner)
        return result

    try:
        result = asyncio.run(session())
    except KeyboardInterrupt:
        print("⏭  Skipped: memories not saved yet are lost.", flush=True)
        result = app.return_code
    code = result if isinstance(result, int) else (app.return_code or 0)
    if end_process:
        end_now(code)
    return code


def end_now(code: int) -> None:
    """Flush what was written, then end the process without the interpreter's teardown."""
    import logging
    import os
    import sys

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
