"""The Chroma store's exact nearest-neighbour search from a matrix this process keeps.

Chroma answers a nearest-neighbour query filtered to one user with its HNSW
index and the filter together: 60 ms at p50 for a user with 10k memories (the
1k figure: 76 ms at p95), approximate, and the most of a hybrid search's
time. The store instead keeps each searched user's vectors in a matrix
(backends/_vectors.py) tagged with the user's index version
(backends/_chroma_index.py: a new token with every write of that user by any
memchat process keeping the index), and ranks them exactly (0.5 ms at 10k)
while the version stays the same:

* the first search of a user (or the first after another process wrote) asks
  the server (the user's own vector collection: backends/_chroma_user_vectors.py),
  and reads the user's vectors for the next searches in the background (a
  second at 10k: no search waits for it);
* past ``ENTRIES_KEPT_UP_TO`` memories (backends/_chroma_search.py) no matrix is
  kept while the user's own collection is current: its HNSW index answers as
  fast as a product over that many rows, and the read (9 s at 100k) slowed
  every search beside it;
* the read is kept only if the version it started at is still the version
  after it, so a matrix never holds vectors of another version than its tag;
* a write section of this process carries the matrix over to the version it
  wrote, with its own vectors (no read again); the section that writes a user's
  first memories starts it, so a process that wrote all of a user's memories
  never reads them back.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

import numpy as np

from memchat.engine.model import UserKey

from ._chroma_background import BackgroundReads
from ._vectors import MatrixCache, UserMatrix

log = logging.getLogger(__name__)

#: Reads (version before, record ID → vector, version after) of one user's vectors.
VectorReader = Callable[[UserKey], Awaitable[tuple[str, Mapping[str, Sequence[float]], str] | None]]


def _row(vector: Sequence[float]) -> np.ndarray:
    """One vector as a matrix row (float32, flat)."""
    return np.asarray(vector, dtype=np.float32).reshape(-1)


class ChromaMatrices:
    """Per user: the matrix of its active, embedded records by record ID, at an index version."""

    def __init__(self, dimension: int, reads: BackgroundReads) -> None:
        self.dimension = dimension
        self._cache = MatrixCache()
        #: The store's background reads (backends/_chroma_background.py), which it stops on close.
        self._reads = reads

    def known(self, key: UserKey) -> bool:
        """A matrix of the user is kept (at some version: the caller checks which)."""
        return key in self._cache

    def at(self, key: UserKey, version: str) -> UserMatrix | None:
        return self._cache.get(key, version) if version else None

    def read_later(self, key: UserKey, read: VectorReader) -> None:
        """Read the user's matrix in the background, unless a read is under way."""
        self._reads.start(("vectors", key), lambda _: self._read(key, read))

    def reading(self, key: UserKey) -> bool:
        """A read of the user's matrix is under way."""
        return self._reads.running(("vectors", key))

    async def _read(self, key: UserKey, read: VectorReader) -> None:
        try:
            found = await read(key)
        except Exception as exc:  # a background read: the next search asks the server again
            log.debug("reading the vectors of %s failed: %s", key, exc)
            return
        if found is None:
            return
        before, vectors, after = found
        if not before or before != after:  # written meanwhile: the vectors may be of either version
            return
        rows = ((rid, _row(v)) for rid, v in vectors.items())
        self._cache.put(key, before, UserMatrix.from_vectors(rows, self.dimension))

    def carry(
        self,
        key: UserKey,
        before: str,
        after: str,
        upserts: Mapping[str, Sequence[float]],
        removals: set[str],
    ) -> None:
        """A write section of this process took the user from ``before`` to ``after``."""
        if not before:
            self._cache.drop(key)
            return
        vectors = {rid: _row(v) for rid, v in upserts.items()}
        self._cache.advance(key, before, after, vectors, removals)

    def start(self, key: UserKey, version: str, upserts: Mapping[str, Sequence[float]]) -> None:
        """A section of this process wrote the first memories of a user (the index
        held no statistics of them, so no memory): the matrix at ``version`` is
        ``upserts``, and the user's next searches read none."""
        rows = ((rid, _row(v)) for rid, v in upserts.items())
        self._cache.put(key, version, UserMatrix.from_vectors(rows, self.dimension))

    def drop(self, key: UserKey) -> None:
        self._cache.drop(key)

    def clear(self) -> None:
        self._cache.clear()
