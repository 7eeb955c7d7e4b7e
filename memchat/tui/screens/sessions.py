"""The sessions screen: saved conversations with title, time and message
count; search by text, open, rename, delete (after a confirmation).

It talks to the session store through the recorder it is given (flushed
first, so the conversation on screen is listed as it is) and hands the app
what to do when it closes: a session to open, and the ids it deleted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.coordinate import Coordinate
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from memchat.safe_text import one_line

from .confirm import ConfirmScreen

if TYPE_CHECKING:
    from memchat.sessions.model import SessionInfo
    from memchat.sessions.recorder import SessionRecorder

#: Seconds of typing pause before the search runs.
SEARCH_DELAY = 0.25


@dataclass
class SessionsClosed:
    """What the screen hands back: a session to open (or None) and what it deleted."""

    open: str | None = None
    deleted: set[str] = field(default_factory=set)


def ago(moment: datetime, now: datetime) -> str:
    seconds = max(0, (now - moment).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


class RenameScreen(ModalScreen[str | None]):
    """A one-line title editor: Enter saves, Esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    RenameScreen { align: center middle; background: $background 60%; }
    #rename-dialog { width: 70; max-width: 90%; height: auto; padding: 1 2;
                     border: thick $accent 60%; background: $surface; }
    """

    def __init__(self, title: str) -> None:
        super().__init__()
        self.current = title

    def compose(self):
        with Vertical(id="rename-dialog"):
            yield Static(
                Content.from_markup("[b]Rename the session[/b]  [$text-muted]Enter saves · Esc cancels[/]")
            )
            yield Input(self.current, id="rename-input", max_length=200)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class SessionsScreen(ModalScreen[SessionsClosed]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("r,f2", "rename", "Rename"),
        Binding("d,delete", "delete", "Delete"),
        Binding("ctrl+f", "search", "Search", show=False),
    ]
    DEFAULT_CSS = """
    SessionsScreen { align: center middle; background: $background 60%; }
    #sessions-dialog { width: 110; max-width: 95%; height: 80%; padding: 0 1;
                       border: thick $accent 60%; background: $surface; }
    #sessions-search { margin: 1 0 0 0; }
    #sessions-table { height: 1fr; margin: 1 0 0 0; }
    #sessions-status { height: 1; color: $text-muted; }
    """

    def __init__(self, recorder: SessionRecorder, *, current: str, now: datetime | None = None) -> None:
        super().__init__(id="sessions-screen")
        self.recorder = recorder
        self.current = current
        self.now = now
        self.result = SessionsClosed()
        self.sessions: list[SessionInfo] = []
        self.query_text = ""
        self._timer: Timer | None = None

    def compose(self):
        with Vertical(id="sessions-dialog") as dialog:
            dialog.border_title = "Sessions"
            yield Input(
                placeholder="Search: text in titles and messages…", id="sessions-search", compact=True
            )
            table: DataTable = DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
            table.add_column("", key="mark", width=1)
            table.add_column("Title", key="title", width=46)
            table.add_column("Last active", key="when", width=14)
            table.add_column("Messages", key="count", width=8)
            table.add_column("Session", key="id", width=28)
            yield table
            yield Static(
                Content.from_markup(
                    "[$text-muted]enter open · r rename · d delete · type to search · esc close[/]"
                ),
                id="sessions-help",
            )
            yield Static("loading…", id="sessions-status")

    @property
    def table(self) -> DataTable:
        return self.query_one("#sessions-table", DataTable)

    def on_mount(self) -> None:
        self.load()
        self.table.focus()

    # -- loading -------------------------------------------------------------
    def load(self) -> None:
        self._load(self.query_text)

    @work(group="sessions-list", exclusive=True, exit_on_error=False)
    async def _load(self, query: str) -> None:
        try:
            await self.recorder.flush()
            sessions = await self.recorder.store.list(self.recorder.key, query=query)
        except Exception as exc:
            self._status(f"Cannot read the sessions: {exc}")
            return
        self.show(sessions, query)

    def show(self, sessions: list[SessionInfo], query: str) -> None:
        self.sessions = sessions
        table = self.table
        selected = self.selected_id
        table.clear()
        now = self.now or datetime.now(UTC)
        for info in sessions:
            mark = Content.styled("▶", "$accent") if info.id == self.current else ""
            table.add_row(
                mark,
                one_line(info.title),
                ago(info.updated_at, now),
                str(info.message_count),
                info.id,
                key=info.id,
            )
        if selected is not None and selected in {s.id for s in sessions}:
            table.move_cursor(row=table.get_row_index(selected))
        found = f"{len(sessions)} session{'s' if len(sessions) != 1 else ''}"
        self._status(f"{found} holding “{one_line(query)}”" if query else f"{found}, most recent first")

    def _status(self, text: str) -> None:
        self.query_one("#sessions-status", Static).update(Content(one_line(text)))

    @property
    def selected_id(self) -> str | None:
        table = self.table
        if not table.row_count or table.cursor_row < 0:
            return None
        return str(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    def _selected(self) -> SessionInfo | None:
        chosen = self.selected_id
        return next((s for s in self.sessions if s.id == chosen), None)

    # -- search --------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "sessions-search":
            return
        event.stop()
        self.query_text = event.value.strip()
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(SEARCH_DELAY, self.load)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "sessions-search":
            event.stop()
            self.table.focus()

    def action_search(self) -> None:
        self.query_one("#sessions-search", Input).focus()

    # -- actions ---------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.result.open = str(event.row_key.value)
        self.dismiss(self.result)

    def action_close(self) -> None:
        self.dismiss(self.result)

    def action_rename(self) -> None:
        info = self._selected()
        if info is None:
            return

        def renamed(title: str | None) -> None:
            if title is not None and title.strip() and title.strip() != info.title:
                self._rename(info.id, title)

        self.app.push_screen(RenameScreen(info.title), renamed)

    @work(group="sessions-change", exit_on_error=False)
    async def _rename(self, session_id: str, title: str) -> None:
        try:
            await self.recorder.store.rename(self.recorder.key, session_id, title)
        except Exception as exc:
            self.app.notify(one_line(str(exc)), title="Rename", severity="error", markup=False)
            return
        recorded = self.recorder.sessions.get(session_id)
        if recorded is not None:
            self.recorder.known(recorded.renamed(" ".join(title.split())))
        self.load()

    def action_delete(self) -> None:
        info = self._selected()
        if info is None:
            return
        current = (
            " This is the conversation on screen: a new session starts." if info.id == self.current else ""
        )
        detail = (
            f"“{info.title}” ({info.message_count} messages)\n\n"
            f"It cannot be restored; memories are kept.{current}"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(info.id)

        self.app.push_screen(
            ConfirmScreen("Delete this session?", detail, yes="Delete", danger=True), answered
        )

    @work(group="sessions-change", exit_on_error=False)
    async def _delete(self, session_id: str) -> None:
        try:
            await self.recorder.flush()
            await self.recorder.store.delete(self.recorder.key, session_id)
        except Exception as exc:
            self.app.notify(one_line(str(exc)), title="Delete", severity="error", markup=False)
            return
        self.recorder.sessions.pop(session_id, None)
        self.result.deleted.add(session_id)
        self.app.notify("Session deleted.", title="Sessions")
        self.load()
