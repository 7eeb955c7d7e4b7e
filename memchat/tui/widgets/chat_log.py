"""The scrolling conversation. Only the latest messages stay live widgets;
older ones are pruned into one light plain-text block, so long chats stay cheap
(a Markdown message is a tree of widgets: 200 of them take seconds to lay out)."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widget import Widget

from .message import AssistantMessage, ChatMessage, EarlierMessages, Note, UserMessage


class ChatLog(VerticalScroll):
    #: Messages kept as live widgets; older ones become plain text.
    MAX_LIVE = 40

    def __init__(self, *, id: str | None = None, max_live: int | None = None) -> None:
        super().__init__(id=id)
        self.max_live = max_live or self.MAX_LIVE
        self.can_focus = False

    def compose(self):
        yield EarlierMessages()

    def on_mount(self) -> None:
        self.anchor()

    @property
    def messages(self) -> list[Widget]:
        return [child for child in self.children if isinstance(child, ChatMessage)]

    @property
    def earlier(self) -> EarlierMessages:
        return self.query_one(EarlierMessages)

    async def add(self, message: Widget, *, follow: bool = False) -> None:
        await self.mount(message)
        if follow:
            self.anchor()
        await self.prune()

    async def add_user(self, text: str) -> UserMessage:
        message = UserMessage(text)
        await self.add(message, follow=True)
        return message

    async def add_assistant(self) -> AssistantMessage:
        message = AssistantMessage()
        await self.add(message, follow=True)
        return message

    async def add_note(self, content, kind: str = "info") -> Note:
        note = Note(content, kind)
        await self.add(note)
        return note

    async def prune(self) -> None:
        live = self.messages
        extra = len(live) - self.max_live
        if extra <= 0:
            return
        old = [m for m in live[:extra] if not (isinstance(m, AssistantMessage) and not m.finished)]
        if not old:
            return
        self.earlier.add([m.transcript() for m in old if isinstance(m, ChatMessage)])
        await self.remove_children(old)

    def last_assistant(self) -> AssistantMessage | None:
        for child in reversed(self.children):
            if isinstance(child, AssistantMessage):
                return child
        return None
