"""The memory side panel: filter box, the virtualised list, details of the
highlighted memory. It only shows what the app gives it and posts requests up."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, Static

from memchat.engine import Entry
from memchat.safe_text import one_line, printable

from ..format import full_time
from .memory_list import MemoryList

#: Seconds of typing pause before the filter searches.
FILTER_DELAY = 0.3


class MemoryPanel(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f5", "refresh", "Refresh"),
        Binding("escape", "leave", "Back to chat", show=False),
    ]

    class FilterChanged(Message):
        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    class RefreshRequested(Message):
        pass

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.query_text = ""
        self._filter_timer: Timer | None = None
        self.border_title = "Memories"

    def compose(self):
        yield Input(placeholder="Filter: search memories…", id="memory-filter", compact=True)
        yield MemoryList(id="memory-list")
        yield Static("", id="memory-details")
        yield Static(Content("loading…"), id="memory-status")

    @property
    def memory_list(self) -> MemoryList:
        return self.query_one(MemoryList)

    # -- driven by the app -----------------------------------------------
    def show_entries(
        self, entries: Sequence[Entry], *, query: str, total: int, soft_delete: bool, now: datetime
    ) -> None:
        memory_list = self.memory_list
        keep = memory_list.current.id if memory_list.current else None
        memory_list.soft_delete = soft_delete
        memory_list.empty_text = f"Nothing matches “{one_line(query)}”." if query else "No memories yet."
        memory_list.set_entries(entries, now=now, keep=keep)
        deleted = sum(1 for e in entries if e.is_deleted)
        if query:
            status = f"{len(entries)} matching “{one_line(query)}” · {total} in all"
        else:
            status = f"{total} {'memory' if total == 1 else 'memories'}"
            if deleted:
                status += f" · {deleted} deleted (dimmed)"
        hints = "d delete" + (" · r restore" if soft_delete else "") + " · f5 refresh"
        self.border_subtitle = hints
        self.query_one("#memory-status", Static).update(Content(status))
        self.border_title = f"Memories ({total})"

    def show_message(self, text: str) -> None:
        text = one_line(text)
        self.memory_list.empty_text = text
        self.memory_list.set_entries([], now=self.memory_list.now)
        self.query_one("#memory-status", Static).update(Content(text))

    # -- its own behaviour -----------------------------------------------
    def on_memory_list_highlighted(self, event: MemoryList.Highlighted) -> None:
        event.stop()
        details = self.query_one("#memory-details", Static)
        details.update(describe(event.entry) if event.entry else "")
        details.display = event.entry is not None

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_DELAY, lambda: self._filter(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter(event.value)
        self.memory_list.focus()

    def _filter(self, value: str) -> None:
        query = value.strip()
        if query != self.query_text:
            self.query_text = query
            self.post_message(self.FilterChanged(query))

    def action_refresh(self) -> None:
        self.post_message(self.RefreshRequested())

    async def action_leave(self) -> None:
        await self.run_action("app.focus_input")


def describe(entry: Entry) -> Content:
    """The details block: id, kind, times, topics and episodic metadata."""
    memory = entry.memory
    rows: list[tuple[str, str]] = [
        ("id", entry.id),
        ("kind", memory.kind),
        ("topics", ", ".join(memory.topics) or "—"),
        ("created", full_time(entry.created_at)),
        ("updated", full_time(entry.updated_at)),
    ]
    if entry.deleted_at is not None:
        rows.append(("deleted", full_time(entry.deleted_at)))
    if memory.event_time is not None:
        rows.append(("event time", full_time(memory.event_time)))
    if memory.participants:
        rows.append(("participants", ", ".join(memory.participants)))
    if memory.location:
        rows.append(("location", memory.location))
    if entry.score:
        rows.append(("score", f"{entry.score:.3f}"))
    # Memories are written by a model: shown as text (never markup), controls made visible.
    lines = [Content.from_markup("[b]$text[/b]", text=printable(memory.text))]
    for label, value in rows:
        lines.append(
            Content.from_markup("[$text-muted]$label[/] $value", label=f"{label:<8}", value=one_line(value))
        )
    return Content("\n").join(lines)
