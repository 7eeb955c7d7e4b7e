"""The Chroma store's nearest-neighbour index of each user: one small collection
per user holding only the vectors of that user's searchable memories.

Chroma answers a query filtered to one user by first listing every record the
filter matches, in its metadata store, and that costs as much as the whole
collection holds: at 100k records, 330 ms at p50 for a user of 100k memories
and 60 ms for a user of 2k, against 7 ms for the same 100k vectors searched in
a collection of their own with no filter (benchmarks/README.md, "Eighteenth
session"). So each user's vectors are also kept in a collection of their own,
``memchat-vec-<the memories collection's ID>-<hash of app and user>`` (a
memories collection made again starts fresh ones), whose records are (the
memory's record ID, its embedding) for the user's active memories with a real
embedding, and nothing else.

Chroma has no transactions, so the collection is trusted only at a version:
a marker record (``MARKER_ID``) holds the keyword index's version
(backends/_chroma_index.py) the collection matches. A write section writes the
user's vectors with the version its statistics will take, before it writes
those statistics, and only when the collection matched the version before it;
a search uses the collection only when the marker equals the statistics'
version (clean statistics: no section under way or failed). Anything else (a
section that failed, a writer that does not keep these collections) leaves the
marker behind, and searches ask the memories collection with the user filter,
as before, until the user's index is rebuilt (which rebuilds this too).

Every method is synchronous: the store runs them in its worker threads.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import chromadb.errors

from memchat.engine.model import UserKey

from ._chroma_records import chunks

T = TypeVar("T")

#: The record holding the version the collection matches (never a memory's
#: record ID: those are 64 hex digits).
MARKER_ID = "memchat-version"
#: Vectors per request.
BATCH = 500
#: Chroma's older servers take names of at most 63 characters.
_PREFIX = "memchat-vec-"


def _user_hash(key: UserKey) -> str:
    # 18 hex digits fill the name to 63 characters. Two users sharing one (about
    # one chance in 10^10 among 100k users) would share a collection, whose
    # marker then matches neither user's version: both are searched as before.
    return hashlib.sha256(f"{key.app}\0{key.user}".encode()).hexdigest()[:18]


class UserVectorCollections:
    """Each user's vector collection, beside the memories collection ``parent_id``."""

    def __init__(self, client: Any, parent_id: Any, dimension: int) -> None:
        self._client = client
        self._prefix = f"{_PREFIX}{getattr(parent_id, 'hex', str(parent_id).replace('-', ''))}-"
        self._placeholder = [1.0] + [0.0] * (dimension - 1)
        self._collections: dict[UserKey, Any] = {}

    def name(self, key: UserKey) -> str:
        return self._prefix + _user_hash(key)

    def _collection(self, key: UserKey, *, create: bool) -> Any:
        found = self._collections.get(key)
        if found is not None:
            return found
        name = self.name(key)
        if create:
            found = self._client.get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        else:
            try:
                found = self._client.get_collection(name, embedding_function=None)
            except (chromadb.errors.NotFoundError, ValueError):
                return None
        self._collections[key] = found
        return found

    def _with(self, key: UserKey, use: Callable[[Any], T], missing: T) -> T:
        """``use`` of the user's collection (``missing`` without one). A collection
        object kept here names the collection by its ID, so one deleted and made
        again by another store object is looked up afresh by its name, once."""
        for attempt in range(2):
            collection = self._collection(key, create=False)
            if collection is None:
                return missing
            try:
                return use(collection)
            except chromadb.errors.NotFoundError:
                self._collections.pop(key, None)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def marker(self, key: UserKey) -> str:
        """The version the user's collection matches ("": none, or no collection)."""

        def read(collection: Any) -> str:
            metas = collection.get(ids=[MARKER_ID], include=["metadatas"]).get("metadatas") or []
            return str((metas[0] or {}).get("version") or "") if metas else ""

        return self._with(key, read, "")

    def write(
        self,
        key: UserKey,
        upserts: Mapping[str, Sequence[float]],
        removals: Sequence[str],
        version: str,
        was: str,
    ) -> bool:
        """One section's changes, from the version ``was`` the caller found the
        collection at: ``upserts`` (record ID → vector) searchable now, ``removals``
        no longer; then the marker at ``version``. False, writing nothing, when the
        collection turns out to be another one (made again meanwhile) not at ``was``."""
        collection = self._collection(key, create=True)
        try:
            self._change(collection, upserts, removals, version)
            return True
        except chromadb.errors.NotFoundError:
            self._collections.pop(key, None)
        if self.marker(key) != was:
            return False
        collection = self._collection(key, create=True)
        self._change(collection, upserts, removals, version)
        return True

    def _change(
        self, collection: Any, upserts: Mapping[str, Sequence[float]], removals: Sequence[str], version: str
    ) -> None:
        for batch in chunks(list(removals), BATCH):
            collection.delete(ids=list(batch))
        self._upsert(collection, upserts, version)

    def rebuild(self, key: UserKey, vectors: Mapping[str, Sequence[float]], version: str) -> None:
        """The user's collection afresh: exactly ``vectors``, at ``version``."""
        self.drop(key)
        collection = self._collection(key, create=True)
        self._upsert(collection, vectors, version)

    def _upsert(self, collection: Any, vectors: Mapping[str, Sequence[float]], version: str) -> None:
        # The marker goes with the last batch: a failure before it leaves the old marker.
        items = [*vectors.items(), (MARKER_ID, self._placeholder)]
        batches = list(chunks(items, BATCH))
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            collection.upsert(
                ids=[rid for rid, _ in batch],
                embeddings=[list(vector) for _, vector in batch],
                metadatas=[{"version": version} if last and rid == MARKER_ID else None for rid, _ in batch],
            )

    def query(self, key: UserKey, vector: Sequence[float], n: int) -> dict[str, float]:
        """Record ID → cosine of the user's ``n`` nearest vectors (approximate: HNSW)."""

        def ask(collection: Any) -> dict[str, float]:
            found = collection.query(query_embeddings=[list(vector)], n_results=n + 1, include=["distances"])
            pairs = zip(found["ids"][0], found["distances"][0], strict=True)
            return {rid: 1.0 - float(d) for rid, d in pairs if rid != MARKER_ID}

        scores: dict[str, float] = self._with(key, ask, {})
        return dict(list(scores.items())[:n])

    def drop(self, key: UserKey) -> None:
        self._collections.pop(key, None)
        with contextlib.suppress(chromadb.errors.NotFoundError, ValueError):
            self._client.delete_collection(self.name(key))

    def names(self) -> Iterator[str]:
        """The names of every user's collection beside this memories collection."""
        offset = 0
        while True:
            page = self._client.list_collections(limit=BATCH, offset=offset)
            for collection in page:
                name = collection if isinstance(collection, str) else collection.name
                if name.startswith(self._prefix):
                    yield name
            if len(page) < BATCH:
                return
            offset += BATCH

    def drop_all(self) -> None:
        self._collections.clear()
        for name in list(self.names()):
            with contextlib.suppress(chromadb.errors.NotFoundError, ValueError):
                self._client.delete_collection(name)
