"""How the SQL stores make a call: each one bounded by the store's timeout
(a client/server store shuts its connections down when it runs out), retried
whole after a deadlock, and every failure turned into one BackendError
sentence that never holds the DSN's password."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memchat.engine.model import BackendError, UserKey
from memchat.engine.secrets import redact

from .base import timeout_message

T = TypeVar("T")

#: When (loop time) the store call running in this context must be done: a
#: connection made for it gives up then too.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("memchat_sql_deadline", default=None)


class SQLCalls:
    """The call plumbing of ``SQLStore``: what it needs from the store is
    declared here; ``SQLStore.__init__`` sets it."""

    name = "sql"
    location: str
    engine: AsyncEngine
    #: The engine write sections run on (a dialect may tag it, e.g. SQLite's BEGIN IMMEDIATE).
    _write_engine: AsyncEngine
    #: Seconds a call may take (connecting, queries, lock waits) before it fails.
    timeout: float
    #: The driver connections this store made, shut down when a call times out.
    _connections: weakref.WeakSet[Any]
    #: Masked (***) out of every error message (a DSN password).
    _secret: str | None
    #: How often an atomic section is run again after a deadlock (``_is_retryable``).
    max_attempts = 5

    async def open(self) -> None:
        raise NotImplementedError

    async def _begin_user(self, conn: AsyncConnection, key: UserKey) -> None:
        """Called first in every atomic section: serialise this user's writers."""

    # -- for tables kept beside the memories (memchat.sessions) ---------------

    async def run_read(self, action: str, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``fn(connection)`` in a read, bounded by the timeout, failing as one BackendError."""
        return await self._read(action, fn)

    async def run_write(
        self, action: str, fn: Callable[[AsyncConnection], Awaitable[T]], *, key: UserKey | None = None
    ) -> T:
        """``fn(connection)`` in one write transaction, after ``key``'s writer lock
        when given; bounded, retried whole after a deadlock, failing as one BackendError."""

        async def section(conn: AsyncConnection) -> T:
            if key is not None:
                await self._begin_user(conn, key)
            return await fn(conn)

        return await self._in_write_transaction(action, section)

    def failure(self, action: str, exc: BaseException) -> BackendError:
        """The BackendError sentence this store gives for ``exc`` while doing ``action``."""
        return self._error(action, exc)

    def _explain(self, exc: BaseException) -> str:
        """One clear sentence for a driver error; never includes a password."""
        orig = getattr(exc, "orig", None) or exc
        return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__

    def _is_retryable(self, exc: BaseException) -> bool:
        """A deadlock or serialisation failure: the whole section may run again."""
        return False

    def _is_connection_lost(self, exc: BaseException) -> bool:
        """The server is unreachable or dropped the connection."""
        return bool(getattr(exc, "connection_invalidated", False)) or isinstance(exc, OSError)

    #: A client/server store bounds every call by ``timeout`` (``_bounded``);
    #: an embedded one relies on its busy timeout.
    bounded_calls = False
    #: What ``timeout_message`` calls the server ("PostgreSQL server").
    server_kind = "server"

    def _server_address(self) -> str:
        return self.location

    def _abort_connection(self, driver_connection: Any) -> None:
        """Make a call waiting on this driver connection fail now (a server
        that stopped answering): shut its socket down."""

    async def _connect_bounded(self, connect: Callable[[], Awaitable[Any]]) -> Any:
        """A new driver connection (for ``async_creator``), made within the
        current call's deadline (or ``timeout`` outside one)."""
        loop = asyncio.get_running_loop()
        deadline = _DEADLINE.get()
        async with asyncio.timeout_at(deadline if deadline is not None else loop.time() + self.timeout):
            connection = await connect()
        self._connections.add(connection)
        return connection

    @contextlib.asynccontextmanager
    async def _bounded(self) -> AsyncIterator[list[bool]]:
        """Bound one store call by ``timeout``. When it runs out, every
        connection of this store is shut down, so the driver raises at once
        (its transaction never commits) and the pool discards it; the list
        yielded then holds True, and the caller reports the timeout."""
        expired: list[bool] = []
        if not self.bounded_calls:
            yield expired
            return
        loop = asyncio.get_running_loop()

        def expire() -> None:
            expired.append(True)
            for connection in list(self._connections):
                self._abort_connection(connection)

        handle = loop.call_later(self.timeout, expire)
        token = _DEADLINE.set(loop.time() + self.timeout)
        try:
            yield expired
        finally:
            _DEADLINE.reset(token)
            handle.cancel()

    def _timed_out(self, action: str) -> BackendError:
        message = timeout_message(self.server_kind, self._server_address(), self.timeout)
        message = f"{self.name} backend at {self.location or '?'}: {action} failed: {message}"
        return BackendError(redact(message, [self._secret]))

    def _error(self, action: str, exc: BaseException) -> BackendError:
        message = f"{self.name} backend at {self.location or '?'}: {action} failed: {self._explain(exc)}"
        return BackendError(redact(message, [self._secret]))

    async def _failed(self, action: str, exc: BaseException, expired: bool = False) -> BackendError:
        """The error to raise for ``exc``; when the connection is gone (or the
        call timed out: its connection is in an unknown state), the pool is
        discarded too, so the next call connects afresh (no restart needed)."""
        timed_out = expired or isinstance(exc, TimeoutError)
        if timed_out or self._is_connection_lost(exc):
            with contextlib.suppress(Exception):  # the pool is thrown away; nothing to save
                await self.engine.dispose()
        return self._timed_out(action) if timed_out else self._error(action, exc)

    async def _read(self, action: str, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        await self.open()
        async with self._bounded() as expired:
            try:
                async with self.engine.connect() as conn:
                    return await fn(conn)
            except (SQLAlchemyError, OSError) as exc:
                raise await self._failed(action, exc, bool(expired)) from exc

    async def _write_all(self, action: str, fn: Callable[[AsyncConnection], Awaitable[Any]]) -> None:
        """Run ``fn`` in one write transaction not tied to a user (retried on a deadlock)."""
        await self._in_write_transaction(action, fn)

    async def _in_write_transaction(self, action: str, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``fn`` in one write transaction, bounded by the timeout; a deadlock or
        serialisation failure rolls it back whole and runs it again after a short pause."""
        await self.open()
        attempt = 0
        async with self._bounded() as expired:
            while True:
                attempt += 1
                try:
                    async with self._write_engine.begin() as conn:
                        return await fn(conn)
                except (SQLAlchemyError, OSError) as exc:
                    if not expired and attempt < self.max_attempts and self._is_retryable(exc):
                        await asyncio.sleep(0.01 * attempt)
                        continue
                    raise await self._failed(action, exc, bool(expired)) from exc
