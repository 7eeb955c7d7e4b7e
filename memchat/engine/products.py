"""The engine's small matrix products, kept off BLAS's threads.

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
products bypass BLAS instead; from :data:`BLAS_FROM` multiply-adds (about 50k
memories), where the threads pay for their wake-up, the product is BLAS's again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BLAS_FROM", "matrix_times_vector", "rows_times_rows"]

#: Multiply-adds from which a product goes to BLAS (50k memories × 384 ≈ 19M).
BLAS_FROM = 20_000_000


def matrix_times_vector(matrix: Any, vector: Any) -> Any:
    """``matrix @ vector`` (rows · vector)."""
    if matrix.size >= BLAS_FROM:
        return matrix @ vector
    return np.einsum("ij,j->i", matrix, vector)


def rows_times_rows(left: Any, right: Any) -> Any:
    """``left @ right.T``: every row of ``left`` with every row of ``right``."""
    if left.shape[0] * right.size >= BLAS_FROM:
        return left @ right.T
    out = np.empty((left.shape[0], right.shape[0]), dtype=np.result_type(left, right))
    for i, row in enumerate(left):  # one pass over ``right`` per row: a few query pieces
        out[i] = np.einsum("ij,j->i", right, row)
    return out
