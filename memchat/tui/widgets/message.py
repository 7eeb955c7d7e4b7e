"""Messages in the chat log: the user's, the assistant's (Markdown, streamed),
notes from the app, and the light rendering of pruned older messages.

Text a model or a person wrote is shown through ``printable``: control and
escape sequences appear as visible characters (``␛``), never reach the terminal."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from memchat.safe_text import one_line, printable

from .. import gc_pause
from ..format import stats_line

if TYPE_CHECKING:  # the agent's modules load after the first frame
    from textual.widgets import Markdown
    from textual.widgets.markdown import MarkdownStream

    from memchat.agent.events import ExtractionFinished, TurnStats
    from memchat.agent.llm import ToolCall

    from .tool_panel import ToolCallPanel


class ChatMessage:
    """Mixin: a message that can be copied and archived as plain text."""

    def copy_text(self) -> str:
        raise NotImplementedError

    def transcript(self) -> str:
        return self.copy_text()


class UserMessage(ChatMessage, Static):
    can_focus = True

    def __init__(self, text: str) -> None:
        super().__init__(Content(printable(text)), classes="message user-message")
        self.text = text
        self.border_title = "You"

    def copy_text(self) -> str:
        return self.text

    def transcript(self) -> str:
        return f"You: {printable(self.text)}"


class Note(ChatMessage, Static):
    """Something the app says: the banner, /help, /new, errors, stop marks."""

    def __init__(self, content: str | Content, kind: str = "info") -> None:
        content = content if isinstance(content, Content) else Content(printable(content))
        super().__init__(content, classes=f"note -{kind}")
        self.kind = kind
        self.text = content.plain

    def copy_text(self) -> str:
        return self.text

    def transcript(self) -> str:
        return self.copy_text()


class ExtractionNote(Note):
    """What a background extraction changed (auto mode), or why it failed."""

    #: Memories listed per kind of change; the rest are counted.
    MAX_LISTED = 8

    def __init__(self, event: ExtractionFinished) -> None:
        super().__init__(extraction_content(event), "error" if not event.ok else "extraction")
        self.event = event


def extraction_content(event: ExtractionFinished) -> Content:
    """``🧩 Background extraction: +2 added, 1 updated`` and the memories it
    changed, one a line; or the failure (the messages are kept for the next try)."""
    if event.ok:
        notes = []
        if event.skipped:
            notes.append(f"{len(event.skipped)} invalid operation{'s' if len(event.skipped) != 1 else ''} "
                         "skipped")  # fmt: skip
        if event.errors:
            notes.append(f"{len(event.errors)} failed")
        headline = Content.from_markup("🧩 [b]Background extraction:[/b] $summary", summary=event.summary())
        if notes:
            headline = headline.append(Content.styled(f"  ({', '.join(notes)})", "$warning"))
        lines = [headline]
    else:
        what = {"timeout": "timed out", "cancelled": "was cancelled"}.get(event.status, "failed")
        reason = f": {one_line(event.errors[-1])}" if event.errors else ""
        lines = [Content(f"🧩 Background extraction {what}{reason} (the messages are kept for the next try)")]
    limit = ExtractionNote.MAX_LISTED

    def listed(items: list[Content]) -> list[Content]:
        if len(items) <= limit:
            return items
        return [*items[:limit], Content.styled(f"   … and {len(items) - limit} more", "$text-muted")]

    def row(mark: str, style: str, text: str, after: str = "") -> Content:
        return Content.assemble(
            "   ", (mark, f"bold {style}"), " ", one_line(text), (one_line(after), "$text-muted")
        )

    lines += listed([row("+", "$success", e.memory.text) for e in event.added])
    lines += listed([
        row("~", "$warning", after.memory.text,
            f"  (was: {before.memory.text})" if before and before.memory.text != after.memory.text else "")
        for before, after in event.updated
    ])  # fmt: skip
    lines += listed([row("-", "$error", e.memory.text) for e in event.deleted])
    if event.cleared:
        lines.append(row("-", "$error", f"{event.cleared} memories cleared"))
    if event.ok:
        lines += listed([row("!", "$error", error) for error in event.errors])
        lines += listed([row("?", "$warning", skipped) for skipped in event.skipped])
    return Content("\n").join(lines)


#: A streamed answer is shown as Markdown widgets of about this many characters,
#: cut at a blank line outside code blocks: a new token then re-lays out only the
#: last one (one widget for a 10k-token answer made each frame take 200-400 ms).
BLOCK_CHARS = 400


def block_cut(shown: str, text: str, size: int = BLOCK_CHARS) -> int:
    """Where to start a new Markdown block in ``text``, which follows ``shown`` in
    the current block: just after the first blank line outside a fenced code
    block once the block holds ``size`` characters; 0 when there is none yet."""
    cut = text.find("\n\n", max(0, size - len(shown) - 1))
    while cut >= 0:
        head = shown + text[: cut + 2]
        fences = sum(1 for line in head.splitlines() if line.lstrip(" ").startswith(("```", "~~~")))
        if fences % 2 == 0:
            return cut + 2
        cut = text.find("\n\n", cut + 1)
    return 0


class SealedMarkdown(Static):
    """A finished block of a long answer, as one widget (Rich draws the Markdown)."""

    def __init__(self, text: str) -> None:
        from rich.markdown import Markdown as RichMarkdown

        super().__init__(RichMarkdown(text, code_theme="monokai", hyperlinks=False), classes="answer sealed")
        self.text = text


class AssistantMessage(ChatMessage, Vertical):
    """One turn's answer: Markdown parts (streamed with MarkdownStream) with
    tool panels between them, errors, and the stats line under it. A long part
    is shown as several Markdown blocks (see BLOCK_CHARS)."""

    can_focus = True

    def __init__(self) -> None:
        super().__init__(classes="message assistant-message")
        self.border_title = "Assistant"
        self.parts: list[str] = []  # raw Markdown of each text part
        self.panels: dict[str, ToolCallPanel] = {}
        self.stopped = False
        self.finished = False
        self._markdown: Markdown | None = None
        self._stream: MarkdownStream | None = None
        self._block = ""  # the text of the Markdown block being streamed
        self._holds_gc = False

    def on_mount(self) -> None:
        if not self.finished:
            gc_pause.hold()  # no full collection pauses the stream (see gc_pause)
            self._holds_gc = True

    def on_unmount(self) -> None:
        self._release_gc()  # removed mid-turn (/new, pruning): never keep the freeze

    def _release_gc(self) -> None:
        if self._holds_gc:
            self._holds_gc = False
            gc_pause.release()

    def compose(self):
        yield Static(Content.styled("thinking…", "italic"), classes="pending")

    async def _clear_pending(self) -> None:
        for pending in self.query(".pending"):
            await pending.remove()

    async def append_text(self, text: str) -> None:
        text = printable(text)  # the model may quote memories holding escape sequences
        if self._stream is None:
            await self._clear_pending()
            await self._new_block()
            self.parts.append("")
        self.parts[-1] += text
        while text and (cut := block_cut(self._block, text)):
            await self._write(text[:cut])
            await self._seal_block()
            await self._new_block()
            text = text[cut:]
        if text:
            await self._write(text)

    async def _new_block(self) -> None:
        from textual.widgets import Markdown  # markdown-it loads with the first answer

        self._markdown = Markdown(classes="answer")
        await self.mount(self._markdown)
        self._stream = Markdown.get_stream(self._markdown)
        self._block = ""

    async def _seal_block(self) -> None:
        """The block is complete: one widget drawing its Markdown replaces the
        tree of widgets (one per paragraph, list item, code block) that streaming
        needs, so laying out the screen no longer walks through them."""
        assert self._stream is not None and self._markdown is not None
        await self._stream.stop()
        sealed = SealedMarkdown(self._block)
        await self.mount(sealed, before=self._markdown)
        await self._markdown.remove()

    async def _write(self, text: str) -> None:
        assert self._stream is not None
        self._block += text
        await self._stream.write(text)

    async def _end_text(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            if self._markdown is not None:
                # Lay the finished blocks out once more: on a loaded machine a snapshot
                # once showed a streamed paragraph cut to its first line (a height kept
                # from mid-stream, it seems; not reproduced since), with its text whole.
                for block in self._markdown.children:
                    block.refresh(layout=True)
                self._markdown.refresh(layout=True)
            self._stream = None
            self._markdown = None

    async def add_tool_calls(self, calls: tuple[ToolCall, ...], *, expanded: bool = False) -> None:
        await self._end_text()
        await self._clear_pending()
        from .tool_panel import ToolCallPanel  # loaded with the first tool call

        panels = [ToolCallPanel(call, expanded=expanded) for call in calls]
        for panel in panels:
            self.panels[panel.call.id] = panel
        await self.mount_all(panels)

    def tool_executing(self, call: ToolCall) -> None:
        if panel := self.panels.get(call.id):
            panel.executing()

    def tool_finished(self, call: ToolCall, content: str, is_error: bool, elapsed: float) -> None:
        if panel := self.panels.get(call.id):
            panel.finish(content, is_error, elapsed)

    async def add_error(self, message: str) -> None:
        await self._end_text()
        await self._clear_pending()
        await self.mount(Static(Content(f"❌ {printable(message)}"), classes="turn-error"))

    async def set_stats(self, stats: TurnStats) -> None:
        await self.mount(Static(Content(stats_line(stats)), classes="stats"))

    async def finish(self, *, stopped: bool = False) -> None:
        if self.finished:
            return
        self.finished = True
        await self._end_text()
        await self._clear_pending()
        self._release_gc()
        for panel in self.panels.values():
            panel.cancel()
        if stopped:
            self.stopped = True
            self.add_class("-stopped")
            await self.mount(
                Static(Content("⏹ stopped — the partial answer is kept"), classes="stopped-mark")
            )
        elif not self.parts and not self.panels and not self.query(".turn-error"):
            await self.mount(Static(Content.styled("(no answer)", "dim italic"), classes="empty-answer"))

    def copy_text(self) -> str:
        return "\n\n".join(part for part in self.parts if part)

    def transcript(self) -> str:
        tools = "".join(f"\n  {panel.transcript()}" for panel in self.panels.values())
        stopped = " [stopped]" if self.stopped else ""
        return f"Assistant:{tools}\n{self.copy_text()}{stopped}"


class EarlierMessages(Static):
    """Older messages, pruned from the live log and kept as one light block of
    plain text (the model's history still has them)."""

    KEEP = 200

    def __init__(self) -> None:
        super().__init__("", classes="earlier")
        self.entries: deque[str] = deque(maxlen=self.KEEP)
        self.pruned = 0
        self.display = False

    def add(self, transcripts: list[str]) -> None:
        self.pruned += len(transcripts)
        self.entries.extend(transcripts)
        dropped = self.pruned - len(self.entries)
        header = f"── {self.pruned} earlier messages, shown as plain text"
        if dropped:
            header += f" ({dropped} oldest not shown)"
        self.update(Content(printable(header + " ──\n\n" + "\n\n".join(self.entries))))
        self.display = True
