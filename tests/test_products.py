"""The engine's small products bypass BLAS's threads (memchat/engine/products.py)
and must give what ``@`` gives, on both sides of the size where BLAS takes over."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from memchat.engine import products


@pytest.mark.parametrize(("blas_from", "split_from"), [(products.BLAS_FROM, products.SPLIT_FROM), (1, 1)])
def test_products_equal_matmul(monkeypatch, blas_from: int, split_from: int) -> None:
    monkeypatch.setattr(products, "BLAS_FROM", blas_from)
    monkeypatch.setattr(products, "SPLIT_FROM", split_from)
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((1000, 384)).astype(np.float32)
    vector = rng.standard_normal(384).astype(np.float32)
    pieces = rng.standard_normal((9, 384)).astype(np.float32)
    got = products.matrix_times_vector(matrix, vector)
    assert got.shape == (1000,) and got.dtype == np.float32
    np.testing.assert_allclose(got, matrix @ vector, rtol=1e-4, atol=1e-4)
    both = products.rows_times_rows(pieces, matrix)
    assert both.shape == (9, 1000) and both.dtype == np.float32
    np.testing.assert_allclose(both, pieces @ matrix.T, rtol=1e-4, atol=1e-4)


def test_empty_operands_give_empty_products() -> None:
    empty = np.zeros((0, 384), dtype=np.float32)
    assert products.matrix_times_vector(empty, np.ones(384, dtype=np.float32)).shape == (0,)
    assert products.rows_times_rows(np.ones((3, 384), dtype=np.float32), empty).shape == (3, 0)


@pytest.mark.parametrize("rows", [1, 7, 1001, 30_000])
def test_a_split_product_gives_every_row_what_one_pass_gives(monkeypatch, rows: int) -> None:
    """Split over threads or not, each memory's similarity is the same number (a
    search's ranking must not depend on how many cores the machine has)."""
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    vector = rng.standard_normal(384).astype(np.float32)
    monkeypatch.setattr(products, "SPLIT_FROM", 10**12)
    whole = products.matrix_times_vector(matrix, vector)
    monkeypatch.setattr(products, "SPLIT_FROM", 1)
    monkeypatch.setattr(products, "_shares", lambda: 3)
    split = products.matrix_times_vector(matrix, vector)
    assert split.shape == (rows,) and split.dtype == np.float32
    assert np.array_equal(split, whole)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_splits_products_on_its_own_threads(monkeypatch) -> None:
    """A program that forks after a search (a preforking server) must not hand its
    child's shares to the parent's threads, which the child does not have."""
    monkeypatch.setattr(products, "SPLIT_FROM", 1)
    monkeypatch.setattr(products, "_shares", lambda: 3)
    matrix = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    vector = np.ones(3, dtype=np.float32)
    expected = products.matrix_times_vector(matrix, vector)  # the parent's pool now exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the product comes back right, within 10 s
        signal.alarm(10)
        ok = np.array_equal(products.matrix_times_vector(matrix, vector), expected)
        os._exit(0 if ok else 1)
    os.close(write)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
