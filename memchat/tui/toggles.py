"""Run-time choices in the TUI — streaming, tool panels open or folded, the
theme — and remembering them in the user's config file for the next start.

A mixin of :class:`~memchat.tui.app.MemchatApp`. Writing the file runs in a
thread worker; a failure is said once and never stops the chat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from .host import AppHost

if TYPE_CHECKING:
    pass


class Toggles(AppHost):
    """Mixed into MemchatApp (what it uses of the app: host.AppHost)."""

    def apply_theme(self) -> None:
        """The remembered theme (an unknown name is said and ignored)."""
        name = self.settings.theme
        if not name or name == self.theme:
            return
        if name in self.available_themes:
            self.theme = name
        else:
            self.notify(
                f"Theme {name!r} is unknown: using the default (ctrl+p → “Change theme” lists them).",
                title="Theme",
                severity="warning",
            )

    def watch_theme(self, theme: str) -> None:
        if theme != (self.settings.theme or "textual-dark") and self.is_running:
            self.remember(theme=theme)

    async def action_toggle_streaming(self) -> None:
        self.streaming = not self.streaming
        if self.runner is not None:
            self.runner.streaming = self.streaming
        self.chat.header.streaming = self.streaming
        text = (
            "🔁 Streaming on: answers appear token by token."
            if self.streaming
            else "🔁 Streaming off: answers appear whole when ready."
        )
        await self.chat.chat_log.add_note(text, "info")
        self.remember(streaming=self.streaming)

    def action_toggle_tool_panels(self) -> None:
        """Open every tool-call panel, or fold them all to one line each."""
        from .widgets.tool_panel import ToolCallPanel

        self.tools_expanded = not self.tools_expanded
        for panel in self.chat.chat_log.query(ToolCallPanel):
            panel.collapsed = not self.tools_expanded
        self.notify(
            "Tool calls: all open (ctrl+o folds them)." if self.tools_expanded
            else "Tool calls: one line each (Enter or a click opens one; ctrl+o opens all).",
            title="Tool panels",
            timeout=3,
        )  # fmt: skip
        self.remember(tool_panels="expanded" if self.tools_expanded else "compact")

    def remember(self, **choices: bool | str) -> None:
        """Save run-time choices (settings by name) in the config file the settings
        came from (or the user's), under each setting's declared config key."""
        from memchat.settings import SPECS

        if self.settings.preferences_file:
            values: dict[tuple[str, str], bool | str] = {}
            for name, value in choices.items():
                key = SPECS[name].config
                assert key is not None, f"{name} has no config key to be remembered under"
                values[key] = value
            self._save_preferences(self.settings.preferences_file, values)

    @work(thread=True, group="preferences", exit_on_error=False)
    def _save_preferences(self, path: str, values: dict[tuple[str, str], bool | str]) -> None:
        from memchat.preferences import save_preferences

        try:
            save_preferences(path, values)
        except OSError as exc:
            if not self._told_preferences:
                self._told_preferences = True
                self.call_from_thread(
                    self.notify,
                    f"Cannot remember this for the next start: {path}: {exc.strerror}.",
                    title="Settings",
                    severity="warning",
                )
