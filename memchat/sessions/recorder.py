"""SessionRecorder: saves a conversation as it happens.

The runner tells it each message it adds to the history, each turn's stats
and errors (``memchat.agent.runner.ConversationLog``); the console and the
TUI tell it what was typed. Calls never wait: records go into a queue that one
writer task empties in order, appending whatever has piled up for a session in
one write. So a slow or unreachable backend never holds up a turn, and a
crash loses only what was not written yet — the turn in flight. A failed
write keeps its records for the next attempt and is reported once through
``on_problem``; records the backend refuses while it answers otherwise (not
storable) are skipped and reported, so they never hold back the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from memchat.engine.model import UserKey

from .model import SessionInfo, SessionRecord, now_utc, storable, title_of
from .store import SessionStore

log = logging.getLogger(__name__)


class SessionRecorder:
    def __init__(
        self,
        store: SessionStore,
        key: UserKey,
        *,
        model: str = "",
        backend: str = "",
        clock: Callable[[], datetime] = now_utc,
        on_problem: Callable[[str], object] | None = None,
    ) -> None:
        self.store = store
        self.key = key
        self.model = model
        self.backend = backend
        self.clock = clock
        self.on_problem = on_problem
        #: The last write failure ("" once a write succeeds again).
        self.problem = ""
        #: Sessions as last written or loaded by this process.
        self.sessions: dict[str, SessionInfo] = {}
        #: ("record", session id, SessionRecord) or ("input", "", text), oldest first.
        self._pending: list[tuple[str, str, Any]] = []
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._closed = False

    # -- told by the runner (ConversationLog) and the UI; never waits -------

    def message(self, session_id: str, message: Mapping[str, Any], meta: Mapping[str, Any]) -> None:
        self._enqueue("record", session_id, SessionRecord("message", dict(message), dict(meta), self.clock()))

    def turn_stats(self, session_id: str, stats: Any, model: str) -> None:
        data = asdict(stats) if not isinstance(stats, Mapping) else dict(stats)
        self._enqueue(
            "record", session_id, SessionRecord("stats", {**data, "model": model}, {}, self.clock())
        )

    def turn_error(self, session_id: str, text: str) -> None:
        self._enqueue("record", session_id, SessionRecord("error", {"message": text}, {}, self.clock()))

    def input(self, text: str) -> None:
        """One line typed at the prompt (for ↑/↓ in the next run)."""
        if text.strip():
            self._enqueue("input", "", storable(text))

    def known(self, info: SessionInfo) -> None:
        """A session loaded from the store (resumed): later records continue it."""
        self.sessions[info.id] = info

    # -- the writer --------------------------------------------------------

    def _enqueue(self, kind: str, session_id: str, item: Any) -> None:
        if self._closed:
            return
        self._pending.append((kind, session_id, item))
        self._start()
        assert self._wake is not None and self._idle is not None
        self._idle.clear()
        self._wake.set()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._wake = self._wake or asyncio.Event()
            self._idle = self._idle or asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="memchat-session-writer")

    async def _run(self) -> None:
        assert self._wake is not None and self._idle is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._write_pending()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # kept for the next attempt; said once
                self._report(str(exc) or type(exc).__name__)
            self._idle.set()

    async def _write_pending(self) -> None:
        while self._pending:
            kind, session_id, item = self._pending[0]
            if kind == "input":
                await self.store.add_input(self.key, item)
                self._pending.pop(0)
                continue
            batch = []
            for k, sid, record in self._pending:
                if k != "record" or sid != session_id:
                    break
                batch.append(record)
            info = self.sessions.get(session_id) or SessionInfo(
                id=session_id, title=title_of(batch), created_at=batch[0].created_at,
                updated_at=batch[0].created_at,
            )  # fmt: skip
            info = replace(info, model=self.model, backend=self.backend)
            try:
                self.sessions[session_id] = await self.store.append(self.key, info, batch)
            except Exception as exc:
                if not await self._store_answers(session_id):
                    raise  # the backend is away: keep the records for the next attempt
                # The backend works but refuses these records: skip them rather than
                # hold back everything said after them.
                del self._pending[: len(batch)]
                self._report(
                    f"{len(batch)} record(s) of {session_id} could not be saved and were skipped: {exc}"
                )
                continue
            del self._pending[: len(batch)]
            if self.problem:
                self.problem = ""

    async def _store_answers(self, session_id: str) -> bool:
        try:
            await self.store.get(self.key, session_id)
        except Exception:
            return False
        return True

    def _report(self, problem: str) -> None:
        if problem == self.problem:
            return
        self.problem = problem
        log.warning("could not save the conversation: %s", problem)
        if self.on_problem is not None:
            with contextlib.suppress(Exception):
                self.on_problem(problem)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def flush(self, timeout: float | None = 10.0) -> bool:
        """Write what is pending (trying again after a failure); True when nothing is left."""
        if not self._pending:
            return True
        self._start()
        assert self._wake is not None and self._idle is not None
        self._idle.clear()
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        return not self._pending

    async def close(self, timeout: float | None = 10.0) -> bool:
        """Flush (bounded), stop the writer and close the store. True when everything was saved."""
        saved = await self.flush(timeout)
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.store.close()
        return saved
