"""What backends share: the Store protocol (re-exported from the engine, which
owns it) and the helpers every backend uses for timeouts, locks and vectors.

The protocol and capabilities live in ``memchat.engine.store``: backends
depend on the engine, never the reverse.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
from collections.abc import AsyncIterator, Mapping, Sequence

from memchat.engine.store import Capabilities, Store, Transaction, VectorStore

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_VECTOR_DIMENSION",
    "Capabilities",
    "Store",
    "Transaction",
    "VectorStore",
    "abort_socket",
    "bounded_lock",
    "checked_vector",
    "resolve_dimension",
    "resolve_timeout",
    "timeout_message",
]


#: Seconds a store waits for its server (connecting, each call, a lock wait)
#: before the call fails: every backend's default (``--timeout``, MEMCHAT_TIMEOUT).
DEFAULT_TIMEOUT_S = 10.0


def resolve_timeout(timeout: float | None) -> float:
    """The operation timeout in seconds: ``timeout``, or the 10 s default."""
    from memchat.engine.model import ConfigError

    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ConfigError(f"the timeout must be a positive number of seconds such as 10, not {timeout!r}")
    return float(timeout)


def timeout_message(server: str, address: str, timeout: float) -> str:
    """The one sentence for a server that did not answer in time."""
    return (
        f"the {server} at {address} did not answer within {timeout:g} s "
        "(it is stopped, overloaded or unreachable): check it, or raise --timeout"
    )


def abort_socket(fd: int) -> None:
    """Shut a connected socket down (both ways) without closing its descriptor,
    which stays its owner's: a read pending on it returns end-of-file at once,
    so the driver fails promptly with its own "connection lost" error."""
    with contextlib.suppress(OSError, ValueError):
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


@contextlib.asynccontextmanager
async def bounded_lock(lock: asyncio.Lock, timeout: float, what: str) -> AsyncIterator[None]:
    """Hold ``lock``, waiting at most ``timeout`` seconds for it; ``what`` ends
    the BackendError ("… waited more than 10 s for {what}")."""
    from memchat.engine.model import BackendError

    try:
        async with asyncio.timeout(timeout):
            await lock.acquire()
    except TimeoutError:
        raise BackendError(
            f"waited more than {timeout:g} s for {what}: try again, or raise --timeout"
        ) from None
    try:
        yield
    finally:
        lock.release()


#: The offline embedder's (all-MiniLM-L6-v2) dimension: every vector store's default.
DEFAULT_VECTOR_DIMENSION = 384


def resolve_dimension(dimension: int | None, env: Mapping[str, str], variable: str) -> int:
    """The index dimension: the argument, else ``env[variable]``, else 384."""
    from memchat.engine.model import ConfigError

    if dimension is None and env.get(variable):
        try:
            dimension = int(env[variable])
        except ValueError:
            raise ConfigError(f"{variable} must be a whole number such as 384") from None
    dimension = DEFAULT_VECTOR_DIMENSION if dimension is None else int(dimension)
    if dimension <= 0:
        raise ConfigError("the vector dimension must be a positive number such as 384")
    return dimension


def checked_vector(vector: Sequence[float], dimension: int) -> list[float]:
    """``vector`` as floats, or a BackendError if it has the wrong dimension
    or NaN/infinite values (which would poison every later search)."""
    from memchat.engine.model import BackendError

    values = [float(x) for x in vector]
    if len(values) != dimension:
        raise BackendError(
            f"embedding dimension mismatch: expected {dimension}, got {len(values)}: "
            f"use an embedder with {dimension} dimensions or configure the store for {len(values)}"
        )
    if not all(math.isfinite(x) for x in values):
        raise BackendError("the embedder returned a vector with NaN or infinite values; nothing was stored")
    return values
