"""Redis: memories shared by any number of processes through one server.

Key layout
----------
Every (app, user) owns two hashes of entries (active, tombstones), a hash of
vectors and a version counter, all under one Redis Cluster hash tag; names
are escaped so no two users share a key. ``backends/_redis_layout.py``
describes the keys and the JSON of an entry.

Atomicity
---------
``atomic`` is optimistic: it WATCHes the user's two hashes, runs the work
with a transaction whose reads go to Redis at once (and see the section's own
buffered writes) and whose writes are buffered, then sends the writes in one
MULTI/EXEC. If another client touched either hash in between, EXEC fails
and the whole section runs again (bounded attempts, jittered backoff). A
section that ends in an error still confirms with an empty MULTI/EXEC that
it saw a consistent state, so errors too are decided on a serialisable view.
Within one process a per-user lock queues the sections, so WATCH conflicts
only arise between processes.

Connection
----------
``url`` (or ``REDIS_URL``) takes priority; otherwise ``REDIS_ADDR``
(``host:port``, default ``localhost:6379``) becomes ``redis://<addr>``, as in
the reference's factory. Connection errors retry a few times quickly (which
also replaces a pooled connection a restarted server has dropped), then
become one ``BackendError``; passwords are never shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memchat.engine.model import BackendError, ConfigError, Entry, UserKey, to_micros
from memchat.engine.search.index import KeywordStats
from memchat.engine.secrets import redact
from memchat.engine.vectors import ProgressCallback

from ._cache import DecodeCache
from ._ordering import newest_first
from ._redis_connection import (
    DEFAULT_ADDR,
    ENV_ADDR,
    ENV_URL,
    check_url,
    explain_error,
    mask_url,
    new_client,
    resolve_url,
    server_address,
)
from ._redis_layout import (
    UserKeys,
    decode_entry,
    encode_entry,
    escape_key_part,
    join_prefix,
    keys_of_base,
    missing_vectors,
    user_bases,
    user_keys,
    user_of_base,
)
from ._redis_transaction import RedisTransaction
from ._vectors import MatrixCache, UserMatrix, check_query
from .base import DEFAULT_VECTOR_DIMENSION, Capabilities, bounded_lock, resolve_timeout
from .redis_index import (
    INDEX_META,
    INDEX_VERSION,
    build_every_user,
    index_keys,
    indexed_terms,
    lookup,
    queue_drop,
)

__all__ = [
    "DEFAULT_ADDR",
    "ENV_ADDR",
    "ENV_URL",
    "RedisStore",
    "RedisTransaction",
    "UserKeys",
    "check_url",
    "decode_entry",
    "encode_entry",
    "escape_key_part",
    "join_prefix",
    "mask_url",
    "resolve_url",
    "user_keys",
]

T = TypeVar("T")

#: The client as the store's calls use it: redis-py types a pipeline's queued
#: commands as awaitables of their results, so chained pipelines do not type-check.
Client = Any

ENV_KEY_PREFIX = "REDIS_KEY_PREFIX"
DEFAULT_KEY_PREFIX = "memchat"

#: How often a write section may lose a WATCH race before giving up.
MAX_ATTEMPTS = 64
MAX_BACKOFF = 0.05


# -- the store -------------------------------------------------------------


class RedisStore:
    """Memories in Redis hashes, two per (app, user); see the module docstring."""

    name = "redis"
    capabilities = Capabilities(
        vector_search=True,
        transactions=True,
        persistent=True,
        multi_process=True,
        native_keyword_search=True,
        event_time_lookup=True,
    )
    #: Any dimension fits: the engine sets ``dimension`` to its embedder's.
    fixed_dimension = False

    def __init__(
        self,
        url: str | None = None,
        *,
        key_prefix: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        dimension: int | None = None,
        **client_options: Any,
    ) -> None:
        env = os.environ if env is None else env
        #: The dimension of the vectors written and searched.
        self.dimension = DEFAULT_VECTOR_DIMENSION if dimension is None else int(dimension)
        #: Seconds a call may take (connecting, each command, waiting for this
        #: user's other writers in this process) before it fails.
        self.timeout = resolve_timeout(timeout)
        self._url, self._url_source = resolve_url(url, env)
        self._url_options = check_url(self._url, self._url_source)
        self.location = mask_url(self._url)
        if key_prefix is None:
            key_prefix = env.get(ENV_KEY_PREFIX)
        if key_prefix is None:
            key_prefix = DEFAULT_KEY_PREFIX
        if not isinstance(key_prefix, str) or any(ch in "{}" or not ch.isprintable() for ch in key_prefix):
            raise ConfigError(
                f"invalid Redis key prefix {key_prefix!r}: use printable characters without {{ or }} "
                "(braces would move a user's keys to another cluster slot)"
            )
        self.key_prefix = key_prefix
        self._client_options = client_options
        self._client: aioredis.Redis | None = None
        self._ready = False
        self._locks: weakref.WeakValueDictionary[UserKey, asyncio.Lock] = weakref.WeakValueDictionary()
        self._decoded: DecodeCache[Entry] = DecodeCache()
        self._matrices = MatrixCache()
        #: Told how far building the keyword index on open has got (set by the service).
        self.progress: ProgressCallback | None = None

    # -- plumbing --------------------------------------------------------

    def describe(self) -> str:
        return f"redis ({self.location}, key prefix {self.key_prefix!r})"

    def keys_for(self, key: UserKey) -> UserKeys:
        """The Redis keys holding this user's memories."""
        return user_keys(self.key_prefix, key)

    @property
    def address(self) -> str:
        """``host:port`` (or the socket path) of the server, for messages."""
        return server_address(self._url_options)

    def _new_client(self) -> aioredis.Redis:
        return new_client(self._url, self.timeout, self._client_options)

    def _explain(self, exc: BaseException) -> str:
        """One clear sentence for a driver error; never includes a password."""
        return explain_error(exc, self.address, self.timeout, self._url_options.get("password"))

    def _error(self, action: str, exc: BaseException) -> BackendError:
        message = f"redis backend at {self.location}: {action} failed: {self._explain(exc)}"
        return BackendError(redact(message, [self._url_options.get("password")]))

    async def _discard_client(self) -> None:
        """Drop the client and its pool (after a timeout its connections are
        in an unknown state): the next call connects afresh."""
        client, self._client, self._ready = self._client, None, False
        if client is not None:
            with contextlib.suppress(Exception):  # thrown away: nothing to save
                async with asyncio.timeout(self.timeout):
                    await client.aclose()

    async def _bounded(self, action: str, call: Callable[[], Awaitable[T]], timeout: float = 0.0) -> T:
        """``call()`` within ``timeout`` (default: the store's); its driver errors become one BackendError."""
        try:
            async with asyncio.timeout(max(timeout, self.timeout)):
                return await call()
        except (RedisTimeoutError, TimeoutError) as exc:
            await self._discard_client()
            raise self._error(action, exc) from None
        except (RedisError, OSError) as exc:
            raise self._error(action, exc) from exc

    def _decode(self, raw: str, key: UserKey, memory_id: str) -> Entry:
        try:
            return self._decoded.get((key, raw), lambda: decode_entry(raw, key))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackendError(
                f"redis backend at {self.location}: memory {memory_id} of {self.keys_for(key).active} "
                "is not a memchat entry; remove it or use another key prefix"
            ) from exc

    async def _connected(self) -> aioredis.Redis:
        await self.open()
        assert self._client is not None
        return self._client

    # -- Store -----------------------------------------------------------

    async def open(self) -> None:
        self._client = self._client or self._new_client()
        if self._ready:
            return
        await self._bounded("connecting", self._client.ping)
        self._ready = True
        if await self.read_meta(INDEX_META) != INDEX_VERSION:
            await build_every_user(self)

    async def rebuild_index(self, key: UserKey) -> None:
        """Re-create the user's keyword index in a write section given a second per
        1,000 active memories if that is longer than the timeout (10k: 7.5 s, loaded)."""

        async def rebuild(tx: RedisTransaction) -> None:
            await tx.rebuild_index()

        await self.atomic(key, rebuild, timeout=await self.count(key) / 1000)

    async def close(self) -> None:
        client, self._client, self._ready = self._client, None, False
        if client is not None:
            await client.aclose()

    async def atomic(
        self, key: UserKey, work: Callable[[RedisTransaction], Awaitable[T]], *, timeout: float = 0.0
    ) -> T:
        client = await self._connected()
        keys = self.keys_for(key)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with bounded_lock(lock, self.timeout, "this user's other writes in this process"):
            try:
                result, tx, version = await self._bounded(
                    "writing", lambda: self._section(client, key, keys, work), timeout
                )
            except BaseException:
                self._matrices.drop(key)
                raise
            self._advance_matrix(key, tx, version)
            return result

    def _advance_matrix(self, key: UserKey, tx: RedisTransaction, version: Any) -> None:
        """Bring this process's cached matrix of the user along a committed section
        (its INCR made ``version``; WATCH guarantees ``version - 1`` was the state
        before it), instead of reading every vector at the next search."""
        if version is None:
            return  # nothing written
        changes = tx.matrix_changes()
        if changes is None:
            self._matrices.drop(key)
            return
        upserts, removals = changes
        before = str(int(version) - 1) if int(version) > 1 else None
        self._matrices.advance(
            key, (self.dimension, before), (self.dimension, str(version)), upserts, removals
        )

    async def _section(
        self,
        client: aioredis.Redis,
        key: UserKey,
        keys: UserKeys,
        work: Callable[[RedisTransaction], Awaitable[T]],
    ) -> tuple[T, RedisTransaction, Any]:
        """(the work's result, its transaction, the user's version after it or None)."""
        for attempt in range(MAX_ATTEMPTS):
            async with client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(keys.active, keys.deleted)
                    tx = RedisTransaction(pipe, key, keys, dimension=self.dimension, decode=self._decode)
                    try:
                        result = await work(tx)
                    except RedisError:
                        raise
                    except Exception:
                        # Confirm the error was decided on a consistent view.
                        pipe.multi()
                        await pipe.execute()
                        raise
                    changes = await tx.index_changes()
                    pipe.multi()
                    tx.queue_writes(pipe, changes)
                    replies = await pipe.execute()
                    # queue_writes ends with the version's INCR whenever it wrote.
                    return result, tx, (replies[-1] if tx._writes and replies else None)
                except WatchError:
                    pass  # another client wrote this user: run the section again
                except BaseException:
                    # A timeout or a lost connection: drop the connection, which
                    # ends the WATCH, so leaving the pipeline sends no UNWATCH
                    # to a server that may not answer.
                    if pipe.watching and pipe.connection is not None:
                        pipe.watching = False
                        await pipe.connection.disconnect(nowait=True)
                    raise
            await asyncio.sleep(random.uniform(0, min(MAX_BACKOFF, 0.001 * 2**attempt)))
        raise BackendError(
            f"redis backend at {self.location}: writing failed: other clients kept changing this "
            f"user's memories during {MAX_ATTEMPTS} attempts; try again"
        )

    async def run(self, action: str, fn: Callable[[Client], Awaitable[T]]) -> T:
        """``fn(client)`` within the timeout, its driver errors one BackendError
        (for code that keeps its own keys beside the memories: memchat.sessions)."""
        client = await self._connected()
        return await self._bounded(action, lambda: fn(client))

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        keys = self.keys_for(key)

        async def fetch(client: Client) -> Entry | None:
            async with client.pipeline(transaction=True) as pipe:
                active, deleted = (
                    await pipe.hget(keys.active, memory_id).hget(keys.deleted, memory_id).execute()
                )
            raw = active if active is not None else deleted
            return None if raw is None else self._decode(raw, key, memory_id)

        return await self.run("reading", fetch)

    async def _entries(self, key: UserKey, *, include_deleted: bool) -> list[Entry]:
        keys = self.keys_for(key)

        async def fetch(client: Client) -> list[Entry]:
            if include_deleted:
                async with client.pipeline(transaction=True) as pipe:
                    active, deleted = await pipe.hgetall(keys.active).hgetall(keys.deleted).execute()
                merged = {**deleted, **active}
            else:
                merged = await client.hgetall(keys.active)
            return [self._decode(raw, key, mid) for mid, raw in merged.items()]

        return await self.run("reading", fetch)

    async def _newest(self, key: UserKey, limit: int) -> list[Entry] | None:
        """The ``limit`` newest active memories from the recent set (and every
        memory tied with the last on updated_at, for the full order), or None
        when the set does not match the active hash (then it is rebuilt)."""
        keys = self.keys_for(key)
        recent = index_keys(keys.active).recent

        async def fetch(client: Client) -> list[Entry] | None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hlen(keys.active).zcard(recent).zrevrange(recent, 0, limit - 1, withscores=True)
                size, indexed, top = await pipe.execute()
            if int(size) != int(indexed):
                return None
            if not top:
                return []
            ids = dict.fromkeys(member for member, _ in top)
            last = top[-1][1]
            ids.update(dict.fromkeys(await client.zrangebyscore(recent, last, last)))
            raws = await client.hmget(keys.active, list(ids))
            entries = [self._decode(raw, key, i) for i, raw in zip(ids, raws, strict=True) if raw is not None]
            return newest_first(entries)[:limit] if len(entries) == len(ids) else None

        found = await self.run("reading", fetch)
        if found is None:
            await self.rebuild_index(key)
        return found

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        keys = self.keys_for(key)

        async def fetch(client: Client) -> int:
            if not include_deleted:
                return int(await client.hlen(keys.active))
            async with client.pipeline(transaction=True) as pipe:
                active, deleted = await pipe.hlen(keys.active).hlen(keys.deleted).execute()
            return int(active) + int(deleted)

        return await self.run("counting", fetch)

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        if deleted_at is None:
            keys = self.keys_for(key)

            async def drop(client: Client) -> int:
                names = await indexed_terms(client, index_keys(keys.active))
                async with client.pipeline(transaction=True) as pipe:
                    pipe.hlen(keys.active).delete(keys.active, keys.deleted, keys.vectors)
                    queue_drop(pipe, names)
                    active, *_ = await pipe.incr(keys.version).execute()
                return int(active)

            try:
                return await self.run("clearing", drop)
            finally:
                self._matrices.drop(key)

        async def work(tx: RedisTransaction) -> int:
            active = await tx.active_entries()
            for entry in active:
                await tx.put(replace(entry, deleted_at=deleted_at))
            return len(active)

        return await self.atomic(key, work)

    async def memories_in_periods(
        self, key: UserKey, periods: Sequence[tuple[datetime, datetime]], limit: int
    ) -> list[Entry] | None:
        """The user's active memories in ``periods``: ranges of the event-time set."""
        keys = self.keys_for(key)
        when = index_keys(keys.active).when

        async def fetch(client: Client) -> list[Entry] | None:
            ids: dict[str, None] = {}
            for start, end in periods:
                found = await client.zrangebyscore(
                    when, to_micros(start), f"({to_micros(end)}", start=0, num=limit + 1
                )
                ids.update(dict.fromkeys(found))
                if len(ids) > limit:
                    return None
            if not ids:
                return []
            raws = await client.hmget(keys.active, list(ids))
            return [self._decode(raw, key, i) for i, raw in zip(ids, raws, strict=True) if raw is not None]

        return await self.run("searching", fetch)

    async def keyword_candidates(self, key: UserKey, query: str) -> list[Entry]:
        return await self._entries(key, include_deleted=False)

    async def indexed_keyword_candidates(
        self, key: UserKey, space: str, terms: Sequence[str], planner: Any = None
    ) -> tuple[list[Entry], KeywordStats | None]:
        """The active memories holding one of ``terms`` (with a ``planner``, its
        best-ranked ones: search/candidates.py) and the user's statistics
        (redis_index.py); when the index does not match the memories, every
        active memory and no statistics, and the index is rebuilt."""
        keys = self.keys_for(key)
        index = index_keys(keys.active)

        async def fetch(client: Client) -> tuple[list[Entry], KeywordStats] | None:
            found = await lookup(client, index, keys.active, space, terms, planner)
            if found is None:
                return None
            ids, stats = found
            raws = await client.hmget(keys.active, ids) if ids else []
            entries = [self._decode(raw, key, i) for i, raw in zip(ids, raws, strict=True) if raw is not None]
            return entries, stats

        result = await self.run("searching", fetch)
        if result is not None:
            return result
        await self.rebuild_index(key)
        return await self.keyword_candidates(key, ""), None

    # -- vectors -----------------------------------------------------------

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories with a vector, nearest first,
        ``score`` = cosine similarity (exact, numpy)."""
        if k <= 0:
            return []
        query = check_query(vector, self.dimension)
        keys = self.keys_for(key)

        async def fetch(client: Client) -> list[Entry]:
            # The version first: a write after it is seen at the next search.
            signature = (self.dimension, await client.get(keys.version))
            matrix = self._matrices.get(key, signature)
            if matrix is None:
                active = set(await client.hkeys(keys.active))
                raw = await client.execute_command("HGETALL", keys.vectors, NEVER_DECODE=True)
                pairs = ((mid.decode(), blob) for mid, blob in (raw or {}).items())
                matrix = UserMatrix.from_blobs(((m, b) for m, b in pairs if m in active), self.dimension)
                self._matrices.put(key, signature, matrix)
            best = await matrix.nearest_soon(query, k)
            if not best:
                return []
            values = await client.hmget(keys.active, [mid for mid, _ in best])
            return [
                self._decode(value, key, mid).with_score(score)
                for (mid, score), value in zip(best, values, strict=True)
                if value is not None
            ]

        return await self.run("searching", fetch)

    # -- export and migration (memchat.engine.portability) -------------------

    async def users(self) -> list[UserKey]:
        async def fetch(client: Client) -> list[UserKey]:
            return [user_of_base(base) for base in await user_bases(client, self.key_prefix)]

        found = await self.run("reading the users", fetch)
        return sorted(found, key=lambda k: (k.app, k.user))

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        keys = self.keys_for(key)
        wanted = list(ids)

        async def fetch(client: Client) -> dict[str, list[float]]:
            import numpy as np

            blobs = await client.execute_command("HMGET", keys.vectors, *wanted, NEVER_DECODE=True)
            width = self.dimension * 4
            return {
                mid: np.frombuffer(blob, dtype="<f4").astype(float).tolist()
                for mid, blob in zip(wanted, blobs or [], strict=False)
                if blob is not None and len(blob) == width
            }

        return await self.run("reading the vectors", fetch)

    # -- embedder bookkeeping (memchat.engine.vectors) ------------------------

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        """Entries of any user, tombstones included, that have no vector (at
        most ``limit``; ``<= 0``: all)."""

        async def fetch(client: Client) -> list[Entry]:
            found: list[Entry] = []
            for base in await user_bases(client, self.key_prefix):
                keys, missing = await missing_vectors(client, base)
                if limit > 0:
                    missing = missing[: limit - len(found)]
                if not missing:
                    continue
                async with client.pipeline(transaction=True) as pipe:
                    pipe.hmget(keys.active, missing).hmget(keys.deleted, missing)
                    active, deleted = await pipe.execute()
                for mid, one, other in zip(missing, active, deleted, strict=True):
                    raw = one if one is not None else other
                    if raw is not None:
                        found.append(self._decode_any(raw, base, mid))
                if 0 < limit <= len(found):
                    break
            return found

        return await self.run("reading", fetch)

    def _decode_any(self, raw: str, base: str, memory_id: str) -> Entry:
        """An entry read outside its user's scope: the scope is the one it names."""
        try:
            data = json.loads(raw)
            key = UserKey(str(data["app_name"]), str(data["user_id"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendError(
                f"redis backend at {self.location}: memory {memory_id} of {base} "
                "is not a memchat entry; remove it or use another key prefix"
            ) from exc
        return self._decode(raw, key, memory_id)

    async def count_missing_vectors(self) -> int:
        async def count(client: Client) -> int:
            total = 0
            for base in await user_bases(client, self.key_prefix):
                total += len((await missing_vectors(client, base))[1])
            return total

        return await self.run("counting", count)

    async def clear_vectors(self) -> None:
        """Forget every stored vector (any user): the embedder changed."""

        async def clear(client: Client) -> None:
            for base in await user_bases(client, self.key_prefix):
                keys = keys_of_base(base)
                async with client.pipeline(transaction=True) as pipe:
                    await pipe.delete(keys.vectors).incr(keys.version).execute()

        await self.run("forgetting the old vectors", clear)
        self._matrices.clear()

    @property
    def _meta_key(self) -> str:
        return f"{join_prefix(self.key_prefix)}meta"

    async def read_meta(self, name: str) -> str | None:
        return await self.run("reading", lambda client: client.hget(self._meta_key, name))

    async def write_meta(self, name: str, value: str) -> None:
        await self.run("writing", lambda client: client.hset(self._meta_key, name, value))

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        if limit > 0 and not include_deleted:
            newest = await self._newest(key, limit)
            if newest is not None:
                return newest
        entries = newest_first(await self._entries(key, include_deleted=include_deleted))
        return entries[:limit] if limit > 0 else entries
