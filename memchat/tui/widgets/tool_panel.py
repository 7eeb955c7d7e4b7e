"""One live panel per tool call: initiated → executing (spinner) → ✅ result or ❌ error.

Compact by default: one line (state, tool, short arguments, elapsed, short
result) that expands on click or Enter into the arguments and the result as
highlighted JSON. The details are built when first shown, so a folded panel
costs one line of layout whatever the tool returned. Memory IDs (64 hex
characters) are shortened in the display."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Button, Collapsible, Static

from memchat.safe_text import escape_json_text, one_line, printable

from ..format import (
    SPINNER,
    duration,
    pretty_json,
    short_arguments,
    short_result,
    shorten_ids,
    truncate_lines,
)

if TYPE_CHECKING:  # the agent's modules load after the first frame
    from textual.timer import Timer

    from memchat.agent.llm import ToolCall

#: Results longer than this are cut, with a button to show everything.
MAX_RESULT_LINES = 14
MAX_RESULT_CHARS = 1600


def highlight(code: str) -> Content:
    from textual.highlight import highlight as textual_highlight  # Pygments loads with the first panel

    return textual_highlight(code, language="json")


def json_content(text: str) -> Content:
    pretty, valid = pretty_json(text)
    return shown_json(pretty, valid)


def shown_json(text: str, valid: bool) -> Content:
    """Highlighted JSON (with terminal-unsafe characters as \\u escapes, so it
    stays valid JSON), or the text made printable when it is not JSON. Long
    IDs are shortened (inside strings, so it stays JSON)."""
    text = shorten_ids(text)
    return highlight(escape_json_text(text)) if valid else Content(printable(text))


class ToolCallPanel(Collapsible):
    """Tool name, state, elapsed time, arguments and result. The app drives it
    through the methods below."""

    def __init__(self, call: ToolCall, *, expanded: bool = False) -> None:
        self.call = call
        self.state = "initiated"
        self.result = ""
        self.is_error = False
        self.elapsed: float | None = None
        self._started = 0.0
        self._frame = 0
        self._built = ""  # which details are mounted: "", "args" or "result"
        self._spinner: Timer | None = None
        # Textual renders a Content title (its annotation says str).
        super().__init__(title=self._make_title(), collapsed=not expanded, classes="tool-panel -initiated")  # type: ignore[arg-type]

    def _make_title(self) -> Content:
        icon, state, style = {
            "initiated": ("🔧", "initiated", "$text-muted"),
            "executing": (SPINNER[self._frame % len(SPINNER)], "executing", "$warning"),
            "done": ("✅", "done", "$success"),
            "error": ("❌", "error", "$error"),
            "cancelled": ("⏹", "cancelled", "$text-muted"),
        }[self.state]
        elapsed = ""
        if self.elapsed is not None:
            elapsed = duration(self.elapsed)
        elif self.state == "executing":
            elapsed = duration(time.perf_counter() - self._started)
        outcome = ""
        if self.state in ("done", "error"):
            outcome = "→ " + short_result(self.result, self.is_error)
        return Content.from_markup(
            f"$icon [b]$name[/b] [$text-muted]$args[/]  [{style}]$state[/] [$text-muted]$elapsed[/]  "
            f"[{style}]$outcome[/]",
            icon=icon,
            name=one_line(self.call.name),
            args=printable(short_arguments(self.call.arguments)),
            state=state,
            elapsed=elapsed,
            outcome=printable(outcome),
        )

    def _set_state(self, state: str) -> None:
        self.remove_class(f"-{self.state}")
        self.state = state
        self.add_class(f"-{state}")
        self._show_title()

    # -- driven by the app -----------------------------------------------
    def executing(self) -> None:
        self._started = time.perf_counter()
        self._set_state("executing")
        self._spinner = self.set_interval(0.1, self._spin)

    def _spin(self) -> None:
        self._frame += 1
        self._show_title()

    def _show_title(self) -> None:
        self.title = self._make_title()  # type: ignore[assignment]  # a Content title, as in __init__

    def finish(self, content: str, is_error: bool, elapsed: float) -> None:
        self._stop_spinner()
        self.result = content
        self.is_error = is_error
        self.elapsed = elapsed
        self._set_state("error" if is_error else "done")
        if not self.collapsed:
            self._build_details()

    def cancel(self) -> None:
        """The turn stopped before this call finished."""
        if self.state in ("initiated", "executing"):
            self._stop_spinner()
            self._set_state("cancelled")

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    # -- the details, built when shown -------------------------------------
    def on_mount(self) -> None:
        if not self.collapsed:
            self._build_details()

    def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        if event.collapsible is self:
            self._build_details()

    def _build_details(self) -> None:
        wanted = "result" if self.state in ("done", "error") else "args"
        if self._built == wanted or not self.is_mounted:
            return
        widgets: list = []
        label = Content.styled(f"arguments · call {one_line(self.call.id)}", "dim")
        if not self._built:  # the arguments first; the result is added under them when it comes
            widgets += [
                Static(label, classes="tool-label"),
                Static(json_content(self.call.arguments or "{}"), classes="tool-json tool-args"),
            ]
        if wanted == "result":
            pretty, valid = pretty_json(self.result)
            shown, hidden = truncate_lines(pretty, MAX_RESULT_LINES, MAX_RESULT_CHARS)
            outcome = "error" if self.is_error else "result"
            widgets += [
                Static(Content.styled(outcome, "dim"), classes="tool-label"),
                Static(shown_json(shown, valid), classes="tool-json tool-result"),
            ]
            if hidden:
                widgets.append(Button(f"Show all ({hidden} more lines)", compact=True, classes="show-all"))
        self._built = wanted
        self.query_one(Collapsible.Contents).mount_all(widgets)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.has_class("show-all"):
            event.stop()
            self.query_one(".tool-result", Static).update(json_content(self.result))
            event.button.remove()

    def transcript(self) -> str:
        mark = {"done": "✅", "error": "❌"}.get(self.state, "⏹")
        return printable(f"{mark} {self.call.name} {self.call.arguments}")
