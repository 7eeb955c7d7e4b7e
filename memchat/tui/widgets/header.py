"""The one-line header: model, memory backend, session, streaming, user, status
and, in auto mode, the background extraction ("🧩 auto" / "🧩 extracting…")."""

from __future__ import annotations

from typing import ClassVar

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from memchat.safe_text import one_line


class MemchatHeader(Widget):
    """Shows what the chat runs on. The app sets the reactives; nothing else."""

    model: reactive[str] = reactive("")
    backend: reactive[str] = reactive("")
    session: reactive[str] = reactive("")
    streaming: reactive[bool] = reactive(True)
    user: reactive[str] = reactive("")
    #: connecting | embedding N% | ready | thinking | down | not installed | saving
    status: reactive[str] = reactive("connecting")
    #: Auto mode: memories are extracted in the background.
    auto: reactive[bool] = reactive(False)
    #: Background extraction jobs running now.
    extracting: reactive[int] = reactive(0)

    STATUS: ClassVar[dict[str, tuple[str, str]]] = {
        "connecting": ("◌ connecting", "$warning"),
        "ready": ("● ready", "$success"),
        "thinking": ("● answering", "$accent"),
        "down": ("● backend down", "$error"),
        "not installed": ("● driver not installed", "$error"),
        "saving": ("◌ saving memories…", "$warning"),
    }

    def _status(self) -> tuple[str, str]:
        if self.status.startswith("embedding"):  # "embedding 40%": filling in missing vectors
            return f"◌ {self.status}", "$warning"
        return self.STATUS.get(self.status, (self.status, "$foreground"))

    def _extraction(self) -> list[Content | str | tuple[str, str]]:
        if self.extracting:
            return ["  ", ("🧩 extracting…", "$warning")]
        if self.auto:
            return ["  ", ("🧩 auto", "$text-muted")]
        return []

    def render(self) -> Content:
        """Labelled fields when they fit; bare values on narrow terminals."""
        label, colour = self._status()
        fields = [
            ("model", one_line(self.model)),
            ("memory", one_line(self.backend)),
            ("session", one_line(self.session)),
            ("streaming", "on" if self.streaming else "off"),
            ("user", one_line(self.user)),
        ]
        width = self.size.width or 200
        full: list[Content | str | tuple[str, str]] = [("🧠 memchat", "bold")]
        for name, value in fields:
            full += ["  ", (name, "$text-muted"), " ", (value or "…", "bold")]
        full += ["  ", (label, colour), *self._extraction()]
        content = Content.assemble(*full)
        if content.cell_length <= width:
            return content
        compact: list[Content | str | tuple[str, str]] = [("🧠", "bold")]
        for name, value in fields:
            shown = value or "…"
            if name == "streaming":
                shown = f"stream {value}"
            elif name == "session":
                shown = shown.removeprefix("memory-session-")
            compact += [(" · ", "$text-muted"), (shown, "bold" if name != "session" else "")]
        compact += ["  ", (label, colour), *self._extraction()]
        return Content.assemble(*compact)
