"""The app's memory work: reading memories into the side panel, deleting and
restoring them from it, and ``/forget TEXT`` (search, confirm, delete) — which
works whether or not the model's memory_delete tool is enabled.

A mixin of :class:`~memchat.tui.app.MemchatApp`: it reads the app's runner
and drives the panel; the slow parts run in workers that post messages back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from memchat.engine.model import MemchatError
from memchat.safe_text import one_line

from .host import AppHost
from .messages import MemoriesFailed, MemoriesLoaded, MemoryChanged

if TYPE_CHECKING:
    from memchat.engine.model import Entry

    from .widgets.memory_list import MemoryList
    from .widgets.memory_panel import MemoryPanel


#: Results the panel's ranked search (Enter in the filter) asks the engine for.
FILTER_RESULTS = 200
#: Matches /forget looks at; the best one is offered, the others named.
FORGET_RESULTS = 4


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, MemchatError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class MemoryActions(AppHost):
    """Mixed into MemchatApp (what it uses of the app: host.AppHost)."""

    # -- reading into the panel -------------------------------------------------
    def _memories_changed(self) -> None:
        """A memory tool ran: refresh the panel now if it is open, else when it opens."""
        self._memories_stale = True
        if self.chat.memory_panel_shown:
            self.load_memories()

    def load_memories(self) -> None:
        """Read the memories into the panel (one never opened reads them when it opens)."""
        if not self.chat.memory_panel_shown:
            return
        panel = self.chat.memory_panel
        if self.runner is None:
            panel.show_message(
                f"Not connected: {self.runner_error}" if self.runner_error else "Connecting to the backend…"
            )
            return
        self._memories_stale = False
        self._read_memories(panel.query_text)

    @work(group="memories", exclusive=True, exit_on_error=False)
    async def _read_memories(self, query: str) -> None:
        runner = self.runner
        if runner is None:
            return
        memory = runner.memory
        try:
            if query:
                # The engine's one retrieval path, in the service's mode (--search): the
                # same ranking as the memory_search tool. Embedding the query runs in a thread.
                entries = await memory.search(query, FILTER_RESULTS)
            else:
                entries = await memory.read(include_deleted=memory.soft_delete)
            total = await memory.count()
        except Exception as exc:
            self.post_message(MemoriesFailed(describe_error(exc)))
            return
        self.post_message(MemoriesLoaded(entries, query, total))

    def on_memories_loaded(self, message: MemoriesLoaded) -> None:
        if self.runner is None or self._shutting_down:
            return
        self.chat.memory_panel.show_entries(
            message.entries,
            query=message.query,
            total=message.total,
            soft_delete=self.runner.memory.soft_delete,
            now=self.clock(),
        )

    def on_memories_failed(self, message: MemoriesFailed) -> None:
        if self._shutting_down:
            return
        self.chat.memory_panel.show_message(f"Cannot read memories: {message.error}")
        self.alert(message.error, title="Memories", severity="error")

    def on_memory_panel_filter_changed(self, message: MemoryPanel.FilterChanged) -> None:
        self.load_memories()

    def on_memory_panel_refresh_requested(self, message: MemoryPanel.RefreshRequested) -> None:
        self.load_memories()

    def action_refresh_memories(self) -> None:
        self.load_memories()

    # -- delete and restore (the panel's d and r, and /forget) -------------------
    def on_memory_list_action_requested(self, message: MemoryList.ActionRequested) -> None:
        if self.runner is not None:
            self._confirm_change(message.action, message.entry)

    def _confirm_change(self, action: str, entry: Entry, note: str = "") -> None:
        from .screens.confirm import ConfirmScreen  # a dialog: loaded when first asked

        soft = self.runner is not None and self.runner.memory.soft_delete
        if action == "delete":
            consequence = (
                "It stays as a dimmed tombstone that you can restore (soft delete is on)."
                if soft
                else "This cannot be undone (soft delete is off; --soft-delete keeps tombstones)."
            )
            screen = ConfirmScreen("Delete this memory?", f"“{entry.memory.text}”\n\n{consequence}{note}",
                                   yes="Delete", danger=True)  # fmt: skip
        else:
            screen = ConfirmScreen("Restore this memory?", f"“{entry.memory.text}”", yes="Restore")

        def answered(yes: bool | None) -> None:
            if yes:
                self._change_memory(action, entry.id, entry.memory.text)

        self.push_screen(screen, answered)

    @work(group="memory-change", exit_on_error=False)
    async def _change_memory(self, action: str, memory_id: str, text: str) -> None:
        runner = self.runner
        if runner is None:
            return
        try:
            if action == "delete":
                await runner.memory.delete(memory_id)
            else:
                await runner.memory.restore(memory_id)
        except Exception as exc:
            self.post_message(MemoriesFailed(describe_error(exc)))
            return
        self.post_message(MemoryChanged(action, memory_id, text))

    async def on_memory_changed(self, message: MemoryChanged) -> None:
        done = "Deleted" if message.action == "delete" else "Restored"
        self.alert(f"{done}: {message.text}", title="Memories")
        if message.action == "delete":
            await self.chat.chat_log.add_note(f"🗑  Deleted: {one_line(message.text)}", "info")
        self.load_memories()

    async def action_forget(self, text: str = "") -> None:
        """``/forget TEXT``: find the memory with the engine's search, ask, delete
        (without TEXT, from the palette: how to use it)."""
        if not text:
            await self.chat.chat_log.add_note(
                "🗑  Say what to forget: /forget TEXT (e.g. /forget I like Go), or open the memory panel "
                "(ctrl+b) and press d on a memory.",
                "warn",
            )
            return
        if self.runner is None:
            await self.chat.chat_log.add_note("🗑  Not connected to the memory backend yet: try again.",
                                              "warn")  # fmt: skip
            return
        self._find_to_forget(text)

    @work(group="forget", exclusive=True, exit_on_error=False)
    async def _find_to_forget(self, text: str) -> None:
        runner = self.runner
        if runner is None:
            return
        try:
            found = await runner.memory.search(text, FORGET_RESULTS)
        except Exception as exc:
            self.post_message(MemoriesFailed(describe_error(exc)))
            return
        self.call_later(self._offer_to_forget, text, [e for e in found if not e.is_deleted])

    async def _offer_to_forget(self, text: str, found: list[Entry]) -> None:
        if not found:
            await self.chat.chat_log.add_note(
                f"🗑  No memory matches “{one_line(text)}”: nothing was deleted (ctrl+b lists them all).",
                "warn",
            )
            return
        best, others = found[0], found[1:]
        note = ""
        if others:
            listed = "; ".join(f"“{one_line(e.memory.text)}”" for e in others)
            note = f"\n\nOther matches (not deleted): {listed}. Use more words, or the panel's d."
        self._confirm_change("delete", best, note)
