"""The engine's matrix products, kept off BLAS's threads.

A search multiplies the query by a user's vectors (10k × 384 at 10k memories)
and a few query word pieces by a hundred memories' pieces. numpy hands such a
product to OpenBLAS, which splits anything above a few thousand elements over
its threads; on a busy machine the second thread's wake-up costs far more than
the product: on this project's 2-core machine, beside a database server at
work, a 10k × 384 product took 8.0 ms at p50 on BLAS's two threads, against
0.5 ms in numpy's own single-threaded loops (``einsum``), and the word-piece
product had an 8 ms p95 for a 0.2 ms median (benchmarks/README.md, "Products
off BLAS's threads"). BLAS's thread count is process-wide (setting it for one
product would change it for every thread of the host program), so the small
products bypass BLAS instead; the word pieces' product goes back to BLAS
from :data:`BLAS_FROM` multiply-adds, where the threads pay for their wake-up.

A large matrix times a vector (a search from about 10k memories on) is split
by rows over the engine's own worker threads instead, each running ``einsum`` on
its share. BLAS's threads stay busy-waiting for more work after a product;
on two cores they took the CPU the query's next embedding needed: at 100k
memories, a BLAS product took 10 ms and the embedding after it 51 ms instead
of 31, where two ``einsum`` halves take 9 ms and leave the embedding alone
(benchmarks/README.md, "Twelfth session"). Each row's sum is computed the same
way whatever the split, so the split does not change a result.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["BLAS_FROM", "SPLIT_FROM", "matrix_times_vector", "rows_times_rows"]

#: Multiply-adds from which a product of many rows goes to BLAS (50k memories × 384 ≈ 19M).
BLAS_FROM = 20_000_000
#: Multiply-adds from which a matrix times a vector is split over worker threads
#: (below, handing a share to a thread costs more than it saves).
SPLIT_FROM = 4_000_000
#: Most shares a product is split into.
_MAX_SHARES = 4

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _shares() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(_MAX_SHARES, cpus))


def _workers() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_MAX_SHARES - 1, thread_name_prefix="memchat-product")
        return _pool


def _forget_workers() -> None:
    """In a forked child: the parent's worker threads do not exist there, and a
    share handed to them would never be computed."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def matrix_times_vector(matrix: Any, vector: Any) -> Any:
    """``matrix @ vector`` (rows · vector), in shares of rows over worker threads
    for a large matrix (the calling thread computes one share itself)."""
    rows = matrix.shape[0]
    shares = _shares() if matrix.size >= SPLIT_FROM else 1
    if shares <= 1 or rows < 2 * shares:
        return np.einsum("ij,j->i", matrix, vector)
    out = np.empty(rows, dtype=np.result_type(matrix, vector))
    bounds = [rows * i // shares for i in range(shares + 1)]

    def share(i: int) -> None:
        start, stop = bounds[i], bounds[i + 1]
        np.einsum("ij,j->i", matrix[start:stop], vector, out=out[start:stop])

    pending = [_workers().submit(share, i) for i in range(1, shares)]
    share(0)
    for done in pending:
        done.result()
    return out


def rows_times_rows(left: Any, right: Any) -> Any:
    """``left @ right.T``: every row of ``left`` with every row of ``right``."""
    if left.shape[0] * right.size >= BLAS_FROM:
        return left @ right.T
    out = np.empty((left.shape[0], right.shape[0]), dtype=np.result_type(left, right))
    for i, row in enumerate(left):  # one pass over ``right`` per row: a few query pieces
        out[i] = np.einsum("ij,j->i", right, row)
    return out
