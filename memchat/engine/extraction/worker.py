"""Background extraction workers (reference §6.1–§6.2, ``auto.go``).

After every chat turn the runner calls ``submit(key, session_id, history)``.
That call never awaits anything: it records the history, works out the
*pending* messages (user/assistant messages with text that came after the
last successful extraction of this session — the watermark), asks the
extractor's checkers, and hands the session to a worker. The turn is already
over; extraction runs on asyncio tasks, so the chat never waits for it.

Workers
    ``workers`` asyncio tasks (default 1), each with its own bounded queue
    (``queue_size``, default 10). A user's jobs always go to the same worker
    (FNV-1a of app + user, like the reference), so they run one at a time
    and in order. A job runs under ``job_timeout`` (default 30 s).

What a job does
    Reads the pending messages *when it starts* (not when it was queued), so
    a job picks up every message that arrived while it waited. It lists the
    relevant existing memories (a search with the user's words, padded with
    the most recent memories), calls the extractor, applies the update
    policy, then executes the operations in order: an update of a memory that
    is gone becomes an add (if memory_add is enabled), a delete of a missing
    memory is ignored, an operation whose tool is disabled is skipped, and a
    failing operation is logged and the rest go on. Within one job an update
    that rotated a memory's ID is followed by later operations on that memory.

Watermark
    Advanced to the end of the job's messages when the extraction succeeded
    (even if single operations failed). When the search, the model or the
    extractor fails, or the job times out before the model answered, the
    messages stay pending and are offered again with the next job.

A full queue never blocks the chat and never drops a job
    *Coalescing*: a session has at most one queued job; submitting again
    while it waits just leaves the new messages for that job to pick up.
    *Deferral*: when a worker's queue is full, the session is parked in that
    worker's ordered overflow list (at most one entry per session) and moved
    into the queue as soon as the worker takes its next job. ``submit``
    returns "deferred" and logs it. (The reference instead runs the job
    synchronously in the caller, which would block the chat.)

Closing
    ``close()`` stops accepting jobs, lets the queued and deferred jobs run
    for up to ``drain_timeout`` (default: ``job_timeout``), then cancels what
    is left: a running job reports ``status="cancelled"``; sessions that never
    started are logged as not extracted.

Listeners (``add_listener``) receive ``ExtractionStarted`` and
``ExtractionFinished`` on the event loop; the TUI and the console render them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..model import Entry, MemoryNotFoundError, UserKey
from ..tools.base import ToolName
from .extractor import filter_messages
from .policy import apply_policy
from .types import (
    MERGE_SIMILAR,
    ExtractionContext,
    ExtractionError,
    ExtractionEvent,
    ExtractionFinished,
    ExtractionStarted,
    ExtractionStatus,
    Extractor,
    JobState,
    Listener,
    Message,
    Operation,
    OperationType,
)

log = logging.getLogger(__name__)

__all__ = ["AutoMemory", "AutoMemoryConfig", "fnv32a"]

DEFAULT_WORKERS = 1
DEFAULT_QUEUE_SIZE = 10
DEFAULT_JOB_TIMEOUT = 30.0
#: Existing memories shown to the extractor: search hits first, then the most recent.
DEFAULT_EXISTING_LIMIT = 20
#: Under preserve_history and append_only the search query is capped (bytes).
QUERY_BUDGET = 7 * 1024


@dataclass(frozen=True)
class AutoMemoryConfig:
    """Worker settings. Values below 1 (or 0 s) mean the defaults 1 / 10 / 30 s."""

    workers: int = DEFAULT_WORKERS
    queue_size: int = DEFAULT_QUEUE_SIZE
    job_timeout: float = DEFAULT_JOB_TIMEOUT
    #: How long ``close()`` waits for queued jobs; None: ``job_timeout``.
    drain_timeout: float | None = None
    existing_limit: int = DEFAULT_EXISTING_LIMIT

    def normalised(self) -> AutoMemoryConfig:
        return AutoMemoryConfig(
            workers=self.workers if self.workers >= 1 else DEFAULT_WORKERS,
            queue_size=self.queue_size if self.queue_size >= 1 else DEFAULT_QUEUE_SIZE,
            job_timeout=self.job_timeout if self.job_timeout > 0 else DEFAULT_JOB_TIMEOUT,
            drain_timeout=self.drain_timeout,
            existing_limit=max(1, self.existing_limit),
        )


def fnv32a(text: str) -> int:
    """32-bit FNV-1a of the UTF-8 bytes (the reference's worker hash)."""
    value = 0x811C9DC5
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


class _Session:
    """One conversation's messages and extraction progress."""

    __slots__ = (
        "in_flight",
        "key",
        "last_extract_at",
        "messages",
        "queued",
        "session_id",
        "times",
        "watermark",
    )

    def __init__(self, key: UserKey, session_id: str) -> None:
        self.key = key
        self.session_id = session_id
        self.messages: list[Message] = []
        #: When each message was first seen (the end of its turn).
        self.times: list[datetime] = []
        #: Messages before this index were extracted successfully.
        self.watermark = 0
        #: End index of the job that is running (its messages are not pending).
        self.in_flight = 0
        self.last_extract_at: datetime | None = None
        self.queued = False

    def observe(self, messages: Sequence[Message], now: datetime) -> None:
        if len(messages) < len(self.messages):  # a different, shorter history: start over
            self.watermark = self.in_flight = 0
            self.times = []
        self.times += [now] * (len(messages) - len(self.times))
        self.messages = list(messages)

    def pending(self) -> list[dict[str, str]]:
        return filter_messages(self.messages[max(self.watermark, self.in_flight) :])


class _Job:
    """What one extraction did so far (kept when it times out half-way)."""

    def __init__(self) -> None:
        self.extracted = False
        self.added: list[Entry] = []
        self.updated: list[tuple[Entry | None, Entry]] = []
        self.deleted: list[Entry] = []
        self.cleared = 0
        self.skipped: list[str] = []
        self.errors: list[str] = []


class AutoMemory:
    """The auto-mode worker pool of one MemoryService. See the module docstring."""

    def __init__(
        self,
        service: Any,
        extractor: Extractor,
        config: AutoMemoryConfig | None = None,
        *,
        enabled: frozenset[str] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.service = service
        self.extractor = extractor
        self.config = (config or AutoMemoryConfig()).normalised()
        #: Tools the extractor may use (None: all four write operations).
        self.enabled = enabled
        self._now = clock or (lambda: datetime.now(UTC))
        self._sessions: dict[tuple[str, str, str], _Session] = {}
        self._queues: list[asyncio.Queue[_Session]] = []
        self._deferred: list[OrderedDict[tuple[str, str, str], _Session]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._running: list[_Session | None] = []
        self._listeners: list[Listener] = []
        self._callbacks: set[asyncio.Future[Any]] = set()
        self._closed = False

    @property
    def policy(self) -> str:
        return getattr(self.extractor, "policy", "") or MERGE_SIMILAR

    # -- listeners ----------------------------------------------------------

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every ExtractionStarted / ExtractionFinished
        (on the event loop; a coroutine function is scheduled). Returns a remover."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _emit(self, event: ExtractionEvent) -> None:
        for listener in list(self._listeners):
            try:
                outcome = listener(event)
                if inspect.isawaitable(outcome):
                    task = asyncio.ensure_future(outcome)
                    self._callbacks.add(task)
                    task.add_done_callback(self._callbacks.discard)
            except Exception:
                log.warning("an extraction listener failed", exc_info=True)

    # -- submitting ---------------------------------------------------------

    def _start(self) -> None:
        if self._workers:
            return
        for index in range(self.config.workers):
            self._queues.append(asyncio.Queue(maxsize=self.config.queue_size))
            self._deferred.append(OrderedDict())
            self._running.append(None)
            self._workers.append(asyncio.create_task(self._work(index), name=f"memchat-extraction-{index}"))

    def worker_index(self, key: UserKey) -> int:
        return fnv32a(key.app + key.user) % self.config.workers

    def submit(
        self, key: UserKey, session_id: str, messages: Sequence[Message], *, force: bool = False
    ) -> JobState:
        """Offer a session's messages for extraction; returns at once with what
        happened: "queued", "coalesced" (a queued job will take them),
        "deferred" (the worker's queue is full; queued as soon as it has room),
        "waiting" (the checkers said not yet), "nothing new", "skipped" (no
        user) or "closed". ``force`` ignores the checkers (end of a conversation)."""
        if self._closed:
            log.debug("memory extraction: closed, not extracting session %s", session_id)
            return JobState.CLOSED
        try:
            key.validate()
        except Exception:
            return JobState.SKIPPED
        now = self._now()
        ident = (key.app, key.user, session_id)
        session = self._sessions.get(ident)
        if session is None:
            session = self._sessions[ident] = _Session(key, session_id)
        session.observe(messages, now)
        pending = session.pending()
        if not pending:
            return JobState.NOTHING_NEW
        if not force:
            context = ExtractionContext(key, tuple(pending), session.last_extract_at, now)
            try:
                if not self.extractor.should_extract(context):
                    return JobState.WAITING
            except Exception:
                log.warning("memory extraction: a checker failed; not extracting now", exc_info=True)
                return JobState.WAITING
        if session.queued:
            return JobState.COALESCED
        self._start()
        index = self.worker_index(key)
        session.queued = True
        try:
            self._queues[index].put_nowait(session)
        except asyncio.QueueFull:
            self._deferred[index][ident] = session
            log.info(
                "memory extraction: worker %d's queue is full (%d); session %s deferred until it has room",
                index, self.config.queue_size, session_id,
            )  # fmt: skip
            return JobState.DEFERRED
        return JobState.QUEUED

    def _refill(self, index: int) -> None:
        queue, deferred = self._queues[index], self._deferred[index]
        while deferred and not queue.full():
            queue.put_nowait(deferred.popitem(last=False)[1])

    @property
    def pending_jobs(self) -> int:
        """Jobs queued, deferred or running."""
        waiting = sum(q.qsize() for q in self._queues) + sum(len(d) for d in self._deferred)
        return waiting + sum(1 for s in self._running if s is not None)

    # -- the workers --------------------------------------------------------

    async def _work(self, index: int) -> None:
        queue = self._queues[index]
        while True:
            session = await queue.get()
            try:
                self._refill(index)
                session.queued = False
                self._running[index] = session
                await self._process(session)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("memory extraction: unexpected failure in worker %d", index)
            finally:
                self._running[index] = None
                queue.task_done()

    async def _process(self, session: _Session) -> None:
        start, end = session.watermark, len(session.messages)
        delta = filter_messages(session.messages[start:end])
        if not delta:
            return
        session.in_flight = end
        key = session.key
        job = _Job()
        self._emit(ExtractionStarted(key, session.session_id, len(delta)))
        started = time.perf_counter()
        status = ExtractionStatus.OK
        try:
            async with asyncio.timeout(self.config.job_timeout):
                await self._run(job, key, delta)
        except TimeoutError:
            status = ExtractionStatus.TIMEOUT
            job.errors.append(f"memory extraction timed out after {self.config.job_timeout:g} s")
            log.warning("memory extraction for session %s timed out", session.session_id)
        except asyncio.CancelledError:
            session.in_flight = 0
            self._emit(self._finished(session, job, ExtractionStatus.CANCELLED, len(delta), started))
            raise
        except Exception as exc:
            status = ExtractionStatus.FAILED
            job.errors.append(str(exc) or type(exc).__name__)
            log.warning("memory extraction for session %s failed: %s", session.session_id, exc)
        if job.extracted and end <= len(session.messages):
            session.watermark = max(session.watermark, end)
            session.last_extract_at = session.times[end - 1]
        session.in_flight = 0
        self._emit(self._finished(session, job, status, len(delta), started))

    @staticmethod
    def _finished(
        session: _Session, job: _Job, status: ExtractionStatus, count: int, started: float
    ) -> ExtractionFinished:
        return ExtractionFinished(
            key=session.key,
            session_id=session.session_id,
            status=status,
            messages=count,
            added=tuple(job.added),
            updated=tuple(job.updated),
            deleted=tuple(job.deleted),
            cleared=job.cleared,
            skipped=tuple(job.skipped),
            errors=tuple(job.errors),
            elapsed=time.perf_counter() - started,
        )

    async def _run(self, job: _Job, key: UserKey, delta: list[dict[str, str]]) -> None:
        existing = await self._existing(key, delta)
        extraction = await self.extractor.extract(
            delta, existing, enabled=self.enabled, reference_date=self._now()
        )
        job.skipped.extend(extraction.warnings)
        job.extracted = True
        operations = await apply_policy(
            self.policy, extraction.operations, service=self.service, key=key, existing=existing,
            enabled=self.enabled,
        )  # fmt: skip
        await self._execute(job, key, operations)

    def _query(self, delta: list[dict[str, str]]) -> str:
        # A search query may hold no NUL or lone surrogate (engine/validation.py); chat text may.
        if self.policy == MERGE_SIMILAR:
            return _searchable(" ".join(m["content"] for m in delta if m["role"] == "user"))
        query = _searchable("\n".join(m["content"] for m in delta))
        data = query.encode("utf-8")
        if len(data) <= QUERY_BUDGET:
            return query
        half = QUERY_BUDGET // 2
        head = data[:half].decode("utf-8", "ignore")
        tail = data[-half:].decode("utf-8", "ignore")
        return f"{head}\n...\n{tail}"

    async def _existing(self, key: UserKey, delta: list[dict[str, str]]) -> list[Entry]:
        """Search hits for the new messages first, then the most recent memories."""
        limit = self.config.existing_limit
        query = self._query(delta)
        found: list[Entry] | None = None
        try:
            found = list(await self.service.search(key, query)) if query.strip() else []
        except Exception as exc:
            log.warning("memory extraction: searching existing memories failed (%s); reading instead", exc)
        try:
            recent = list(await self.service.read(key, limit))
        except Exception as exc:
            if found is None:
                raise ExtractionError(f"could not read the existing memories: {exc}") from exc
            recent = []
        entries: list[Entry] = []
        seen: set[str] = set()
        for entry in (*(found or ()), *recent):
            if entry.id not in seen and len(entries) < limit:
                seen.add(entry.id)
                entries.append(entry)
        return entries

    def _allowed(self, op: Operation) -> bool:
        return self.enabled is None or op.tool in self.enabled

    async def _execute(self, job: _Job, key: UserKey, operations: Sequence[Operation]) -> None:
        service = self.service
        rotated: dict[str, str] = {}
        for op in operations:
            if not self._allowed(op):
                log.debug("memory extraction: %s is disabled; skipped", op.tool)
                continue
            try:
                if op.type == OperationType.ADD:
                    await self._add(job, key, op)
                elif op.type == OperationType.UPDATE:
                    memory_id = rotated.get(op.memory_id, op.memory_id)
                    try:
                        result = await service.update(key, memory_id, op.memory, op.topics, op.metadata())
                    except MemoryNotFoundError:
                        if self.enabled is not None and ToolName.ADD not in self.enabled:
                            log.info("memory extraction: update of a missing memory skipped (add disabled)")
                            continue
                        await self._add(job, key, op)
                        continue
                    rotated[op.memory_id] = result.memory_id
                    if memory_id != op.memory_id:
                        rotated[memory_id] = result.memory_id
                    job.updated.append((op.target, result.entry))
                elif op.type == OperationType.DELETE:
                    memory_id = rotated.get(op.memory_id, op.memory_id)
                    try:
                        await service.delete(key, memory_id)
                    except MemoryNotFoundError:
                        continue
                    if op.target is not None:
                        job.deleted.append(op.target)
                elif op.type == OperationType.CLEAR:
                    job.cleared += await service.clear(key)
                else:
                    log.warning("memory extraction: unknown operation type %r skipped", op.type)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("memory extraction: %s failed: %s", op.tool, exc)
                job.errors.append(f"{op.tool}: {exc}")

    async def _add(self, job: _Job, key: UserKey, op: Operation) -> None:
        entry = await self.service.add(key, op.memory, op.topics, op.metadata())
        if entry.created_at == entry.updated_at:
            job.added.append(entry)
        else:  # it was stored already: refreshed (topics and metadata replaced)
            job.updated.append((None, entry))

    # -- draining and closing -------------------------------------------------

    async def _idle(self) -> None:
        await asyncio.gather(*(q.join() for q in self._queues))

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued and deferred job has run (True) or ``timeout`` passed (False)."""
        if not self._workers:
            return True
        try:
            await asyncio.wait_for(self._idle(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self, timeout: float | None = None) -> None:
        """Stop taking jobs, drain for up to ``timeout`` (default: drain_timeout,
        else job_timeout), cancel the rest, close the extractor. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if timeout is None:
            timeout = self.config.drain_timeout
        if timeout is None:
            timeout = self.config.job_timeout
        try:
            if self._workers and not await self.drain(timeout):
                log.warning("memory extraction: still busy after %g s at close; cancelling", timeout)
            for task in self._workers:
                task.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
            left = sum(q.qsize() for q in self._queues) + sum(len(d) for d in self._deferred)
            if left:
                log.warning("memory extraction: %d queued session(s) were not extracted before closing", left)
            if self._callbacks:
                await asyncio.gather(*self._callbacks, return_exceptions=True)
        finally:
            close = getattr(self.extractor, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:
                    log.warning("closing the memory extractor failed", exc_info=True)

    @property
    def closed(self) -> bool:
        return self._closed


def _searchable(text: str) -> str:
    """``text`` without the characters no search query may hold (NUL, lone surrogates)."""
    return _UNSEARCHABLE.sub("\ufffd", text.replace("\x00", " "))


_UNSEARCHABLE = re.compile("[\ud800-\udfff]")
