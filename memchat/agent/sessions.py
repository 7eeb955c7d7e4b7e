"""Saved sessions for a runner: the glue between ``Runner`` and
``memchat.sessions``, shared by the console and the TUI.

``attach_sessions`` opens the session store that goes with the memory backend
and gives the runner a recorder; ``resume`` loads a saved session, hands the
model its history (trimmed to fit) and returns what to show; ``start`` does
what ``--resume`` / ``--session`` ask for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memchat.sessions.history import DEFAULT_HISTORY_TOKENS, model_messages, trim_history
from memchat.sessions.model import SessionInfo, SessionNotFoundError, SessionRecord
from memchat.sessions.recorder import SessionRecorder

if TYPE_CHECKING:
    from memchat.settings import Settings

    from .runner import Runner


@dataclass
class Resumed:
    """A saved session the runner continues: what it is, every record (to
    show), and how many of its messages the model was given."""

    info: SessionInfo
    records: list[SessionRecord] = field(default_factory=list)
    sent: int = 0
    total: int = 0

    @property
    def trimmed(self) -> bool:
        return self.sent < self.total


def recorder_of(runner: Runner) -> SessionRecorder | None:
    recorder = runner.recorder
    return recorder if isinstance(recorder, SessionRecorder) else None


async def attach_sessions(
    runner: Runner, settings: Settings, *, on_problem: Callable[[str], object] | None = None
) -> SessionRecorder:
    """Open the session store of ``settings.memory`` (sharing the memory
    service's connection) and record the runner's conversation in it."""
    from memchat.sessions.factory import create_session_store

    store = create_session_store(settings, runner.service.store)
    await store.open()
    recorder = SessionRecorder(
        store, runner.key, model=runner.model.name, backend=settings.memory, on_problem=on_problem
    )
    runner.recorder = recorder
    latest = await store.list(runner.key, limit=1)
    if latest:
        runner.session_seen(latest[0].id)
    return recorder


async def find_session(recorder: SessionRecorder, session_id: str) -> SessionInfo:
    """The saved session ``session_id``, or the only one whose id ends with it
    (``memchat --session 1733020000``); SessionNotFoundError otherwise."""
    await recorder.flush()
    given = session_id.strip()
    info = await recorder.store.get(recorder.key, given) if given else None
    if info is not None:
        return info
    if given:
        endings = [s for s in await recorder.store.list(recorder.key) if s.id.endswith(given)]
        if len(endings) == 1:
            return endings[0]
    raise SessionNotFoundError(given)


async def resume(runner: Runner, session_id: str, *, history_tokens: int = DEFAULT_HISTORY_TOKENS) -> Resumed:
    """Continue saved session ``session_id`` (or the only one ending with it)."""
    recorder = recorder_of(runner)
    if recorder is None:
        raise SessionNotFoundError(session_id, "this chat does not save sessions")
    info = await find_session(recorder, session_id)
    records = await recorder.store.records(recorder.key, info.id)
    messages = model_messages(records)
    sent = trim_history(messages, history_tokens)
    recorder.known(info)
    runner.resume(info.id, sent)
    return Resumed(info, records, sent=len(sent), total=len(messages))


async def resume_latest(runner: Runner, *, history_tokens: int = DEFAULT_HISTORY_TOKENS) -> Resumed | None:
    """Continue the most recently active session (None when there is none)."""
    recorder = recorder_of(runner)
    if recorder is None:
        return None
    await recorder.flush()
    latest = await recorder.store.list(recorder.key, limit=1)
    if not latest:
        return None
    return await resume(runner, latest[0].id, history_tokens=history_tokens)


async def start(runner: Runner, settings: Settings) -> Resumed | None:
    """What ``--resume`` / ``--session ID`` ask for (None: a new session).
    Raises SessionNotFoundError for an unknown ``--session``."""
    if settings.session:
        return await resume(runner, settings.session, history_tokens=settings.history_tokens)
    if settings.resume:
        return await resume_latest(runner, history_tokens=settings.history_tokens)
    return None


async def current_session(runner: Runner) -> tuple[SessionInfo, list[SessionRecord]] | None:
    """The runner's session as saved so far (None when nothing is saved yet)."""
    recorder = recorder_of(runner)
    if recorder is None:
        return None
    await recorder.flush()
    info = await recorder.store.get(recorder.key, runner.session_id)
    if info is None:
        return None
    return info, await recorder.store.records(recorder.key, info.id)
