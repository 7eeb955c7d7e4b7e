"""What the app's mixins (memory_actions.py, sessions.py, toggles.py) use of
:class:`~memchat.tui.app.MemchatApp`, declared once for the type checker.

At run time :class:`AppHost` is ``object`` (the mixins add methods to the app
and nothing else); under type checking it is the app as the mixins see it, so
``self.notify`` or ``self.chat`` in a mixin is checked like in the app."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from memchat.agent.runner import Runner
    from memchat.settings import Settings

    from .screens.chat import ChatScreen

    class AppHost(App[int]):
        settings: Settings
        runner: Runner | None
        runner_error: str
        busy: bool
        streaming: bool
        tools_expanded: bool
        clock: Callable[[], datetime]
        _memories_stale: bool
        _told_preferences: bool

        @property
        def chat(self) -> ChatScreen: ...

        @property
        def _shutting_down(self) -> bool: ...

        def alert(
            self, message: str, *, title: str = "", severity: SeverityLevel = "information",
            timeout: float | None = None,
        ) -> None: ...  # fmt: skip

        async def action_new_session(self) -> None: ...

        def action_focus_input(self) -> None: ...

else:
    AppHost = object
