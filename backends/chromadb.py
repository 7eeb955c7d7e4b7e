"""ChromaDB: a Chroma server over HTTP, or an embedded persistent Chroma.

Where: the ``url`` argument or ``CHROMA_BASE_URL`` (a Chroma server,
``http://localhost:8000``); without one, an embedded Chroma in ``path`` or
``CHROMA_PATH`` (default: ``chroma/`` in the user data directory). The
collection is ``CHROMA_COLLECTION`` (default ``memories``), in
``CHROMA_TENANT`` / ``CHROMA_DATABASE`` (default ``default_tenant`` /
``default_database``; with an API key and neither set, the server's identity
decides). ``CHROMA_API_KEY`` is sent as ``X-Chroma-Token``,
``CHROMA_BEARER_TOKEN`` as ``Authorization: Bearer``; credentials go only over
https, or plain http to a loopback address.

Records (reference §4.11, times in microseconds): the document is the memory
text, the embedding is the one the engine computed (never Chroma's embedding
function), the metadata holds app, user, memory ID, kind, event time,
topics, participants, location, created/updated/deleted times (``deleted_at_us
= 0``: active) and whether the embedding is real. The record ID is a hash of
(app, user, memory ID), so users can never collide. The collection uses the
cosine space; its metadata records the dimension, and opening it with another
dimension is one BackendError naming both.

Chroma has no transactions. ``atomic`` holds a per-user lock (256 stripes, per
event loop, shared by every store object on the same collection in this
process), runs ``work`` against a buffer (reads see the section's own writes),
and only when ``work`` returns applies the writes: one upsert, then the
removals, then reads them back to verify. A failing ``work`` changes nothing.
The lock does not reach other processes, so the store declares
``multi_process=False``: one process per collection. The Chroma client is
synchronous; every call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import os
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import chromadb
import chromadb.errors
from chromadb.config import Settings

from memchat.engine.model import (
    BackendError,
    ConfigError,
    Entry,
    Memory,
    UserKey,
    from_micros,
    to_micros,
)
from memchat.engine.secrets import redact

from .base import Capabilities, bounded_lock, checked_vector, resolve_timeout, timeout_message

T = TypeVar("T")

ENV_URL = "CHROMA_BASE_URL"
ENV_PATH = "CHROMA_PATH"
ENV_COLLECTION = "CHROMA_COLLECTION"
ENV_TENANT = "CHROMA_TENANT"
ENV_DATABASE = "CHROMA_DATABASE"
ENV_API_KEY = "CHROMA_API_KEY"
ENV_BEARER_TOKEN = "CHROMA_BEARER_TOKEN"

DEFAULT_COLLECTION = "memories"
DEFAULT_TENANT = "default_tenant"
DEFAULT_DATABASE = "default_database"
#: The offline MiniLM embedder's dimension.
DEFAULT_DIMENSION = 384
SCHEMA_VERSION = 1
#: Collection metadata keys.
MARK_BACKEND, MARK_SCHEMA, MARK_DIMENSION = "memchat_backend", "memchat_schema_version", "memchat_dimension"
#: Prefix of the metadata keys holding ``write_meta`` records.
MARK_META = "memchat_meta_"
#: Records read per request, and written per request at most.
PAGE_SIZE = 500
#: A backstop for opening (the embedded store's first start is slow); every
#: HTTP request is bounded by the store's timeout.
OPEN_TIMEOUT_S = 60.0
LOCK_STRIPES = 256

_COLLECTION_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")


def default_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memchat", appauthor=False) / "chroma"


def validate_collection_name(name: str) -> str:
    """Chroma's rule: 3–512 of ``[a-zA-Z0-9._-]``, starting and ending with a
    letter or digit, no ``..``, not an IPv4 address."""
    ok = isinstance(name, str) and _COLLECTION_NAME.fullmatch(name) and ".." not in name
    if ok:
        try:
            ipaddress.IPv4Address(name)
            ok = False
        except ValueError:
            pass
    if not ok:
        raise ConfigError(
            f"invalid Chroma collection name {name!r}: use 3–512 letters, digits, dots, dashes or "
            "underscores, starting and ending with a letter or digit (set CHROMA_COLLECTION)"
        )
    return name


def safe_url(url: str) -> str:
    """``url`` without credentials or query: fit for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _fingerprint(entry: Entry) -> tuple[Any, ...]:
    """What a record must read back as: every stored field, times in microseconds."""
    m = entry.memory

    def us(value: datetime | None) -> int | None:
        return to_micros(value) if value is not None else None

    return (
        entry.id, entry.app, entry.user, m.text, tuple(m.topics), m.kind or "fact", us(m.event_time),
        tuple(m.participants), m.location or "",
        us(entry.created_at), us(entry.updated_at), us(entry.deleted_at),
    )  # fmt: skip


# -- the per-user write lock --------------------------------------------------

#: event loop → {(collection namespace, stripe): lock}. Locks belong to a loop,
#: so each loop has its own set (pytest runs a loop per test).
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)
#: Guards chromadb's shared client cache, which is not thread-safe.
_CLIENT_LOCK = threading.Lock()


def _stripe(key: UserKey) -> int:
    """FNV-1a-64 of ``app \\0 user`` (the reference's striping), mod 256."""
    h = 0xCBF29CE484222325
    for byte in f"{key.app}\0{key.user}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % LOCK_STRIPES


# -- the buffered section -------------------------------------------------------


@dataclass(slots=True)
class _Write:
    entry: Entry
    #: The embedding to store; None: keep the stored one.
    vector: list[float] | None
    #: The record was removed earlier in this section: there is nothing to keep.
    fresh: bool = False


class _ChromaTransaction:
    """Reads go to Chroma through the section's own pending writes; writes
    are only buffered (``ChromaStore._apply`` sends them after ``work``)."""

    def __init__(self, store: ChromaStore, key: UserKey) -> None:
        self._store, self._key = store, key
        #: memory ID → pending write, or None: removed.
        self.pending: dict[str, _Write | None] = {}

    async def get(self, memory_id: str) -> Entry | None:
        if memory_id in self.pending:
            write = self.pending[memory_id]
            return write.entry if write is not None else None
        return await self._store.get(self._key, memory_id)

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        if entry.app != self._key.app or entry.user != self._key.user:
            raise ValueError("an entry can only be written inside its own user's section")
        values = self._store._check_vector(vector) if vector is not None else None
        fresh = False
        if values is None and entry.id in self.pending:
            earlier = self.pending[entry.id]
            if earlier is None:
                fresh = True
            else:
                values, fresh = earlier.vector, earlier.fresh
        self.pending[entry.id] = _Write(entry, values, fresh)

    async def remove(self, memory_id: str) -> None:
        self.pending[memory_id] = None

    async def count_active(self) -> int:
        store, key = self._store, self._key
        active = set(await store._record_ids(store._where(key, active=True)))
        for memory_id, write in self.pending.items():
            rid = store.record_id(key, memory_id)
            if write is None or write.entry.is_deleted:
                active.discard(rid)
            else:
                active.add(rid)
        return len(active)


# -- the store --------------------------------------------------------------------


#: How many more neighbours than asked for an approximate (HNSW) search fetches.
OVERFETCH = 4


class ChromaStore:
    name = "chromadb"
    capabilities = Capabilities(vector_search=True, persistent=True)
    #: The collection's dimension is fixed when it is created.
    fixed_dimension = True

    def __init__(
        self,
        url: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        collection: str | None = None,
        tenant: str | None = None,
        database: str | None = None,
        api_key: str | None = None,
        bearer_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        dimension: int = DEFAULT_DIMENSION,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        env = os.environ if env is None else env
        #: Seconds each request to the server (connect, read, write) and each
        #: wait for this user's other writes may take.
        self.timeout = resolve_timeout(timeout)
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0:
            raise ConfigError(
                f"invalid embedding dimension {dimension!r}: give the embedder's dimension "
                "(384 for the offline MiniLM embedder)"
            )
        self.dimension = dimension
        self.collection_name = validate_collection_name(
            collection or env.get(ENV_COLLECTION) or DEFAULT_COLLECTION
        )
        explicit_scope = bool(tenant or env.get(ENV_TENANT) or database or env.get(ENV_DATABASE))
        self.tenant = tenant or env.get(ENV_TENANT) or DEFAULT_TENANT
        self.database = database or env.get(ENV_DATABASE) or DEFAULT_DATABASE
        api_key = api_key or env.get(ENV_API_KEY) or None
        bearer_token = bearer_token or env.get(ENV_BEARER_TOKEN) or None
        self._headers: dict[str, str] = dict(headers or {})
        if api_key:
            self._headers["X-Chroma-Token"] = api_key
        if bearer_token:
            self._headers["Authorization"] = f"Bearer {bearer_token}"
        #: Masked (***) out of every message.
        self._secrets = [s for s in (api_key, bearer_token, *self._headers.values()) if s]
        # The reference: with credentials and no explicit tenant/database, the server's identity decides.
        self._scope_from_auth = bool(api_key or bearer_token) and not explicit_scope

        url = (url or env.get(ENV_URL) or "").strip()
        self.url: str | None = None
        self.path: Path | None = None
        if url:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    f"{ENV_URL} must be an http:// or https:// URL such as http://localhost:8000, "
                    f"not {safe_url(url) if parts.hostname else 'that value'}"
                )
            try:
                parts.port  # noqa: B018 (validates the port)
            except ValueError:
                raise ConfigError(f"{ENV_URL} has an invalid port: give a number such as 8000") from None
            if self._headers and parts.scheme == "http" and not _is_loopback(parts.hostname):
                raise ConfigError(
                    f"refusing to send Chroma credentials over plain http to {parts.hostname}: "
                    f"use an https:// {ENV_URL}, or a loopback address"
                )
            self.url = url.rstrip("/")
            self.location = safe_url(self.url)
        else:
            self.path = Path(path or env.get(ENV_PATH) or default_path()).expanduser()
            self.location = str(self.path)
        #: Identifies the collection for the per-user locks.
        self._namespace = (
            self.url or str(self.path.resolve()),
            self.tenant,
            self.database,
            self.collection_name,
        )
        self._client: Any = None
        self._collection: Any = None
        self._open_lock: asyncio.Lock | None = None

    def describe(self) -> str:
        where = self.location if self.url else f"embedded, {self.location}"
        return f"{self.name} ({where}, collection {self.collection_name}, {self.dimension} dimensions)"

    # -- errors ----------------------------------------------------------

    def _explain(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, chromadb.errors.ChromaAuthError | chromadb.errors.AuthorizationError) or re.search(
            r"\b(401|403)\b|unauthori[sz]ed|forbidden", text, re.IGNORECASE
        ):
            return (
                f"the Chroma server refused the credentials ({text}): check {ENV_API_KEY} or "
                f"{ENV_BEARER_TOKEN}, and {ENV_TENANT}/{ENV_DATABASE}"
            )
        if self.url and (
            isinstance(exc, OSError | TimeoutError)
            or type(exc).__module__.startswith(("httpx", "httpcore"))
            or "Could not connect" in text
        ):
            if "timeout" in type(exc).__name__.lower() or isinstance(exc, TimeoutError):
                return timeout_message("Chroma server", self.location, self.timeout)
            why = "it is down or unreachable"
            return (
                f"cannot reach the Chroma server at {self.location} ({why}): "
                f"start it (chroma run --path ./chroma-data) or set {ENV_URL} to a running server"
            )
        if not self.url and isinstance(exc, OSError):
            return (
                f"cannot use the folder {self.location} ({text}): set {ENV_PATH} to a writable folder, "
                f"or {ENV_URL} to use a Chroma server"
            )
        if isinstance(exc, chromadb.errors.NotFoundError) and (
            "tenant" in text.lower() or "database" in text
        ):
            return (
                f"{text}: create tenant {self.tenant} / database {self.database} on the server, "
                f"or set {ENV_TENANT} and {ENV_DATABASE}"
            )
        if isinstance(exc, chromadb.errors.InvalidArgumentError) and "dimension" in text:
            return f"embedding dimension mismatch: {text}"
        return text

    def _error(self, action: str, exc: BaseException) -> BackendError:
        message = f"{self.name} backend at {self.location}: {action} failed: {self._explain(exc)}"
        return BackendError(redact(message, self._secrets))

    async def _call(self, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a Chroma client call in a worker thread; errors become BackendError."""
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except BackendError:
            raise
        except chromadb.errors.NotFoundError as exc:
            # The collection may have been deleted: look it up afresh next time.
            self._collection = None
            raise self._error(action, exc) from exc
        except Exception as exc:  # the client raises ValueError, httpx and Chroma errors alike
            raise self._error(action, exc) from exc

    # -- lifecycle -------------------------------------------------------

    async def open(self) -> None:
        if self._collection is not None:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._collection is not None:
                return
            action = "connecting" if self.url else "opening the embedded store"
            try:
                await asyncio.wait_for(self._call(action, self._connect), OPEN_TIMEOUT_S)
            except TimeoutError:
                raise BackendError(
                    f"{self.name} backend at {self.location}: the Chroma server did not answer within "
                    f"{OPEN_TIMEOUT_S:.0f} s: check that it is running and reachable, or set {ENV_URL}"
                ) from None

    def _connect(self) -> None:
        if self._client is None:
            self._client = self._http_client() if self.url else self._embedded_client()
        self._collection = self._open_collection()

    def _http_client(self) -> Any:
        import httpx

        assert self.url is not None
        # The client waits forever by default: first a bounded heartbeat, so a
        # server that is down or hanging is a prompt, clear error.
        base = self.url.removesuffix("/api/v2")
        timeout = httpx.Timeout(self.timeout)
        response = httpx.get(f"{base}/api/v2/heartbeat", headers=self._headers, timeout=timeout)
        if response.status_code != 200:
            raise chromadb.errors.ChromaError(
                f"the server at {self.location} answered the heartbeat with HTTP {response.status_code}"
                + (" (unauthorized)" if response.status_code in (401, 403) else "")
            )
        settings = Settings(anonymized_telemetry=False)
        settings.chroma_overwrite_singleton_tenant_database_access_from_auth = self._scope_from_auth
        client = chromadb.HttpClient(
            host=self.url,
            ssl=self.url.startswith("https://"),
            headers=dict(self._headers) or None,
            settings=settings,
            tenant=self.tenant,
            database=self.database,
        )
        session = getattr(getattr(client, "_server", None), "_session", None)
        if session is not None:
            session.timeout = timeout
        return client

    def _embedded_client(self) -> Any:
        assert self.path is not None
        self.path.mkdir(parents=True, exist_ok=True)
        # Clients on one path share one cached system; its cache is not thread-safe.
        with _CLIENT_LOCK:
            return chromadb.PersistentClient(
                path=str(self.path),
                settings=Settings(anonymized_telemetry=False),
                tenant=self.tenant,
                database=self.database,
            )

    def _open_collection(self) -> Any:
        client = self._client
        try:
            collection = client.get_collection(self.collection_name, embedding_function=None)
        except (chromadb.errors.NotFoundError, ValueError):
            marker = {MARK_BACKEND: "memchat", MARK_SCHEMA: SCHEMA_VERSION, MARK_DIMENSION: self.dimension}
            return client.get_or_create_collection(
                self.collection_name,
                embedding_function=None,
                metadata=marker,
                configuration={"hnsw": {"space": "cosine"}},
            )
        self._check_collection(collection)
        return collection

    def _check_collection(self, collection: Any) -> None:
        where = f"{self.name} backend at {self.location}"
        # The raw JSON: the parsed ``configuration`` warns about our (absent) embedding function.
        config = getattr(collection, "configuration_json", None)
        config = config if isinstance(config, dict) else {}
        spaces = [(config.get(k) or {}).get("space") for k in ("hnsw", "spann")]
        space = next((s for s in spaces if s), None)
        if space is None:
            space = (collection.metadata or {}).get("hnsw:space", "l2")
        if space != "cosine":
            raise BackendError(
                f"{where}: collection {self.collection_name} uses the {space} distance, but memories need "
                f"cosine: set {ENV_COLLECTION} to another collection (it is created with cosine)"
            )
        stored = (collection.metadata or {}).get(MARK_DIMENSION)
        if stored is None:  # a collection memchat did not create: look at a record
            sample = collection.get(limit=1, include=["embeddings"])
            embeddings = sample.get("embeddings")
            if embeddings is not None and len(embeddings):
                stored = len(embeddings[0])
        if stored is not None and int(stored) != self.dimension:
            raise BackendError(
                f"{where}: embedding dimension mismatch: collection {self.collection_name} holds "
                f"{stored}-dimension embeddings but the embedder makes {self.dimension}-dimension ones: "
                f"use the embedder that filled it ({stored} dimensions), or another collection "
                f"({ENV_COLLECTION}), or delete collection {self.collection_name} to start afresh"
            )

    async def close(self) -> None:
        client, self._client, self._collection = self._client, None, None
        if client is not None and hasattr(client, "close"):

            def close() -> None:
                from chromadb.api.shared_system_client import SharedSystemClient

                with _CLIENT_LOCK:
                    client.close()
                    # A stopped system (the client's, and the admin client it made
                    # for itself) keeps its HTTP session open: close it now, not at
                    # garbage collection (an unclosed-socket warning).
                    for part in (client, getattr(client, "_admin_client", None)):
                        if getattr(part, "_identifier", None) in SharedSystemClient._identifier_to_system:
                            continue  # still shared with another client
                        session = getattr(getattr(part, "_server", None), "_session", None)
                        if session is not None:
                            session.close()

            # Closing releases a shared cache entry; a failure leaves nothing to save.
            with contextlib.suppress(Exception):
                await asyncio.to_thread(close)

    async def _ready(self) -> Any:
        if self._collection is None:
            await self.open()
        return self._collection

    # -- records ---------------------------------------------------------

    @staticmethod
    def record_id(key: UserKey, memory_id: str) -> str:
        """The Chroma ID of a memory: the hash of (app, user, memory ID)."""
        return hashlib.sha256(f"{key.app}\0{key.user}\0{memory_id}".encode()).hexdigest()

    @staticmethod
    def _where(key: UserKey, *, active: bool, embedded: bool = False) -> dict[str, Any]:
        clauses: list[dict[str, Any]] = [{"app_name": key.app}, {"user_id": key.user}]
        if active:
            clauses.append({"deleted_at_us": 0})
        if embedded:
            clauses.append({"has_embedding": True})
        return {"$and": clauses}

    def _metadata(self, entry: Entry, has_embedding: bool) -> dict[str, Any]:
        m = entry.memory
        # None removes a key (an upsert merges metadata into the stored record).
        return {
            MARK_SCHEMA: SCHEMA_VERSION,
            "app_name": entry.app,
            "user_id": entry.user,
            "memory_id": entry.id,
            "kind": m.kind or "fact",
            "has_event_time": m.event_time is not None,
            "event_time_us": to_micros(m.event_time) if m.event_time is not None else None,
            "topics": list(m.topics) or None,
            "participants": list(m.participants) or None,
            "location": m.location or "",
            "created_at_us": to_micros(entry.created_at),
            "updated_at_us": to_micros(entry.updated_at),
            "deleted_at_us": to_micros(entry.deleted_at) if entry.deleted_at is not None else 0,
            "has_embedding": has_embedding,
        }

    @staticmethod
    def _entry(document: str | None, meta: Mapping[str, Any]) -> Entry:
        memory = Memory(
            text=document or "",
            topics=tuple(meta.get("topics") or ()),
            kind=meta.get("kind") or "fact",
            event_time=from_micros(meta.get("event_time_us")) if meta.get("has_event_time") else None,
            participants=tuple(meta.get("participants") or ()),
            location=meta.get("location") or "",
        )
        deleted = int(meta.get("deleted_at_us") or 0)
        return Entry(
            id=str(meta["memory_id"]),
            app=str(meta["app_name"]),
            user=str(meta["user_id"]),
            memory=memory,
            created_at=from_micros(int(meta["created_at_us"])),
            updated_at=from_micros(int(meta["updated_at_us"])),
            deleted_at=from_micros(deleted) if deleted else None,
        )

    def _check_vector(self, vector: Sequence[float]) -> list[float]:
        return checked_vector(vector, self.dimension)

    def _placeholder(self) -> list[float]:
        """Stored for a memory written without an embedding (``has_embedding``
        false keeps it out of vector search)."""
        return [1.0] + [0.0] * (self.dimension - 1)

    # -- reads -------------------------------------------------------------

    async def _records(self, where: dict[str, Any], include: list[str]) -> list[tuple[str, Any, Any]]:
        """Every record matching ``where`` as (id, document, metadata), paged."""
        collection = await self._ready()

        def fetch() -> list[tuple[str, Any, Any]]:
            found: dict[str, tuple[str, Any, Any]] = {}
            offset = 0
            while True:
                page = collection.get(where=where, include=include, limit=PAGE_SIZE, offset=offset)
                ids = page["ids"]
                documents = page.get("documents") or [None] * len(ids)
                metadatas = page.get("metadatas") or [None] * len(ids)
                for rid, document, meta in zip(ids, documents, metadatas, strict=True):
                    found[rid] = (rid, document, meta)
                if len(ids) < PAGE_SIZE:
                    return list(found.values())
                offset += PAGE_SIZE

        return await self._call("reading", fetch)

    async def _record_ids(self, where: dict[str, Any]) -> list[str]:
        return [rid for rid, _, _ in await self._records(where, [])]

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        collection = await self._ready()
        found = await self._call(
            "reading",
            collection.get,
            ids=[self.record_id(key, memory_id)],
            include=["documents", "metadatas"],
        )
        for document, meta in zip(found["documents"] or [], found["metadatas"] or [], strict=True):
            if meta and meta.get("app_name") == key.app and meta.get("user_id") == key.user:
                return self._entry(document, meta)
        return None

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        return len(await self._record_ids(self._where(key, active=not include_deleted)))

    async def keyword_candidates(self, key: UserKey, query: str) -> list[Entry]:
        return await self.list(key)

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> list[Entry]:
        """Up to ``k`` of the user's active memories nearest to ``vector``,
        best first, ``score`` = 1 − cosine distance (not clamped)."""
        if k <= 0:
            return []
        query = self._check_vector(vector)
        collection = await self._ready()
        # Chroma's filtered HNSW search is approximate: ask for more than k and
        # keep the k nearest, and if it still returns fewer than the user has,
        # rank the user's vectors exactly instead.
        wanted = max(k * OVERFETCH, k)
        found = await self._call(
            "searching",
            collection.query,
            query_embeddings=[query],
            n_results=wanted,
            where=self._where(key, active=True, embedded=True),
            include=["documents", "metadatas", "distances"],
        )
        rows = zip(found["documents"][0], found["metadatas"][0], found["distances"][0], strict=True)
        entries = [self._entry(document, meta).with_score(1.0 - float(d)) for document, meta, d in rows]
        # Fewer than asked for while the user has more: the filter starved the search.
        if len(entries) < wanted and len(entries) < await self.count(key):
            entries = await self._exact_candidates(collection, key, query)
        return sorted(entries, key=lambda e: (-e.score, e.id))[:k]

    async def _exact_candidates(self, collection: Any, key: UserKey, query: Sequence[float]) -> list[Entry]:
        import numpy as np

        records = await self._call(
            "searching",
            collection.get,
            where=self._where(key, active=True, embedded=True),
            include=["documents", "metadatas", "embeddings"],
        )
        if not records["ids"]:
            return []
        matrix = np.asarray(records["embeddings"], dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
        scores = (matrix @ q) / np.where(norms == 0, 1.0, norms)
        return [
            self._entry(document, meta).with_score(float(score))
            for document, meta, score in zip(records["documents"], records["metadatas"], scores, strict=True)
        ]

    # -- writes ------------------------------------------------------------

    def _user_lock(self, key: UserKey) -> asyncio.Lock:
        locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault((self._namespace, _stripe(key)), asyncio.Lock())

    async def atomic(self, key: UserKey, work: Callable[[_ChromaTransaction], Awaitable[T]]) -> T:
        await self._ready()
        async with bounded_lock(self._user_lock(key), self.timeout, "this user's other writes"):
            tx = _ChromaTransaction(self, key)
            result = await work(tx)
            if tx.pending:
                await self._apply(key, tx.pending)
            return result

    async def _apply(self, key: UserKey, pending: Mapping[str, _Write | None]) -> None:
        """Send a section's writes: one upsert, then the removals, then verify."""
        collection = await self._ready()
        writes = {self.record_id(key, mid): w for mid, w in pending.items() if w is not None}
        removals = [self.record_id(key, mid) for mid, w in pending.items() if w is None]
        keep = [rid for rid, w in writes.items() if w.vector is None and not w.fresh]
        stored: dict[str, list[float]] = {}
        if keep:
            found = await self._call("reading", collection.get, ids=keep, include=["embeddings", "metadatas"])
            for rid, embedding, meta in zip(
                found["ids"], found["embeddings"], found["metadatas"], strict=True
            ):
                if meta and meta.get("has_embedding"):
                    stored[rid] = [float(x) for x in embedding]
        ids, embeddings, documents, metadatas = [], [], [], []
        for rid, write in writes.items():
            vector = write.vector if write.vector is not None else stored.get(rid)
            ids.append(rid)
            embeddings.append(vector if vector is not None else self._placeholder())
            documents.append(write.entry.memory.text)
            metadatas.append(self._metadata(write.entry, vector is not None))
        for start in range(0, len(ids), PAGE_SIZE):
            end = start + PAGE_SIZE
            await self._call(
                "writing",
                collection.upsert,
                ids=ids[start:end],
                embeddings=embeddings[start:end],
                documents=documents[start:end],
                metadatas=metadatas[start:end],
            )
        if removals:
            try:
                await self._call("removing", collection.delete, ids=removals)
            except BackendError as exc:
                if ids:
                    raise BackendError(
                        f"{exc} (partially applied: the new or changed memories were written, "
                        f"{len(removals)} removal(s) were not; run the operation again)"
                    ) from exc
                raise
        await self._verify(writes, removals)

    async def _verify(self, writes: Mapping[str, _Write], removals: Iterable[str]) -> None:
        removals = list(removals)
        collection = await self._ready()
        found = await self._call(
            "verifying", collection.get, ids=[*writes, *removals], include=["documents", "metadatas"]
        )
        seen = {
            rid: (document, meta)
            for rid, document, meta in zip(found["ids"], found["documents"], found["metadatas"], strict=True)
        }
        wrong = [rid for rid in removals if rid in seen]
        for rid, write in writes.items():
            document, meta = seen.get(rid, (None, None))
            if meta is None or _fingerprint(self._entry(document, meta)) != _fingerprint(write.entry):
                wrong.append(rid)
        if wrong:
            raise BackendError(
                f"{self.name} backend at {self.location}: {len(wrong)} write(s) did not read back as sent "
                "(another writer on this collection, or a server fault): run the operation again"
            )

    # -- export and migration (memchat.engine.portability) -------------------

    async def users(self) -> list[UserKey]:
        records = await self._records(None, ["metadatas"])  # type: ignore[arg-type]
        found = {
            UserKey(str(meta["app_name"]), str(meta["user_id"]))
            for _, _, meta in records
            if meta and "app_name" in meta and "user_id" in meta
        }
        return sorted(found, key=lambda k: (k.app, k.user))

    async def vectors(self, key: UserKey, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        collection = await self._ready()
        by_record = {self.record_id(key, mid): mid for mid in ids}

        def fetch() -> dict[str, list[float]]:
            found: dict[str, list[float]] = {}
            for batch in _chunks(list(by_record), PAGE_SIZE):
                page = collection.get(ids=list(batch), include=["embeddings", "metadatas"])
                embeddings = page.get("embeddings")
                if embeddings is None:
                    embeddings = [None] * len(page["ids"])
                for rid, vector, meta in zip(page["ids"], embeddings, page["metadatas"], strict=True):
                    if vector is not None and meta and meta.get("has_embedding"):
                        found[by_record[rid]] = [float(x) for x in vector]
            return found

        return await self._call("reading the vectors", fetch)

    # -- embedder bookkeeping (memchat.engine.vectors) ------------------------

    def _without_vector(self) -> dict[str, Any]:
        return {"has_embedding": False}

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        """Records of any user, tombstones included, stored without an
        embedding (at most ``limit``; ``<= 0``: all), by (app, user, id)."""
        records = await self._records(self._without_vector(), ["documents", "metadatas"])
        entries = [self._entry(document, meta) for _, document, meta in records if meta]
        entries.sort(key=lambda e: (e.app, e.user, e.id))
        return entries[:limit] if limit > 0 else entries

    async def count_missing_vectors(self) -> int:
        return len(await self._record_ids(self._without_vector()))

    async def clear_vectors(self) -> None:
        """Mark every stored embedding stale (``has_embedding`` false): the embedder changed."""
        collection = await self._ready()
        ids = await self._record_ids({"has_embedding": True})
        stale = {"has_embedding": False}
        for batch in _chunks(ids, PAGE_SIZE):
            await self._call("forgetting the old vectors", collection.update, ids=list(batch),
                             metadatas=[stale] * len(batch))  # fmt: skip

    async def read_meta(self, name: str) -> str | None:
        """A record kept in the collection's metadata."""
        collection = await self._ready()
        value = (collection.metadata or {}).get(MARK_META + name)
        return None if value is None else str(value)

    async def write_meta(self, name: str, value: str) -> None:
        collection = await self._ready()

        def write() -> None:
            fresh = self._client.get_collection(self.collection_name, embedding_function=None)
            # The distance lives in the configuration: an hnsw: key may not be sent again.
            current = {k: v for k, v in (fresh.metadata or {}).items() if not k.startswith("hnsw:")}
            # Through our own collection object, which then knows its new metadata.
            collection.modify(metadata={**current, MARK_META + name: value})

        await self._call("writing", write)

    async def clear(self, key: UserKey, *, deleted_at: datetime | None) -> int:
        collection = await self._ready()
        async with bounded_lock(self._user_lock(key), self.timeout, "this user's other writes"):
            active = await self._record_ids(self._where(key, active=True))
            if deleted_at is None:
                await self._call("clearing", collection.delete, where=self._where(key, active=False))
                left = await self._call(
                    "verifying", collection.get, where=self._where(key, active=False), limit=1, include=[]
                )
                if left["ids"]:
                    raise BackendError(
                        f"{self.name} backend at {self.location}: clearing left memories behind: run it again"
                    )
                return len(active)
            stamp = {"deleted_at_us": to_micros(deleted_at)}
            for batch in _chunks(active, PAGE_SIZE):
                # Metadata only: update merges it into each record, text and embedding stay.
                await self._call(
                    "clearing", collection.update, ids=list(batch), metadatas=[stamp] * len(batch)
                )
            for batch in _chunks(active, PAGE_SIZE):
                found = await self._call("verifying", collection.get, ids=list(batch), include=["metadatas"])
                if len(found["ids"]) != len(batch) or any(
                    (m or {}).get("deleted_at_us") != stamp["deleted_at_us"] for m in found["metadatas"]
                ):
                    raise BackendError(
                        f"{self.name} backend at {self.location}: clearing did not mark every "
                        "memory deleted: run it again"
                    )
            return len(active)

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, limit: int = 0, include_deleted: bool = False) -> list[Entry]:
        records = await self._records(
            self._where(key, active=not include_deleted), ["documents", "metadatas"]
        )
        entries = [self._entry(document, meta) for _, document, meta in records]
        entries.sort(key=lambda e: e.id)
        entries.sort(key=lambda e: (e.updated_at, e.created_at), reverse=True)
        return entries[:limit] if limit > 0 else entries
