"""Messages workers post to the app. Workers never touch widgets: they post
one of these, and the app (which owns the state) updates the screen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from memchat.agent.events import Event
    from memchat.agent.runner import Runner
    from memchat.engine.extraction import ExtractionEvent
    from memchat.engine.model import Entry
    from memchat.engine.vectors import EmbeddingProgress as EmbeddingState
    from memchat.engine.vectors import IndexingProgress as IndexingState


class RunnerReady(Message):
    def __init__(self, runner: Runner) -> None:
        super().__init__()
        self.runner = runner


class RunnerFailed(Message):
    def __init__(self, error: str, missing_package: bool = False) -> None:
        super().__init__()
        self.error = error
        #: A Python package is not installed (not a server that is down): the fix is a pip install.
        self.missing_package = missing_package


class EmbeddingProgress(Message):
    """Opening the backend fills in missing vectors: how far it has got."""

    def __init__(self, state: EmbeddingState | IndexingState) -> None:
        super().__init__()
        self.state = state


class TurnEvent(Message):
    """One runner event of turn number ``turn``."""

    def __init__(self, turn: int, event: Event) -> None:
        super().__init__()
        self.turn = turn
        self.event = event


class TurnEnded(Message):
    """The turn's worker finished: normally, stopped by the user, or crashed."""

    def __init__(self, turn: int, *, stopped: bool = False, error: str = "") -> None:
        super().__init__()
        self.turn = turn
        self.stopped = stopped
        self.error = error


class MemoriesLoaded(Message):
    def __init__(self, entries: Sequence[Entry], query: str, total: int) -> None:
        super().__init__()
        self.entries = entries
        self.query = query
        self.total = total


class MemoriesFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class MemoryChanged(Message):
    """A delete or restore done from the side panel."""

    def __init__(self, action: str, memory_id: str, text: str) -> None:
        super().__init__()
        self.action = action
        self.memory_id = memory_id
        self.text = text


class ExtractionProgress(Message):
    """The background extractor started or finished a job (auto mode).

    Posted by the runner's extraction listener: the app renders it."""

    def __init__(self, event: ExtractionEvent) -> None:
        super().__init__()
        self.event = event


class ExtractionDrained(Message):
    """Quitting: the background extraction finished (``finished``) or gave up
    after its time limit; the app can exit with ``code`` now."""

    def __init__(self, code: int, *, finished: bool) -> None:
        super().__init__()
        self.code = code
        self.finished = finished
