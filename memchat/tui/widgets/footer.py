"""The footer: the keys of what can be done now, drawn by one widget.

Textual's Footer is a container of one widget per key, rebuilt (composed,
styled, laid out) each time the bindings change: at start that was ten keys
built three times, 80–110 ms before the first frame was complete (half of
memchat's start beyond a bare Textual app's; benchmarks/tui.py). This footer
draws the same line (the same keys, styles and the command palette's key at the
right) as one piece of content, read from the screen's bindings when it is
drawn, so it is complete in the first frame and a change of keys is a repaint.
A click on a key presses it, as on Textual's; hovering shows the key's tooltip.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget


class FooterKey(NamedTuple):
    """One key as drawn: its binding, whether it can be used now, its tooltip
    and the cells it covers (start, end)."""

    binding: Binding
    enabled: bool
    tooltip: str
    start: int
    end: int


class MemchatFooter(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "footer-key--key",
        "footer-key--description",
        "footer-key--hover",
        "footer-key--separator",
    }
    DEFAULT_CSS = """
    MemchatFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        text-wrap: nowrap;
        text-overflow: clip;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .footer-key--hover {
            background: $block-hover-background;
        }
        .footer-key--separator {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._keys: list[FooterKey] = []
        self._shown: tuple[object, ...] | None = None
        self._hover: int | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _keys_now(self) -> tuple[list[tuple[Binding, bool, str]], tuple[Binding, bool, str] | None]:
        """The keys to show (one per action, as Textual's footer), and the palette's."""
        active = self.screen.active_bindings
        by_action: dict[str, tuple[Binding, bool, str]] = {}
        for _, binding, enabled, tooltip in active.values():
            if binding.show:
                by_action.setdefault(binding.action, (binding, enabled, tooltip))
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in active:
            _, binding, enabled, tooltip = active[self.app.COMMAND_PALETTE_BINDING]
            palette = (binding, enabled, binding.tooltip or binding.description)
        return list(by_action.values()), palette

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is self.screen and self._shown != self._keys_now():
            self.refresh()  # a repaint: the keys are read when drawn

    def render(self) -> Text:
        keys, palette = self._shown = self._keys_now()
        key_style = self.get_component_rich_style("footer-key--key")
        description_style = self.get_component_rich_style("footer-key--description")
        hover_style = self.get_component_rich_style("footer-key--hover", partial=True)
        line = Text(no_wrap=True, overflow="crop", end="")
        drawn: list[FooterKey] = []

        def add(binding: Binding, enabled: bool, tooltip: str, key: str, description: str) -> None:
            start = line.cell_len
            extra = Style(dim=not enabled) + (hover_style if self._hover == len(drawn) else Style())
            line.append(key, key_style + extra)
            line.append(description, description_style + extra)
            drawn.append(FooterKey(binding, enabled, tooltip, start, line.cell_len))

        width = self.size.width or 1_000
        if palette is not None:  # at the right after a thin rule, as on Textual's footer
            binding, enabled, tooltip = palette
            palette_key, palette_label = self.app.get_key_display(binding), f" {binding.description}"
            width -= len(palette_key) + len(palette_label) + 2
        for binding, enabled, tooltip in keys:
            key = f" {self.app.get_key_display(binding)} "
            description = f"{binding.description} " if binding.description else ""
            if line.cell_len + len(key) + len(description) > width:
                break  # whole keys only, and the palette's always has room
            add(binding, enabled, tooltip, key, description)
        if palette is not None and width >= 0:
            binding, enabled, tooltip = palette
            line.append(" " * (width - line.cell_len))
            line.append("▏", self.get_component_rich_style("footer-key--separator"))
            add(binding, enabled, tooltip, palette_key, palette_label)
            line.append(" ")
        self._keys = drawn
        return line

    @property
    def keys(self) -> list[FooterKey]:
        """The keys as last drawn, left to right."""
        return list(self._keys)

    def _key_at(self, x: int) -> int | None:
        return next((n for n, key in enumerate(self._keys) if key.start <= x < key.end), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        hover = self._key_at(event.x)
        if hover != self._hover:
            self._hover = hover
            self.tooltip = self._keys[hover].tooltip or None if hover is not None else None
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        which = self._key_at(event.x)
        if which is None:
            return
        key = self._keys[which]
        if key.enabled:
            self.app.simulate_key(key.binding.key)
        else:
            self.app.bell()
