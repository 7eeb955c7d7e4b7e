"""The Textual TUI. ``run_tui`` imports Textual only when called, so
``memchat --help`` and the console never pay for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memchat.settings import Settings


def run_tui(settings: Settings) -> int:
    """Run the chat until the user quits; the exit code."""
    from .app import MemchatApp

    app = MemchatApp(settings)
    code = app.run()
    return code if isinstance(code, int) else (app.return_code or 0)
