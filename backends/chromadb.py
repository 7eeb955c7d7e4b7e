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
= 0``: active), whether the embedding is real, and ``memchat_dense`` on the
records vector search may return (the query's one-clause filter). The record ID
is a hash of (app, user, memory ID), so users can never collide. The keyword
index and its upkeep: backends/_chroma_index.py; each user's vectors again in
a collection of their own, for nearest-neighbour queries without a filter:
backends/_chroma_user_vectors.py; the searches: backends/_chroma_search.py.
The collection uses the cosine space; its metadata records the dimension, and
opening it with another dimension is one BackendError naming both.

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
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import chromadb
import chromadb.errors

from memchat.engine.model import (
    BackendError,
    ConfigError,
    Entry,
    UserKey,
    to_micros,
)
from memchat.engine.secrets import redact
from memchat.net import is_loopback

from ._chroma_background import BackgroundReads
from ._chroma_client import (
    DEFAULT_COLLECTION,
    DEFAULT_DATABASE,
    DEFAULT_TENANT,
    ENV_API_KEY,
    ENV_BEARER_TOKEN,
    ENV_COLLECTION,
    ENV_DATABASE,
    ENV_PATH,
    ENV_TENANT,
    ENV_URL,
    close_client,
    default_path,
    embedded_client,
    explain_error,
    http_client,
    open_collection,
    safe_url,
    validate_collection_name,
)
from ._chroma_entries import EntryCache
from ._chroma_index import ChromaKeywordIndex, IndexPlan, index_collection_name, new_token, record_of
from ._chroma_matrix import ChromaMatrices
from ._chroma_records import (
    DENSE_KEY,
    MARK_META,
    chunks,
    fingerprint,
    pages,
    record_entry,
    record_id,
    record_metadata,
    user_filter,
)
from ._chroma_search import ENTRIES_KEPT_UP_TO, PAGE_SIZE, ChromaSearch
from ._chroma_transaction import LOCKS, ChromaTransaction, PendingWrite, stripe
from ._chroma_user_vectors import UserVectorCollections
from .base import Capabilities, bounded_lock, checked_vector, resolve_timeout

if TYPE_CHECKING:
    from memchat.engine.vectors import ProgressCallback

T = TypeVar("T")

#: The offline MiniLM embedder's dimension.
DEFAULT_DIMENSION = 384
#: A backstop for opening (the embedded store's first start is slow); every
#: HTTP request is bounded by the store's timeout.
OPEN_TIMEOUT_S = 60.0


# -- the store --------------------------------------------------------------------


#: What the Chroma server answers when a read matched a record that another
#: writer removed before the read fetched it (found by a filter, gone by the
#: time its embedding or document is read): the same read asked again sees
#: the collection after the removal.
RACED_REMOVAL = "Error finding id"
#: How often such a read is asked in all.
READ_ATTEMPTS = 3


class ChromaStore(ChromaSearch):
    name = "chromadb"
    capabilities = Capabilities(
        vector_search=True, persistent=True, native_keyword_search=True, event_time_lookup=True
    )
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
            if self._headers and parts.scheme == "http" and not is_loopback(parts.hostname):
                raise ConfigError(
                    f"refusing to send Chroma credentials over plain http to {parts.hostname}: "
                    f"use an https:// {ENV_URL}, or a loopback address"
                )
            self.url = identity = url.rstrip("/")
            self.location = safe_url(self.url)
        else:
            self.path = folder = Path(path or env.get(ENV_PATH) or default_path()).expanduser()
            self.location = str(folder)
            identity = str(folder.resolve())
        #: Identifies the collection for the per-user locks.
        self._namespace = (
            identity,
            self.tenant,
            self.database,
            self.collection_name,
        )
        self._client: Any = None
        self._collection: Any = None
        self._open_lock: asyncio.Lock | None = None
        #: The keyword index's collection (backends/_chroma_index.py), and whether
        #: it matches the memories (until then searches read every memory).
        self._index: ChromaKeywordIndex | None = None
        self._index_ready = False
        self._entries = EntryCache()
        #: Reads ahead of the searches (a user's vectors for ``_matrices``, a large
        #: user's common terms: ``_warm_postings``), stopped on close.
        self._background = BackgroundReads()
        #: Searched users' vectors, for exact nearest neighbours (backends/_chroma_matrix.py).
        self._matrices = ChromaMatrices(self.dimension, self._background)
        #: Each user's vector collection (backends/_chroma_user_vectors.py), and the
        #: version each is known to match (read from its marker, or written by this process).
        self._vector_collections: UserVectorCollections | None = None
        self._vector_versions: dict[UserKey, str] = {}
        #: Told how far building the keyword index on open has got.
        self.progress: ProgressCallback | None = None

    def describe(self) -> str:
        where = self.location if self.url else f"embedded, {self.location}"
        return f"{self.name} ({where}, collection {self.collection_name}, {self.dimension} dimensions)"

    # -- errors ----------------------------------------------------------

    def _error(self, action: str, exc: BaseException) -> BackendError:
        why = explain_error(
            exc,
            url=self.url,
            location=self.location,
            timeout=self.timeout,
            tenant=self.tenant,
            database=self.database,
        )
        message = f"{self.name} backend at {self.location}: {action} failed: {why}"
        return BackendError(redact(message, self._secrets))

    async def _call(self, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a Chroma client call in a worker thread; errors become BackendError."""
        return await self._attempts(1, action, fn, *args, **kwargs)

    async def _read_call(self, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``_call`` for a call that only reads: one that raced another writer's removal
        of a record it matched is asked again (``RACED_REMOVAL``)."""
        return await self._attempts(READ_ATTEMPTS, action, fn, *args, **kwargs)

    async def _attempts(
        self, attempts: int, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        for attempt in range(attempts):
            try:
                return await asyncio.to_thread(fn, *args, **kwargs)
            except BackendError:
                raise
            except chromadb.errors.NotFoundError as exc:
                # The collection may have been deleted: look it up afresh next time.
                self._collection = None
                raise self._error(action, exc) from exc
            except Exception as exc:  # the client raises ValueError, httpx and Chroma errors alike
                if RACED_REMOVAL in str(exc) and attempt + 1 < attempts:
                    await asyncio.sleep(0.01 * (attempt + 1))
                    continue
                raise self._error(action, exc) from exc
        raise AssertionError("unreachable")  # the last attempt returns or raises

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
            await self._ensure_keyword_index()

    def _connect(self) -> None:
        if self._client is None:
            self._client = (
                http_client(
                    self.url,
                    headers=self._headers,
                    timeout=self.timeout,
                    tenant=self.tenant,
                    database=self.database,
                    scope_from_auth=self._scope_from_auth,
                )
                if self.url
                else embedded_client(self.path or default_path(), tenant=self.tenant, database=self.database)
            )
        collection = open_collection(
            self._client,
            self.collection_name,
            self.dimension,
            where=f"{self.name} backend at {self.location}",
        )
        # Named by the memories collection's ID: one made again gets a fresh index.
        index = self._client.get_or_create_collection(
            index_collection_name(collection.id), embedding_function=None, metadata={"memchat_index": 1}
        )
        self._index, self._index_ready = ChromaKeywordIndex(index), False
        self._vector_collections = UserVectorCollections(self._client, collection.id, self.dimension)
        self._vector_versions.clear()
        self._entries.clear()
        self._matrices.clear()
        self._collection = collection

    async def close(self) -> None:
        client, self._client, self._collection = self._client, None, None
        self._index, self._index_ready = None, False
        self._vector_collections = None
        self._vector_versions.clear()
        self._entries.clear()
        await self._background.close()
        self._matrices.clear()
        if client is not None and hasattr(client, "close"):
            # Closing releases a shared cache entry; a failure leaves nothing to save.
            with contextlib.suppress(Exception):
                await asyncio.to_thread(close_client, client)

    async def _ready(self) -> Any:
        if self._collection is None:
            await self.open()
        return self._collection

    # -- records ---------------------------------------------------------

    record_id = staticmethod(record_id)

    def check_vector(self, vector: Sequence[float]) -> list[float]:
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
            for page in pages(collection, where, include, PAGE_SIZE):
                ids = page["ids"]
                documents = page.get("documents") or [None] * len(ids)
                metadatas = page.get("metadatas") or [None] * len(ids)
                for rid, document, meta in zip(ids, documents, metadatas, strict=True):
                    found[rid] = (rid, document, meta)
            return list(found.values())

        return await self._read_call("reading", fetch)

    async def record_ids(self, where: dict[str, Any]) -> list[str]:
        return [rid for rid, _, _ in await self._records(where, [])]

    async def get(self, key: UserKey, memory_id: str) -> Entry | None:
        collection = await self._ready()
        found = await self._read_call(
            "reading",
            collection.get,
            ids=[record_id(key, memory_id)],
            include=["documents", "metadatas"],
        )
        for document, meta in zip(found["documents"] or [], found["metadatas"] or [], strict=True):
            if meta and meta.get("app_name") == key.app and meta.get("user_id") == key.user:
                return record_entry(document, meta)
        return None

    # -- writes ------------------------------------------------------------

    def _user_lock(self, key: UserKey) -> asyncio.Lock:
        locks = LOCKS.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault((self._namespace, stripe(key)), asyncio.Lock())

    async def atomic(self, key: UserKey, work: Callable[[ChromaTransaction], Awaitable[T]]) -> T:
        await self._ready()
        async with bounded_lock(self._user_lock(key), self.timeout, "this user's other writes"):
            tx = ChromaTransaction(self, key)
            result = await work(tx)
            if tx.pending:
                await self._apply(key, tx)
            return result

    async def _apply(self, key: UserKey, tx: ChromaTransaction) -> None:
        """Send a section's writes: the keyword index marked (while what it changes is
        read), one upsert, then the removals, and beside them the user's vector
        collection (backends/_chroma_user_vectors.py), then verify while the index is
        written (backends/_chroma_index.py)."""
        collection = await self._ready()
        pending = tx.pending
        writes = {record_id(key, mid): w for mid, w in pending.items() if w is not None}
        removals = [record_id(key, mid) for mid, w in pending.items() if w is None]
        index = self._index if self._index_ready else None
        stored, before = await tx.replaced(for_index=index is not None)
        taken = self._entries.take(key)
        plan: IndexPlan | None = None
        token = new_token()
        version = new_token()  # what the user's statistics (and vector collection) become
        if index is not None:
            changes = [
                (mid, record_of(before.get(mid)), record_of(w.entry if w else None))
                for mid, w in pending.items()
            ]
            added = sum((w is not None) - (before.get(mid) is not None) for mid, w in pending.items())
            plan, _ = await asyncio.gather(
                self._call(
                    "writing",
                    index.prepare,
                    key,
                    changes,
                    token,
                    added,
                    [(mid, w.entry if w else None) for mid, w in pending.items()],
                ),
                self._call("writing", index.mark, key, token),
            )
        ids, embeddings, documents, metadatas = [], [], [], []
        searchable: set[str] = set()  # the records the dense filter finds after the write
        for rid, write in writes.items():
            vector = write.vector if write.vector is not None else stored.get(rid)
            if vector is not None and write.entry.deleted_at is None:
                searchable.add(rid)
            ids.append(rid)
            embeddings.append(vector if vector is not None else self._placeholder())
            documents.append(write.entry.memory.text)
            metadatas.append(record_metadata(write.entry, vector is not None))
        upserts = {rid: vector for rid, vector in zip(ids, embeddings, strict=True) if rid in searchable}
        unsearchable = [rid for rid in [*writes, *removals] if rid not in upserts]

        async def write_memories() -> None:
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

        was = plan.before.version if plan is not None and plan.before else ""
        # The vector collection follows only from the version it matches; else its
        # marker stays behind, and searches filter the memories collection instead.
        vectors = self._vector_collections
        follow = (
            vectors is not None and plan is not None and not plan.rebuild and await self._vectors_at(key, was)
        )
        self._vector_versions.pop(key, None)
        if follow and vectors is not None:
            wrote = await asyncio.gather(
                write_memories(),
                self._call("writing", vectors.write, key, upserts, unsearchable, version, was),
                return_exceptions=True,
            )
            for outcome in wrote:  # the statistics stay marked: the next write rebuilds both
                if isinstance(outcome, BaseException):
                    raise outcome
            follow = wrote[1] is True
        else:
            await write_memories()
        if index is None or plan is None or plan.rebuild:
            await self._verify(writes, removals)
            if index is not None and plan is not None:  # an earlier section did not finish
                entries, records = await self.list(key), await self._record_count(key)
                await self._rebuild_user(index, key, entries, records)
            return
        verified, committed = await asyncio.gather(
            self._verify(writes, removals),
            self._call("writing", index.commit, plan, token, version),
            return_exceptions=True,
        )
        if isinstance(verified, BaseException):
            if not isinstance(committed, BaseException):  # the index may not match: mark it again
                with contextlib.suppress(BackendError):
                    await self._call("writing", index.mark, key, new_token())
            raise verified
        if isinstance(committed, BaseException):
            raise committed
        if follow:
            self._vector_versions[key] = version
        written = {record_id(key, mid): (w.entry if w else None) for mid, w in pending.items()}
        if plan.active > ENTRIES_KEPT_UP_TO:
            # Past the bound the writes leave the kept records (their next search reads
            # them), so a process that imports 100k memories does not hold them all.
            written = dict.fromkeys(written)
        if plan.before is None:
            # The index held no statistics of the user, so no memory (its plan starts
            # from none too): what the section wrote is all the user holds, and this
            # process's searches of them read nothing back (at 10k memories, the
            # background read of their vectors slowed the first searches for seconds).
            self._entries.start(key, version, written)
            self._matrices.start(key, version, upserts)
        else:
            self._entries.carry(key, taken, was, version, written)
            self._matrices.carry(key, was, version, upserts, set(written) - upserts.keys())
        # Their own vector collection, just written (no request), may answer their searches.
        if follow and await self._ranked_by_own_collection(key, plan.active, version):
            self._matrices.drop(key)

    async def _verify(self, writes: Mapping[str, PendingWrite], removals: Iterable[str]) -> None:
        removals = list(removals)
        collection = await self._ready()
        found = await self._read_call(
            "verifying", collection.get, ids=[*writes, *removals], include=["documents", "metadatas"]
        )
        seen = {
            rid: (document, meta)
            for rid, document, meta in zip(found["ids"], found["documents"], found["metadatas"], strict=True)
        }
        wrong = [rid for rid in removals if rid in seen]
        for rid, write in writes.items():
            document, meta = seen.get(rid, (None, None))
            if meta is None or fingerprint(record_entry(document, meta)) != fingerprint(write.entry):
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
        by_record = {record_id(key, mid): mid for mid in ids}

        def fetch() -> dict[str, list[float]]:
            found: dict[str, list[float]] = {}
            for batch in chunks(list(by_record), PAGE_SIZE):
                page = collection.get(ids=list(batch), include=["embeddings", "metadatas"])
                embeddings = page.get("embeddings")
                if embeddings is None:
                    embeddings = [None] * len(page["ids"])
                for rid, vector, meta in zip(page["ids"], embeddings, page["metadatas"], strict=True):
                    if vector is not None and meta and meta.get("has_embedding"):
                        found[by_record[rid]] = [float(x) for x in vector]
            return found

        return await self._read_call("reading the vectors", fetch)

    # -- embedder bookkeeping (memchat.engine.vectors) ------------------------

    def _without_vector(self) -> dict[str, Any]:
        return {"has_embedding": False}

    async def entries_missing_vectors(self, limit: int) -> list[Entry]:
        """Records of any user, tombstones included, stored without an
        embedding (at most ``limit``; ``<= 0``: all), by (app, user, id)."""
        records = await self._records(self._without_vector(), ["documents", "metadatas"])
        entries = [record_entry(document, meta) for _, document, meta in records if meta]
        entries.sort(key=lambda e: (e.app, e.user, e.id))
        return entries[:limit] if limit > 0 else entries

    async def count_missing_vectors(self) -> int:
        return len(await self.record_ids(self._without_vector()))

    async def clear_vectors(self) -> None:
        """Mark every stored embedding stale (``has_embedding`` false): the embedder changed."""
        collection = await self._ready()
        self._matrices.clear()
        ids = await self.record_ids({"has_embedding": True})
        stale = {"has_embedding": False, DENSE_KEY: None}
        for batch in chunks(ids, PAGE_SIZE):
            await self._call("forgetting the old vectors", collection.update, ids=list(batch),
                             metadatas=[stale] * len(batch))  # fmt: skip
        await self._empty_user_vectors()

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
            index = self._index if self._index_ready else None
            self._entries.drop(key)
            self._matrices.drop(key)
            if index is not None:
                await self._call("writing", index.mark, key, new_token())
            cleared = await self._clear(collection, key, deleted_at)
            if index is not None:  # no active memory is left to index
                records = 0 if deleted_at is None else await self._record_count(key)
                await self._rebuild_user(index, key, [], records)
            return cleared

    async def _clear(self, collection: Any, key: UserKey, deleted_at: datetime | None) -> int:
        """Tombstone or delete the user's memories (under the user's lock); how many were active."""
        active = await self.record_ids(user_filter(key, active=True))
        if deleted_at is None:
            await self._call("clearing", collection.delete, where=user_filter(key, active=False))
            left = await self._read_call(
                "verifying", collection.get, where=user_filter(key, active=False), limit=1, include=[]
            )
            if left["ids"]:
                raise BackendError(
                    f"{self.name} backend at {self.location}: clearing left memories behind: run it again"
                )
            return len(active)
        stamp = {"deleted_at_us": to_micros(deleted_at), DENSE_KEY: None}
        for batch in chunks(active, PAGE_SIZE):
            # Metadata only: update merges it into each record, text and embedding stay.
            await self._call("clearing", collection.update, ids=list(batch), metadatas=[stamp] * len(batch))
        for batch in chunks(active, PAGE_SIZE):
            found = await self._read_call("verifying", collection.get, ids=list(batch), include=["metadatas"])
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
        if limit > 0 and not include_deleted:
            newest = await self._newest(key, limit)
            if newest is not None:
                return newest
        records = await self._records(
            user_filter(key, active=not include_deleted), ["documents", "metadatas"]
        )
        entries = [record_entry(document, meta) for _, document, meta in records]
        entries.sort(key=lambda e: e.id)
        entries.sort(key=lambda e: (e.updated_at, e.created_at), reverse=True)
        return entries[:limit] if limit > 0 else entries
