"""The footer: Textual's, drawn with its keys in the first frame and redrawn
only when the keys it shows change.

Textual's Footer composes empty, waits for the screen to say its bindings
changed (focus set), then recomposes after the next frame, and recomposes
again on every later notice, changed or not: at start three rebuilds of ten
keys (~40 ms each on a busy machine) came after the first frame, so the keys
appeared a frame or more late. The chat screen mounts this one once the
message box has the focus (see ChatScreen.on_mount): it composes with the
bindings as they will stay."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class MemchatFooter(Footer):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Compose with the keys at once (Textual's waits for the first notice to do so). A private
        # reactive of Textual's Footer: without it (another Textual) the keys come a frame later.
        ready = getattr(Footer, "_bindings_ready", None)
        if ready is not None:
            self.set_reactive(ready, True)
        self._shown: tuple[object, ...] | None = None

    def _shown_bindings(self) -> tuple[object, ...]:
        """What compose draws from: the shown bindings with their state, and the palette key's."""
        active = self.screen.active_bindings
        shown = tuple((b, enabled, tooltip) for _, b, enabled, tooltip in active.values() if b.show)
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        return shown, (palette.binding, palette.enabled) if palette else None

    def compose(self):
        self._shown = self._shown_bindings()
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen and self._shown == self._shown_bindings():
            return  # the same keys: nothing to redraw
        super().bindings_changed(screen)
