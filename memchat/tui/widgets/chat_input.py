"""The message box: Enter sends, ctrl+j (or shift/alt+enter) adds a line,
multi-line paste, ↑/↓ history, Tab or → completes slash commands."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import TextArea

from memchat.agent.commands import complete_command

#: Keys that insert a new line instead of sending.
NEWLINE_KEYS = ("ctrl+j", "shift+enter", "alt+enter", "ctrl+enter")


#: Keys that scroll the conversation from anywhere on the chat screen; the message box
#: has them too, so its own page keys scroll the conversation, not the box (a few lines at most).
SCROLL_BINDINGS: list[BindingType] = [
    Binding("pageup", "screen.scroll_chat('page_up')", "Scroll", key_display="PgUp/PgDn",
            tooltip="Scroll the conversation a page (ctrl+Home/ctrl+End: its top and end)"),
    Binding("pagedown", "screen.scroll_chat('page_down')", "Page down", show=False),
    Binding("ctrl+home", "screen.scroll_chat('home')", "Top of the conversation", show=False),
    Binding("ctrl+end", "screen.scroll_chat('end')", "End of the conversation", show=False),
]  # fmt: skip


class ChatInput(TextArea):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", "Complete", show=False),
        *SCROLL_BINDINGS,
    ]

    class Submitted(Message):
        """Enter was pressed; the app decides whether to accept the text."""

        def __init__(self, chat_input: ChatInput, text: str) -> None:
            super().__init__()
            self.chat_input = chat_input
            self.text = text

        @property
        def control(self) -> ChatInput:
            return self.chat_input

    def __init__(self, *, id: str | None = None, cursor_blink: bool = True) -> None:
        super().__init__(
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            placeholder="Message memchat — Enter sends, ctrl+j new line, /help for commands",
        )
        self.cursor_blink = cursor_blink
        self.sent: list[str] = []
        self._history_index: int | None = None
        self._draft = ""

    # -- sending ---------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self, self.text))
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)

    def accept(self) -> None:
        """The app took the text: remember it and start afresh."""
        text = self.text
        if text.strip() and (not self.sent or self.sent[-1] != text):
            self.sent.append(text)
        self._history_index = None
        self._draft = ""
        self.clear()

    # -- history ---------------------------------------------------------
    def action_cursor_up(self, select: bool = False) -> None:
        if select or self.cursor_location[0] > 0 or not self.sent:
            super().action_cursor_up(select)
            return
        if self._history_index is None:
            self._draft = self.text
            self._history_index = len(self.sent)
        if self._history_index > 0:
            self._history_index -= 1
            self._show(self.sent[self._history_index])

    def action_cursor_down(self, select: bool = False) -> None:
        last_row = self.document.line_count - 1
        if select or self.cursor_location[0] < last_row or self._history_index is None:
            super().action_cursor_down(select)
            return
        self._history_index += 1
        if self._history_index >= len(self.sent):
            self._history_index = None
            self._show(self._draft)
        else:
            self._show(self.sent[self._history_index])

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    # -- completion ------------------------------------------------------
    def update_suggestion(self) -> None:
        self.suggestion = complete_command(self.text) if self.cursor_location == self.document.end else ""

    def action_complete(self) -> None:
        if self.suggestion:
            self.insert(self.suggestion)
        else:
            self.screen.focus_next()
