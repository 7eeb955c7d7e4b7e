"""The memory side panel: filter box, the virtualised list, details of the
highlighted memory. It only shows what the app gives it and posts requests up.

The filter narrows the list as you type (any memory whose text or topics
contain what is typed: prefixes and parts of words, ``pet``, ``Ber``), on the
memories already read; Enter asks the engine for its ranked search (meaning
and keywords, the same ranking as the memory_search tool)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, Static

from memchat.engine.model import Entry
from memchat.safe_text import one_line, printable

from ..format import full_time, shorten_ids
from .memory_list import MemoryList


class FilterInput(Input):
    """The filter box: ↓ moves to the list (the panel opens with the filter focused)."""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "down":
            event.stop()
            event.prevent_default()
            self.screen.focus_next()


class MemoryPanel(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f5", "refresh", "Refresh"),
        Binding("escape", "leave", "Back to chat", show=False),
    ]

    class FilterChanged(Message):
        """Enter in the filter (or the filter cleared): the app reads with the engine."""

        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    class RefreshRequested(Message):
        pass

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: The query of the engine's ranked search on screen ("" = every memory, filtered as typed).
        self.query_text = ""
        #: What is typed in the filter: narrows the list of every memory as you type.
        self.typed = ""
        self.all_entries: list[Entry] = []
        self._haystacks: list[str] = []
        self._ranked: list[Entry] = []
        self._total = 0
        self._soft_delete = False
        self._now = datetime.now(UTC)
        self.border_title = "Memories"

    def compose(self):
        yield FilterInput(placeholder="Filter as you type · Enter: ranked search", id="memory-filter",
                          compact=True)  # fmt: skip
        yield MemoryList(id="memory-list")
        yield Static("", id="memory-details")
        yield Static(Content("loading…"), id="memory-status")

    @property
    def memory_list(self) -> MemoryList:
        return self.query_one(MemoryList)

    @property
    def filter_input(self) -> Input:
        return self.query_one(FilterInput)

    # -- driven by the app -----------------------------------------------
    def show_entries(
        self, entries: Sequence[Entry], *, query: str, total: int, soft_delete: bool, now: datetime
    ) -> None:
        """Every memory (``query`` empty: the filter then narrows them as typed),
        or the engine's ranked results for ``query``."""
        self._total, self._soft_delete, self._now = total, soft_delete, now
        if query:
            self._ranked = list(entries)
        else:
            self.all_entries = list(entries)
            self._haystacks = [
                " ".join((e.memory.text, *e.memory.topics)).casefold() for e in self.all_entries
            ]
        self._show()

    def _show(self) -> None:
        memory_list = self.memory_list
        keep = memory_list.current.id if memory_list.current else None
        memory_list.soft_delete = self._soft_delete
        query, typed, total = self.query_text, self.typed, self._total
        if query:
            entries = self._ranked
            status = f"{len(entries)} found for “{one_line(query)}” (ranked) · {total} in all"
            empty = f"Nothing matches “{one_line(query)}”."
        elif typed:
            needle = typed.casefold()
            entries = [e for e, hay in zip(self.all_entries, self._haystacks, strict=True) if needle in hay]
            status = f"{len(entries)} containing “{one_line(typed)}” · Enter: ranked search"
            empty = "Press Enter to search by meaning."
        else:
            entries = self.all_entries
            status = f"{total} {'memory' if total == 1 else 'memories'}"
            deleted = sum(1 for e in entries if e.is_deleted)
            if deleted:
                status += f" · {deleted} deleted (dimmed)"
            empty = "No memories yet."
        memory_list.empty_text = empty
        memory_list.set_entries(entries, now=self._now, keep=keep)
        self.border_subtitle = "d delete" + (" · r restore" if self._soft_delete else "") + " · f5 refresh"
        self.query_one("#memory-status", Static).update(Content(status))
        self.border_title = f"Memories ({total})"

    def show_message(self, text: str) -> None:
        text = one_line(text)
        self.memory_list.empty_text = text
        self.memory_list.set_entries([], now=self.memory_list.now)
        self.query_one("#memory-status", Static).update(Content(text))

    def focus_filter(self) -> None:
        self.filter_input.focus()

    # -- its own behaviour -----------------------------------------------
    def on_memory_list_highlighted(self, event: MemoryList.Highlighted) -> None:
        event.stop()
        details = self.query_one("#memory-details", Static)
        details.update(describe(event.entry) if event.entry else "")
        details.display = event.entry is not None

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.typed = event.value.strip()
        if self.query_text:  # typing again after a ranked search: back to every memory, narrowed
            self.query_text = ""
            self.post_message(self.FilterChanged(""))
        self._show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        query = event.value.strip()
        if query != self.query_text:
            self.query_text = query
            self.post_message(self.FilterChanged(query))
        self.memory_list.focus()

    def action_refresh(self) -> None:
        self.post_message(self.RefreshRequested())

    async def action_leave(self) -> None:
        await self.run_action("app.focus_input")


def describe(entry: Entry) -> Content:
    """The details block: id, kind, times, topics and episodic metadata."""
    memory = entry.memory
    rows: list[tuple[str, str]] = [
        ("id", shorten_ids(entry.id)),
        ("topics", ", ".join(memory.topics) or "—"),
        ("updated", full_time(entry.updated_at)),
    ]
    if entry.created_at != entry.updated_at:
        rows.append(("created", full_time(entry.created_at)))
    if memory.kind != "fact":
        rows.insert(1, ("kind", memory.kind))
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
