"""Exact cosine ranking over one user's vectors, and the cache that keeps them.

The stores without a native vector index (inmemory, sqlite, redis, mysql,
postgres, and mysqlvec on a server without a vector type) keep each
embedding beside its memory as little-endian float32 bytes and answer
``vector_candidates`` by ranking the user's vectors exactly with numpy. The
user's matrix (rows L2-normalised) is cached in the process:

* a write of the user in this process drops it (``MatrixCache.drop``);
* each search first reads a cheap *signature* of the user's stored vectors
  (a version counter, or count/sum/max of ``updated_at`` over the rows with a
  vector) and reuses the matrix only while the signature is unchanged, so
  another process's writes are seen at the next search.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memchat.engine.products import matrix_times_vector

#: Users whose matrices are kept in memory per store (LRU).
MATRIX_CACHE_USERS = 8
#: Matrix elements (memories × dimension) from which a search ranks the user's
#: matrix in a worker thread: at 100k memories × 384 the product takes 18–30 ms,
#: which on the event loop would freeze a TUI and hold up the search's own other
#: half (the keyword candidates' reads and scoring, which run meanwhile; numpy
#: lets go of the GIL in the product). Below it (about 5k memories, 1–2 ms) the
#: thread's hand-over costs more than it frees.
OFF_LOOP_FROM = 2_000_000


def encode_vector(vector: Sequence[float], dimension: int) -> bytes:
    """``vector`` as little-endian float32 bytes, or a BackendError if it has
    the wrong dimension or NaN/infinite values (which would poison every search)."""
    from memchat.engine.model import BackendError

    values = np.asarray(vector, dtype=np.float64).reshape(-1)
    if values.shape[0] != dimension:
        raise BackendError(
            f"embedding dimension mismatch: expected {dimension}, got {values.shape[0]}: "
            f"use an embedder with {dimension} dimensions or configure the store for {values.shape[0]}"
        )
    if not np.all(np.isfinite(values)):
        raise BackendError("the embedder returned a vector with NaN or infinite values; nothing was stored")
    return values.astype("<f4").tobytes()


def check_query(vector: Sequence[float], dimension: int) -> np.ndarray:
    """The query as a unit float32 row, or a BackendError for a wrong dimension."""
    from memchat.engine.model import BackendError

    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    if query.shape[0] != dimension:
        raise BackendError(f"embedding dimension mismatch: expected {dimension}, got {query.shape[0]}")
    norm = float(np.linalg.norm(query))
    return query / max(norm, 1e-12) if math.isfinite(norm) else np.zeros_like(query)


@dataclass(frozen=True, slots=True)
class UserMatrix:
    """One user's vectors: ``ids[i]`` owns row ``i`` of ``matrix`` (unit rows).

    ``matrix`` may be the first rows of a larger ``buffer``: a write that only adds
    memories fills the rows after them (:meth:`MatrixCache.advance`), which no
    matrix handed out before covers, instead of copying every row."""

    ids: list[str]
    matrix: np.ndarray
    buffer: np.ndarray | None = None

    @classmethod
    def from_blobs(cls, items: Iterable[tuple[str, Any]], dimension: int) -> UserMatrix:
        """From (id, float32 bytes) pairs; absent or wrong-width blobs are skipped."""
        width = dimension * 4
        ids: list[str] = []
        blobs: list[bytes] = []
        for memory_id, blob in items:
            if blob is not None and len(blob) == width:
                ids.append(memory_id)
                blobs.append(bytes(blob))
        if not ids:
            return cls([], np.zeros((0, dimension), dtype=np.float32))
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), dimension)
        return cls(ids, _normalised(matrix))

    @classmethod
    def from_vectors(cls, items: Iterable[tuple[str, np.ndarray]], dimension: int) -> UserMatrix:
        pairs = [(i, v) for i, v in items if v is not None and v.shape == (dimension,)]
        if not pairs:
            return cls([], np.zeros((0, dimension), dtype=np.float32))
        matrix = np.stack([v for _, v in pairs]).astype(np.float32, copy=False)
        return cls([i for i, _ in pairs], _normalised(matrix))

    def nearest(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` best (id, cosine) pairs, best first."""
        if not self.ids or k <= 0:
            return []
        sims = matrix_times_vector(self.matrix, query)
        ids = self.ids
        k = min(int(k), len(ids))
        if k < len(ids):
            # Ties (equal vectors) go by ID, not by row: the rows' order depends on
            # how the matrix was built (read at once, or updated write by write).
            kth = sims[np.argpartition(-sims, k - 1)[:k]].min()
            above = np.flatnonzero(sims > kth).tolist()
            tied = sorted(np.flatnonzero(sims == kth).tolist(), key=ids.__getitem__)
            best = above + tied[: k - len(above)]
        else:
            best = list(range(len(ids)))
        best.sort(key=lambda i: (-sims[i], ids[i]))
        return [(ids[i], float(sims[i])) for i in best]

    async def nearest_soon(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """:meth:`nearest`, in a worker thread for a large matrix (``OFF_LOOP_FROM``)."""
        if self.matrix.size >= OFF_LOOP_FROM:
            return await asyncio.to_thread(self.nearest, query, k)
        return self.nearest(query, k)

    async def reaching_soon(self, query: np.ndarray, k: int) -> dict[str, float]:
        """:meth:`reaching`, in a worker thread for a large matrix (``OFF_LOOP_FROM``)."""
        if self.matrix.size >= OFF_LOOP_FROM:
            return await asyncio.to_thread(self.reaching, query, k)
        return self.reaching(query, k)

    def reaching(self, query: np.ndarray, k: int) -> dict[str, float]:
        """ID → cosine of the ``k`` best and of every row tied with the k-th (the
        caller breaks those ties by something the rows do not hold)."""
        if not self.ids or k <= 0:
            return {}
        sims = matrix_times_vector(self.matrix, query)
        if k < len(self.ids):
            kth = sims[np.argpartition(-sims, k - 1)[:k]].min()
            rows = np.flatnonzero(sims >= kth)
        else:
            rows = np.arange(len(self.ids))
        return {self.ids[i]: float(sims[i]) for i in rows.tolist()}


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)


def _appended(
    rows: np.ndarray, buffer: np.ndarray | None, new_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` followed by ``new_rows``, and the buffer they are the first rows of.
    Written into ``buffer`` past ``rows`` when it has room (the rows a matrix handed
    out before covers are never written), else into a new buffer with an eighth
    to spare: at 100k memories an add copied all 150 MB of them, 40 ms."""
    used, more = len(rows), len(new_rows)
    if buffer is None or rows.base is not buffer or buffer.shape[0] < used + more:
        capacity = used + more + max(used // 8, 64)
        buffer = np.empty((capacity, new_rows.shape[1]), dtype=np.float32)
        buffer[:used] = rows
    buffer[used : used + more] = new_rows
    return buffer[: used + more], buffer


class MatrixCache:
    """LRU of user → (signature, UserMatrix)."""

    def __init__(self, users: int = MATRIX_CACHE_USERS) -> None:
        self.users = users
        self._items: OrderedDict[Hashable, tuple[Any, UserMatrix]] = OrderedDict()

    def get(self, key: Hashable, signature: Any) -> UserMatrix | None:
        cached = self._items.get(key)
        if cached is None or cached[0] != signature:
            return None
        self._items.move_to_end(key)
        return cached[1]

    def put(self, key: Hashable, signature: Any, matrix: UserMatrix) -> None:
        self._items[key] = (signature, matrix)
        self._items.move_to_end(key)
        while len(self._items) > self.users:
            self._items.popitem(last=False)

    def drop(self, key: Hashable) -> None:
        self._items.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def advance(
        self,
        key: Hashable,
        before: Any,
        after: Any,
        upserts: dict[str, np.ndarray],
        removals: set[str],
    ) -> None:
        """A write section of this process took the user's vectors from signature
        ``before`` to ``after`` by ``upserts`` (ID → new vector) and ``removals``:
        a matrix cached at ``before`` is updated instead of read again. A matrix at
        any other signature is left alone (every search checks it against the store)."""
        cached = self._items.get(key)
        if cached is None or cached[0] != before:
            return
        matrix = cached[1]
        ids = list(matrix.ids)
        rows = matrix.matrix
        buffer = matrix.buffer
        gone = removals | upserts.keys()
        if not gone.isdisjoint(ids):
            keep = [i for i, memory_id in enumerate(ids) if memory_id not in gone]
            rows, buffer = rows[keep], None
            ids = [ids[i] for i in keep]
        added = [(memory_id, v) for memory_id, v in upserts.items() if memory_id not in removals]
        if added:
            new_rows = _normalised(np.stack([v for _, v in added]).astype(np.float32, copy=False))
            rows, buffer = _appended(rows, buffer, new_rows)
            ids += [memory_id for memory_id, _ in added]
        self._items[key] = (after, UserMatrix(ids, rows, buffer))

    def clear(self) -> None:
        self._items.clear()
