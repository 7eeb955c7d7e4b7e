"""The chat screen: header, conversation, message box, memory side panel, footer.

It only lays widgets out and offers typed access to them; the app drives them.
The memory panel is built the first time it opens: the first frame does not wait
for what it does not show."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static, TextArea

from memchat.agent.commands import matching_commands

from ..widgets.chat_input import SCROLL_BINDINGS, ChatInput
from ..widgets.chat_log import ChatLog
from ..widgets.footer import MemchatFooter
from ..widgets.header import MemchatHeader

if TYPE_CHECKING:
    from ..widgets.memory_panel import MemoryPanel


class ChatScreen(Screen):
    AUTO_FOCUS = "#chat-input"
    BINDINGS: ClassVar[list[BindingType]] = SCROLL_BINDINGS

    def __init__(
        self, *, model: str, backend: str, user: str, streaming: bool, cursor_blink: bool = True
    ) -> None:
        super().__init__(id="chat-screen")
        self._header_values = {"model": model, "backend": backend, "user": user, "streaming": streaming}
        self._cursor_blink = cursor_blink
        self._memory_panel: MemoryPanel | None = None

    def compose(self):
        header = MemchatHeader(id="header")
        header.set_reactive(MemchatHeader.model, self._header_values["model"])
        header.set_reactive(MemchatHeader.backend, self._header_values["backend"])
        header.set_reactive(MemchatHeader.user, self._header_values["user"])
        header.set_reactive(MemchatHeader.streaming, self._header_values["streaming"])
        yield header
        with Horizontal(id="body"), Vertical(id="chat-column"):
            yield ChatLog(id="chat-log")
            yield Static("", id="command-hint")
            yield ChatInput(id="chat-input", cursor_blink=self._cursor_blink)
        yield MemchatFooter()

    @property
    def header(self) -> MemchatHeader:
        return self.query_one(MemchatHeader)

    @property
    def chat_log(self) -> ChatLog:
        return self.query_one(ChatLog)

    @property
    def chat_input(self) -> ChatInput:
        return self.query_one(ChatInput)

    @property
    def memory_panel(self) -> MemoryPanel:
        """The memory side panel, once it has been opened (see show_memory_panel)."""
        if self._memory_panel is None:
            raise LookupError("the memory panel has not been opened yet")
        return self._memory_panel

    @property
    def memory_panel_shown(self) -> bool:
        return self._memory_panel is not None and self._memory_panel.display

    async def show_memory_panel(self) -> MemoryPanel:
        """Show the memory panel, building it the first time."""
        if self._memory_panel is None:
            from ..widgets.memory_panel import MemoryPanel

            panel = MemoryPanel(id="memory-panel")
            await self.query_one("#body").mount(panel)
            self._memory_panel = panel
        self._memory_panel.display = True
        return self._memory_panel

    def action_scroll_chat(self, where: str) -> None:
        """PgUp/PgDn, ctrl+Home/ctrl+End: move through the conversation (scrolling
        up stops following new text; the end follows it again)."""
        chat_log = self.chat_log
        {"page_up": chat_log.action_page_up, "page_down": chat_log.action_page_down,
         "home": chat_log.action_scroll_home, "end": chat_log.action_scroll_end}[where]()  # fmt: skip

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        """Slash-command hints under the conversation while a command is typed."""
        hint = self.query_one("#command-hint", Static)
        matches = matching_commands(event.text_area.text)
        hint.display = bool(matches)
        if matches:
            hint.update(
                Content("   ").join(
                    Content.from_markup("[b $accent]$name[/] [$text-muted]$what[/]", name=name, what=what)
                    for name, what in matches
                )
            )
