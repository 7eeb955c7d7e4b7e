"""Redis: memories shared by any number of processes through one server.

Key layout
----------
Every (app, user) owns two hashes of entries, a hash of vectors and a
version counter, all carrying one Redis Cluster hash tag ``{…}`` so that all
of a user's keys live in one slot (a WATCH / MULTI over them is legal on a
cluster)::

    <prefix>:mem:{<app>:<user>}            active entries    field = memory id
    <prefix>:mem:{<app>:<user>}:deleted    tombstones        field = memory id
    <prefix>:mem:{<app>:<user>}:vec        embeddings        field = memory id, value = float32 bytes
    <prefix>:mem:{<app>:<user>}:version    bumped by every write of the user
    <prefix>:mem:{<app>:<user>}:kw:…       keyword search's inverted index (redis_index.py)

A vector is written in the same MULTI/EXEC as its entry; a tombstone keeps
its vector (for restore). ``vector_candidates`` ranks the user's vectors
exactly in numpy over a per-user matrix cached in the process while the
version counter is unchanged (so another process's writes are seen at the
next search). ``<prefix>:meta`` is a hash of store records (``read_meta``).

The value of a field is the entry as JSON: ``id``, ``app_name``, ``user_id``,
``memory`` (``memory`` text, ``topics``, ``kind``, ``event_time``,
``participants``, ``location``), ``created_at``, ``updated_at`` and
``deleted_at``, times as ISO 8601 UTC strings with microseconds. Counting the
active memories is ``HLEN`` of the first hash; nothing ever scans keys.

``<app>`` and ``<user>`` are percent-encoded (UTF-8 bytes, ``%XX``) wherever
they hold ``%``, ``:``, ``{``, ``}``, a glob character (``* ? [ ] \\``), a
space, or any non-printable character. The reference spells the key
``mem:{app:user}`` raw, where app ``"a:b"`` + user ``"c"`` and app ``"a"`` +
user ``"b:c"`` share one key; with the escaping the mapping is injective, the
only ``{``/``}`` in a key are the tag's own, and a KEYS/SCAN pattern built
from one user's key can match no other user's keys. Plain names (letters,
digits, ``-``, ``_``, ``.``, non-ASCII letters) are kept as they are, so the
keys stay readable in ``redis-cli``.

The prefix is ``key_prefix`` (or ``REDIS_KEY_PREFIX``; default
``"memchat"``); no second colon is added when it already ends with ``:``, and
an empty prefix gives the reference's bare ``mem:{app:user}``.

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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    AuthenticationError,
    NoPermissionError,
    ReadOnlyError,
    RedisError,
    WatchError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memchat.engine.model import BackendError, ConfigError, Entry, Memory, UserKey, to_micros, utc
from memchat.engine.search.index import KeywordStats
from memchat.engine.secrets import redact

from ._cache import DecodeCache
from ._ordering import newest_first
from ._vectors import MatrixCache, UserMatrix, check_query, encode_vector
from .base import DEFAULT_VECTOR_DIMENSION, Capabilities, bounded_lock, resolve_timeout, timeout_message
from .redis_index import index_keys, indexed_terms, lookup, queue_drop, queue_replace, record_of

T = TypeVar("T")

ENV_URL = "REDIS_URL"
ENV_ADDR = "REDIS_ADDR"
ENV_KEY_PREFIX = "REDIS_KEY_PREFIX"
DEFAULT_ADDR = "localhost:6379"
DEFAULT_KEY_PREFIX = "memchat"

#: How often a write section may lose a WATCH race before giving up.
MAX_ATTEMPTS = 64
MAX_BACKOFF = 0.05

_SCHEMES = ("redis", "rediss", "unix")
_ESCAPED = frozenset("%:{}*?[]\\ ")
_FIX = f"start Redis or set {ENV_URL}/{ENV_ADDR}"


# -- keys ------------------------------------------------------------------


def escape_key_part(text: str) -> str:
    """Percent-encode the characters that could break a key's structure."""
    out: list[str] = []
    for ch in text:
        if ch in _ESCAPED or not ch.isprintable():
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def join_prefix(prefix: str) -> str:
    """``"memchat"`` → ``"memchat:"``; ``"a:"`` stays; ``""`` stays empty."""
    return prefix if not prefix or prefix.endswith(":") else prefix + ":"


@dataclass(frozen=True, slots=True)
class UserKeys:
    """The Redis keys of one (app, user)."""

    active: str
    deleted: str
    vectors: str
    version: str


def user_keys(prefix: str, key: UserKey) -> UserKeys:
    base = f"{join_prefix(prefix)}mem:{{{escape_key_part(key.app)}:{escape_key_part(key.user)}}}"
    return _keys_of_base(base)


def _keys_of_base(base: str) -> UserKeys:
    return UserKeys(active=base, deleted=base + ":deleted", vectors=base + ":vec", version=base + ":version")


def _user_of_base(base: str) -> UserKey:
    """The (app, user) a base key ``…mem:{<app>:<user>}`` names (``escape_key_part``
    reversed: the escaped parts hold no raw ``:``, ``{`` or ``}``)."""
    from urllib.parse import unquote

    inner = base[base.rindex("{") + 1 : -1]
    app, _, user = inner.partition(":")
    return UserKey(unquote(app, errors="surrogatepass"), unquote(user, errors="surrogatepass"))


def glob_escape(text: str) -> str:
    """``text`` as a literal in a KEYS/SCAN pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


# -- configuration ---------------------------------------------------------


def resolve_url(url: str | None = None, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The URL to connect to and where it came from (for error messages):
    ``url``, then ``REDIS_URL``, then ``redis://`` + ``REDIS_ADDR``."""
    env = os.environ if env is None else env
    if url and url.strip():
        return url.strip(), "the url option"
    if (env.get(ENV_URL) or "").strip():
        return env[ENV_URL].strip(), ENV_URL
    addr = (env.get(ENV_ADDR) or "").strip() or DEFAULT_ADDR
    # Lenient: a full URL in REDIS_ADDR is taken as it is.
    return (addr if "://" in addr else f"redis://{addr}"), ENV_ADDR


def check_url(url: str, source: str = "the url option") -> dict[str, Any]:
    """Parse ``url`` as redis-py would; a malformed one is one ``ConfigError``
    that never repeats the URL (it may hold a password)."""

    def bad(reason: str) -> ConfigError:
        form = "host:port" if source == ENV_ADDR else "redis://[:password@]host:port/db"
        return ConfigError(f"invalid Redis address in {source}: {reason}; write it as {form}")

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise bad("it cannot be parsed (check the brackets around an IPv6 address)") from exc
    if parts.scheme not in _SCHEMES:
        raise bad("it must start with redis://, rediss:// or unix://")
    try:
        parts.port  # noqa: B018 - raises on a non-numeric or out-of-range port
    except ValueError as exc:
        raise bad(
            "the port is not a number from 0 to 65535 (percent-encode any / # ? @ : in the password)"
        ) from exc
    if parts.scheme != "unix":
        db = parts.path.strip("/")
        if db and not db.isdigit():
            raise bad("the database after the last / must be a number")
    from redis.asyncio.connection import parse_url

    try:
        return parse_url(url)
    except ValueError as exc:
        raise bad("redis-py cannot use it") from exc


def mask_url(url: str) -> str:
    """``redis://:secret@h:1/2`` → ``redis://:***@h:1/2``: for people, never a password."""
    try:
        opts = check_url(url)
    except ConfigError:
        return "(invalid Redis URL)"
    scheme = urlsplit(url).scheme
    db = int(opts.get("db") or 0)
    if scheme == "unix":
        user = f"{opts['username']}@" if opts.get("username") else ""
        secret = "&password=***" if opts.get("password") else ""
        return f"unix://{user}{opts.get('path', '')}?db={db}{secret}"
    auth = ""
    if opts.get("username") or opts.get("password"):
        auth = (opts.get("username") or "") + (":***" if opts.get("password") else "") + "@"
    host = opts.get("host") or "localhost"
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{auth}{host}:{opts.get('port') or 6379}/{db}"


# -- values ----------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    return None if value is None else utc(value).isoformat(timespec="microseconds")


def _parse_time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):  # microseconds since the epoch
        seconds, micros = divmod(int(value), 1_000_000)
        return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)
    return utc(datetime.fromisoformat(str(value).replace("Z", "+00:00")))


def encode_entry(entry: Entry) -> str:
    m = entry.memory
    return json.dumps(
        {
            "id": entry.id,
            "app_name": entry.app,
            "user_id": entry.user,
            "memory": {
                "memory": m.text,
                "topics": list(m.topics),
                "kind": m.kind,
                "event_time": _time(m.event_time),
                "participants": list(m.participants),
                "location": m.location,
            },
            "created_at": _time(entry.created_at),
            "updated_at": _time(entry.updated_at),
            "deleted_at": _time(entry.deleted_at),
        },
        separators=(",", ":"),
    )


def decode_entry(raw: str, key: UserKey) -> Entry:
    """An entry from its JSON; the scope is the key it was read under."""
    data = json.loads(raw)
    m = data.get("memory") or {}
    memory = Memory(
        text=m.get("memory", ""),
        topics=tuple(m.get("topics") or ()),
        kind=m.get("kind") or "fact",
        event_time=_parse_time(m.get("event_time")),
        participants=tuple(m.get("participants") or ()),
        location=m.get("location") or "",
    )
    created = _parse_time(data.get("created_at"))
    updated = _parse_time(data.get("updated_at")) or created
    return Entry(
        id=data["id"],
        app=key.app,
        user=key.user,
        memory=memory,
        created_at=created or updated,
        updated_at=updated,
        deleted_at=_parse_time(data.get("deleted_at")),
    )


# -- the store -------------------------------------------------------------


class _RedisTransaction:
    """Reads go to Redis at once (under WATCH) and see the section's own
    writes; writes are buffered until the section's MULTI/EXEC."""

    def __init__(self, store: RedisStore, pipe: Any, key: UserKey, keys: UserKeys) -> None:
        self._store, self._pipe, self._key, self._keys = store, pipe, key, keys
        self._writes: dict[str, Entry | None] = {}
        #: memory ID → new vector bytes, or None: drop the stored one.
        self._vectors: dict[str, bytes | None] = {}
        #: Whether an ID was found in the active hash when it was read.
        self._was_active: dict[str, bool] = {}
        #: The stored entry of each ID read (before this section's writes).
        self._previous: dict[str, Entry | None] = {}
        #: Set by ``rebuild_index``: (the terms of the index to drop, the active entries to index).
        self._rebuild: tuple[list[str], list[Entry]] | None = None

    async def _stored(self, memory_id: str) -> Entry | None:
        raw = await self._pipe.hget(self._keys.active, memory_id)
        self._was_active[memory_id] = raw is not None
        if raw is None:
            raw = await self._pipe.hget(self._keys.deleted, memory_id)
        entry = None if raw is None else self._store._decode(raw, self._key, memory_id)
        self._previous.setdefault(memory_id, entry)
        return entry

    async def get(self, memory_id: str) -> Entry | None:
        if memory_id in self._writes:
            return self._writes[memory_id]
        return await self._stored(memory_id)

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        if entry.app != self._key.app or entry.user != self._key.user:
            raise ValueError("an entry can only be written inside its own user's section")
        if vector is not None:
            self._vectors[entry.id] = encode_vector(vector, self._store.dimension)
        elif entry.id in self._writes and self._writes[entry.id] is None:
            self._vectors[entry.id] = None  # removed earlier in this section: nothing to keep
        self._writes[entry.id] = entry

    async def remove(self, memory_id: str) -> None:
        self._writes[memory_id] = None
        self._vectors[memory_id] = None

    async def count_active(self) -> int:
        count = int(await self._pipe.hlen(self._keys.active))
        for memory_id, entry in self._writes.items():
            if memory_id not in self._was_active:
                self._was_active[memory_id] = bool(await self._pipe.hexists(self._keys.active, memory_id))
            now_active = entry is not None and not entry.is_deleted
            count += int(now_active) - int(self._was_active[memory_id])
        return count

    async def active_entries(self) -> list[Entry]:
        """Every active entry as the section sees it (for ``clear``)."""
        stored = await self._pipe.hgetall(self._keys.active)
        entries = {mid: self._store._decode(raw, self._key, mid) for mid, raw in stored.items()}
        for mid in stored:
            self._was_active[mid] = True
        for mid, entry in self._writes.items():
            entries[mid] = entry  # type: ignore[assignment]
        return [e for e in entries.values() if e is not None and not e.is_deleted]

    async def index_changes(self) -> list[tuple[str, Any, Any]]:
        """(memory ID, index record before, after) of every write: read now, under
        WATCH, whatever the section did not read itself."""
        changes = []
        for memory_id, entry in self._writes.items():
            if memory_id not in self._previous:
                await self._stored(memory_id)
            before = self._previous[memory_id] if self._was_active.get(memory_id) else None
            changes.append((memory_id, record_of(before), record_of(entry)))
        return changes

    async def rebuild_index(self) -> None:
        """Make the section re-create the user's keyword index from its active entries."""
        names = await indexed_terms(self._pipe, index_keys(self._keys.active))
        self._rebuild = (names, await self.active_entries())

    def matrix_changes(self) -> tuple[dict[str, Any], set[str]] | None:
        """(ID → new vector, IDs gone) of the user's active vectors, or None when a
        write brings back a vector not in hand (a restore without a new one)."""
        import numpy as np

        upserts: dict[str, Any] = {}
        removals: set[str] = set()
        for memory_id, entry in self._writes.items():
            blob = self._vectors.get(memory_id)
            if entry is None or entry.is_deleted:
                removals.add(memory_id)
            elif blob is not None:
                upserts[memory_id] = np.frombuffer(blob, dtype="<f4")
            elif not self._was_active.get(memory_id) and self._previous.get(memory_id) is not None:
                return None
        return upserts, removals

    def queue_writes(self, pipe: Any, index_changes: Sequence[tuple[str, Any, Any]] = ()) -> None:
        index = index_keys(self._keys.active)
        if self._rebuild is not None:
            names, entries = self._rebuild
            queue_drop(pipe, names)
            for entry in entries:
                queue_replace(pipe, index, entry.id, None, record_of(entry))
            for start in range(0, len(entries), 1000):
                chunk = entries[start : start + 1000]
                pipe.zadd(index.recent, {e.id: to_micros(e.updated_at) for e in chunk})
        for memory_id, before, after in index_changes:
            queue_replace(pipe, index, memory_id, before, after)
        for memory_id, entry in self._writes.items():
            if entry is None:
                pipe.hdel(self._keys.active, memory_id)
                pipe.hdel(self._keys.deleted, memory_id)
                pipe.zrem(index.recent, memory_id)
            elif entry.is_deleted:
                pipe.hset(self._keys.deleted, memory_id, encode_entry(entry))
                pipe.hdel(self._keys.active, memory_id)
                pipe.zrem(index.recent, memory_id)
            else:
                pipe.hset(self._keys.active, memory_id, encode_entry(entry))
                pipe.hdel(self._keys.deleted, memory_id)
                pipe.zadd(index.recent, {memory_id: to_micros(entry.updated_at)})
        for memory_id, blob in self._vectors.items():
            if blob is None:
                pipe.hdel(self._keys.vectors, memory_id)
            else:
                pipe.hset(self._keys.vectors, memory_id, blob)
        if self._writes:
            pipe.incr(self._keys.version)


class RedisStore:
    """Memories in Redis hashes, two per (app, user); see the module docstring."""

    name = "redis"
    capabilities = Capabilities(
        vector_search=True, transactions=True, persistent=True, multi_process=True, native_keyword_search=True
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

    # -- plumbing --------------------------------------------------------

    def describe(self) -> str:
        return f"redis ({self.location}, key prefix {self.key_prefix!r})"

    def keys_for(self, key: UserKey) -> UserKeys:
        """The Redis keys holding this user's memories."""
        return user_keys(self.key_prefix, key)

    @property
    def address(self) -> str:
        """``host:port`` (or the socket path) of the server, for messages."""
        opts = self._url_options
        if opts.get("path"):
            return str(opts["path"])
        host = opts.get("host") or "localhost"
        return f"[{host}]:{opts.get('port') or 6379}" if ":" in host else f"{host}:{opts.get('port') or 6379}"

    def _new_client(self) -> aioredis.Redis:
        options: dict[str, Any] = {
            "socket_connect_timeout": self.timeout,
            "socket_timeout": self.timeout,
            # A few quick retries on a dropped connection: a pooled connection
            # that a restarted server closed is replaced instead of failing the
            # call. Timeouts are not retried: a hung server fails in the timeout.
            "retry": Retry(
                ExponentialWithJitterBackoff(base=0.02, cap=0.25),
                retries=3,
                supported_errors=(RedisConnectionError,),
            ),
            **self._client_options,
        }
        options.update(decode_responses=True, encoding="utf-8", encoding_errors="surrogatepass")
        return aioredis.Redis.from_url(self._url, **options)

    def _explain(self, exc: BaseException) -> str:
        """One clear sentence for a driver error; never includes a password."""
        lines = str(exc).strip().splitlines()
        text = redact(lines[0].strip(), [self._url_options.get("password")]) if lines else type(exc).__name__
        status = str(getattr(exc, "status_code", "") or "")
        if isinstance(exc, AuthenticationError) or status in ("NOAUTH", "WRONGPASS"):
            if status == "NOAUTH" or "NOAUTH" in text or "authenticated" in text.lower():
                return (
                    "the server requires a password and none was given: "
                    f"put it in {ENV_URL} as redis://:PASSWORD@host:port/db"
                )
            if "without any password" in text or "no password is set" in text:
                return f"a password was given but the server has none configured: remove it from {ENV_URL}"
            return f"the server rejected the user name or password: correct them in {ENV_URL}"
        if isinstance(exc, NoPermissionError):
            return (
                f"the Redis user may not run a command memchat needs ({text}): allow "
                "PING, GET, INCR, SCAN, HGET, HMGET, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSET, HDEL, "
                "DEL, WATCH, MULTI and EXEC"
            )
        if isinstance(exc, ReadOnlyError):
            return f"the server is a read-only replica: point {ENV_URL} at the primary"
        if isinstance(exc, RedisTimeoutError | TimeoutError):
            return timeout_message("Redis server", self.address, self.timeout)
        if isinstance(exc, RedisConnectionError | OSError):
            if "refused" in text.lower() or "connect call failed" in text.lower():
                return f"the server refused the connection (nothing listens there); {_FIX}"
            return f"cannot reach the server ({text.rstrip('.')}); {_FIX}"
        return text

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

    async def _bounded(self, action: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call()`` within ``timeout``; its driver errors become one BackendError."""
        try:
            async with asyncio.timeout(self.timeout):
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
        if self._client is None:
            self._client = self._new_client()
        if self._ready:
            return
        await self._bounded("connecting", self._client.ping)
        self._ready = True

    async def close(self) -> None:
        client, self._client, self._ready = self._client, None, False
        if client is not None:
            await client.aclose()

    async def atomic(self, key: UserKey, work: Callable[[_RedisTransaction], Awaitable[T]]) -> T:
        client = await self._connected()
        keys = self.keys_for(key)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with bounded_lock(lock, self.timeout, "this user's other writes in this process"):
            try:
                result, tx, version = await self._bounded(
                    "writing", lambda: self._section(client, key, keys, work)
                )
            except BaseException:
                self._matrices.drop(key)
                raise
            self._advance_matrix(key, tx, version)
            return result

    def _advance_matrix(self, key: UserKey, tx: _RedisTransaction, version: Any) -> None:
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
        work: Callable[[_RedisTransaction], Awaitable[T]],
    ) -> tuple[T, _RedisTransaction, Any]:
        """(the work's result, its transaction, the user's version after it or None)."""
        for attempt in range(MAX_ATTEMPTS):
            async with client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(keys.active, keys.deleted)
                    tx = _RedisTransaction(self, pipe, key, keys)
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

    async def _run(self, action: str, fn: Callable[[aioredis.Redis], Awaitable[T]]) -> T:
        client = await self._connected()
        return await self._bounded(action, lambda: fn(client))

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        keys = self.keys_for(key)

        async def fetch(client: aioredis.Redis) -> Entry | None:
            async with client.pipeline(transaction=True) as pipe:
                active, deleted = (
                    await pipe.hget(keys.active, memory_id).hget(keys.deleted, memory_id).execute()
                )
            raw = active if active is not None else deleted
            return None if raw is None else self._decode(raw, key, memory_id)

        return await self._run("reading", fetch)

    async def _entries(self, key: UserKey, *, include_deleted: bool) -> list[Entry]:
        keys = self.keys_for(key)

        async def fetch(client: aioredis.Redis) -> list[Entry]:
            if include_deleted:
                async with client.pipeline(transaction=True) as pipe:
                    active, deleted = await pipe.hgetall(keys.active).hgetall(keys.deleted).execute()
                merged = {**deleted, **active}
            else:
                merged = await client.hgetall(keys.active)
            return [self._decode(raw, key, mid) for mid, raw in merged.items()]

        return await self._run("reading", fetch)

    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        if limit > 0 and not include_deleted:
            newest = await self._newest(key, limit)
            if newest is not None:
                return newest
        entries = newest_first(await self._entries(key, include_deleted=include_deleted))
        return entries[:limit] if limit > 0 else entries

    async def _newest(self, key: UserKey, limit: int) -> list[Entry] | None:
        """The ``limit`` newest active memories from the recent set (and every
        memory tied with the last on updated_at, for the full order), or None
        when the set does not match the active hash (then it is rebuilt)."""
        keys = self.keys_for(key)
        recent = index_keys(keys.active).recent

        async def fetch(client: aioredis.Redis) -> list[Entry] | None:
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

        found = await self._run("reading", fetch)
        if found is None:

            async def rebuild(tx: _RedisTransaction) -> None:
                await tx.rebuild_index()

            await self.atomic(key, rebuild)
        return found

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        keys = self.keys_for(key)

        async def fetch(client: aioredis.Redis) -> int:
            if not include_deleted:
                return int(await client.hlen(keys.active))
            async with client.pipeline(transaction=True) as pipe:
                active, deleted = await pipe.hlen(keys.active).hlen(keys.deleted).execute()
            return int(active) + int(deleted)

        return await self._run("counting", fetch)

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        if deleted_at is None:
            keys = self.keys_for(key)

            async def drop(client: aioredis.Redis) -> int:
                names = await indexed_terms(client, index_keys(keys.active))
                async with client.pipeline(transaction=True) as pipe:
                    pipe.hlen(keys.active).delete(keys.active, keys.deleted, keys.vectors)
                    queue_drop(pipe, names)
                    active, *_ = await pipe.incr(keys.version).execute()
                return int(active)

            try:
                return await self._run("clearing", drop)
            finally:
                self._matrices.drop(key)

        async def work(tx: _RedisTransaction) -> int:
            active = await tx.active_entries()
            for entry in active:
                await tx.put(replace(entry, deleted_at=deleted_at))
            return len(active)

        return await self.atomic(key, work)

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

        async def fetch(client: aioredis.Redis) -> tuple[list[Entry], KeywordStats] | None:
            found = await lookup(client, index, keys.active, space, terms, planner)
            if found is None:
                return None
            ids, stats = found
            raws = await client.hmget(keys.active, ids) if ids else []
            entries = [self._decode(raw, key, i) for i, raw in zip(ids, raws, strict=True) if raw is not None]
            return entries, stats

        result = await self._run("searching", fetch)
        if result is not None:
            return result

        async def rebuild(tx: _RedisTransaction) -> None:
            await tx.rebuild_index()

        await self.atomic(key, rebuild)
        return await self.keyword_candidates(key, ""), None

    # -- vectors -----------------------------------------------------------

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories with a vector, nearest first,
        ``score`` = cosine similarity (exact, numpy)."""
        if k <= 0:
            return []
        query = check_query(vector, self.dimension)
        keys = self.keys_for(key)

        async def fetch(client: aioredis.Redis) -> list[Entry]:
            # The version first: a write after it is seen at the next search.
            signature = (self.dimension, await client.get(keys.version))
            matrix = self._matrices.get(key, signature)
            if matrix is None:
                active = set(await client.hkeys(keys.active))
                raw = await client.execute_command("HGETALL", keys.vectors, NEVER_DECODE=True)
                pairs = ((mid.decode(), blob) for mid, blob in (raw or {}).items())
                matrix = UserMatrix.from_blobs(((m, b) for m, b in pairs if m in active), self.dimension)
                self._matrices.put(key, signature, matrix)
            best = matrix.nearest(query, k)
            if not best:
                return []
            values = await client.hmget(keys.active, [mid for mid, _ in best])
            return [
                self._decode(value, key, mid).with_score(score)
                for (mid, score), value in zip(best, values, strict=True)
                if value is not None
            ]

        return await self._run("searching", fetch)

    # -- export and migration (memchat.engine.portability) -------------------

    async def users(self) -> list[UserKey]:
        async def fetch(client: aioredis.Redis) -> list[UserKey]:
            return [_user_of_base(base) for base in await self._user_bases(client)]

        found = await self._run("reading the users", fetch)
        return sorted(found, key=lambda k: (k.app, k.user))

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        keys = self.keys_for(key)
        wanted = list(ids)

        async def fetch(client: aioredis.Redis) -> dict[str, list[float]]:
            import numpy as np

            blobs = await client.execute_command("HMGET", keys.vectors, *wanted, NEVER_DECODE=True)
            width = self.dimension * 4
            return {
                mid: np.frombuffer(blob, dtype="<f4").astype(float).tolist()
                for mid, blob in zip(wanted, blobs or [], strict=False)
                if blob is not None and len(blob) == width
            }

        return await self._run("reading the vectors", fetch)

    # -- embedder bookkeeping (memchat.engine.vectors) ------------------------

    async def _user_bases(self, client: aioredis.Redis) -> list[str]:
        """The base key of every user with entries under this prefix, sorted."""
        pattern = glob_escape(f"{join_prefix(self.key_prefix)}mem:") + "{*"
        bases: set[str] = set()
        async for name in client.scan_iter(match=pattern, count=1000):
            base, brace, rest = name.rpartition("}")
            if brace and rest in ("", ":deleted"):
                bases.add(base + brace)
        return sorted(bases)

    async def _missing_in(self, client: aioredis.Redis, base: str) -> tuple[UserKeys, list[str]]:
        keys = _keys_of_base(base)
        async with client.pipeline(transaction=True) as pipe:
            pipe.hkeys(keys.active).hkeys(keys.deleted).hkeys(keys.vectors)
            active, deleted, embedded = await pipe.execute()
        have = set(embedded)
        return keys, sorted(m for m in {*active, *deleted} if m not in have)

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        """Entries of any user, tombstones included, that have no vector (at
        most ``limit``; ``<= 0``: all)."""

        async def fetch(client: aioredis.Redis) -> list[Entry]:
            found: list[Entry] = []
            for base in await self._user_bases(client):
                keys, missing = await self._missing_in(client, base)
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

        return await self._run("reading", fetch)

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
        async def count(client: aioredis.Redis) -> int:
            total = 0
            for base in await self._user_bases(client):
                total += len((await self._missing_in(client, base))[1])
            return total

        return await self._run("counting", count)

    async def clear_vectors(self) -> None:
        """Forget every stored vector (any user): the embedder changed."""

        async def clear(client: aioredis.Redis) -> None:
            for base in await self._user_bases(client):
                keys = _keys_of_base(base)
                async with client.pipeline(transaction=True) as pipe:
                    await pipe.delete(keys.vectors).incr(keys.version).execute()

        await self._run("forgetting the old vectors", clear)
        self._matrices.clear()

    @property
    def _meta_key(self) -> str:
        return f"{join_prefix(self.key_prefix)}meta"

    async def read_meta(self, name: str) -> str | None:
        return await self._run("reading", lambda client: client.hget(self._meta_key, name))

    async def write_meta(self, name: str, value: str) -> None:
        await self._run("writing", lambda client: client.hset(self._meta_key, name, value))
