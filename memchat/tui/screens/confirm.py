"""A yes/no question over the chat (delete or restore a memory)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from memchat.safe_text import printable


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, detail: str = "", *, yes: str = "Yes", danger: bool = False) -> None:
        super().__init__(classes="confirm-screen")
        self.question = question
        self.detail = detail
        self.yes_label = yes
        self.danger = danger

    def compose(self):
        with Vertical(id="confirm-dialog"):
            yield Static(Content.from_markup("[b]$q[/b]", q=self.question), id="confirm-question")
            if self.detail:
                yield Static(Content(printable(self.detail)), id="confirm-detail")
            with Horizontal(id="confirm-buttons"):
                yield Button(
                    f"{self.yes_label} (y)", variant="error" if self.danger else "primary", id="confirm-yes"
                )
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
