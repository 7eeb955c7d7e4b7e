"""A virtualised list of memories: one line-API widget draws only the rows on
screen, so 10,000 memories cost no more than 10 (no widget per memory)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memchat.engine.model import Entry
from memchat.safe_text import one_line

from ..format import when


class MemoryList(ScrollView, can_focus=True):
    """Two lines per memory: the text, then topics and the updated time."""

    ROW_HEIGHT = 2

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "memory-list--cursor",
        "memory-list--meta",
        "memory-list--deleted",
        "memory-list--empty",
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("d,delete", "delete", "Delete"),
        Binding("r", "restore", "Restore"),
    ]

    cursor: reactive[int] = reactive(-1, always_update=True)

    class Highlighted(Message):
        def __init__(self, memory_list: MemoryList, entry: Entry | None) -> None:
            super().__init__()
            self.memory_list = memory_list
            self.entry = entry

        @property
        def control(self) -> MemoryList:
            return self.memory_list

    class ActionRequested(Message):
        """``delete`` or ``restore`` pressed on an entry."""

        def __init__(self, action: str, entry: Entry) -> None:
            super().__init__()
            self.action = action
            self.entry = entry

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: list[Entry] = []
        self.soft_delete = False
        self.empty_text = "No memories yet."
        self.now: datetime = datetime.now(UTC)

    # -- data ------------------------------------------------------------
    def set_entries(self, entries: Sequence[Entry], *, now: datetime, keep: str | None = None) -> None:
        """Show ``entries``; keep the cursor on the memory with id ``keep`` if present."""
        self.entries = list(entries)
        self.now = now
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.entries) * self.ROW_HEIGHT)
        index = next((i for i, e in enumerate(self.entries) if e.id == keep), 0) if keep else 0
        self.cursor = index if self.entries else -1
        if index == 0:
            self.scroll_to(y=0, animate=False)
        self.refresh()

    @property
    def current(self) -> Entry | None:
        return self.entries[self.cursor] if 0 <= self.cursor < len(self.entries) else None

    def watch_cursor(self, cursor: int) -> None:
        if cursor >= 0:
            self.scroll_to_region(
                Region(0, cursor * self.ROW_HEIGHT, 1, self.ROW_HEIGHT), animate=False, immediate=True
            )
        self.refresh()
        self.post_message(self.Highlighted(self, self.current))
        self.refresh_bindings()

    # -- drawing ---------------------------------------------------------
    def on_resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.entries) * self.ROW_HEIGHT)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        row = self.scroll_offset.y + y
        index, line = divmod(row, self.ROW_HEIGHT)
        if not self.entries:
            if y == 0:
                style = base + self.get_component_rich_style("memory-list--empty")
                return self._strip(Text(" " + self.empty_text), width, style)
            return Strip.blank(width, base)
        if index >= len(self.entries):
            return Strip.blank(width, base)
        entry = self.entries[index]
        style = base
        if index == self.cursor:
            style += self.get_component_rich_style("memory-list--cursor")
        if line == 1:
            style += self.get_component_rich_style("memory-list--meta", partial=True)
        if entry.is_deleted:
            deleted = self.get_component_rich_style("memory-list--deleted")
            style += Style(color=deleted.color, strike=True)
        if line == 0:
            mark = "✗ " if entry.is_deleted else "● "
            return self._strip(Text(mark + one_line(entry.memory.text)), width, style)
        topics = one_line(", ".join(entry.memory.topics)) or "no topics"
        stamp = when(entry.updated_at, self.now)
        state = "deleted · " if entry.is_deleted else ""
        return self._strip(Text(f"  {state}{stamp} · {topics}"), width, style)

    def _strip(self, text: Text, width: int, style: Style) -> Strip:
        text.truncate(width, overflow="ellipsis", pad=True)
        segments = [Segment(s.text, s.style) for s in text.render(self.app.console, end="")]
        return Strip(segments).apply_style(style).adjust_cell_length(width, style)

    # -- input -----------------------------------------------------------
    def _move(self, index: int) -> None:
        if self.entries:
            self.cursor = max(0, min(index, len(self.entries) - 1))

    def action_cursor_up(self) -> None:
        self._move(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self._move(self.cursor + 1)

    def action_page_up(self) -> None:
        self._move(self.cursor - max(1, self.scrollable_content_region.height // self.ROW_HEIGHT))

    def action_page_down(self) -> None:
        self._move(self.cursor + max(1, self.scrollable_content_region.height // self.ROW_HEIGHT))

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.entries) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            self._move((self.scroll_offset.y + offset.y) // self.ROW_HEIGHT)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        entry = self.current
        if action == "delete":
            return entry is not None and not entry.is_deleted
        if action == "restore":
            return self.soft_delete and entry is not None and entry.is_deleted
        return True

    def action_delete(self) -> None:
        if (entry := self.current) is not None and not entry.is_deleted:
            self.post_message(self.ActionRequested("delete", entry))

    def action_restore(self) -> None:
        if (entry := self.current) is not None and entry.is_deleted and self.soft_delete:
            self.post_message(self.ActionRequested("restore", entry))
