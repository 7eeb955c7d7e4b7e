"""The vector contract (vector_contract.py) on every store with its own
vector index: ranking and exact cosine scores, a put without a vector keeping
the stored one, all-or-nothing sections, the fixed dimension, a crowded-out
user still getting k, two store objects serialising one user, and semantic
and hybrid search through the engine with the offline embedder.

Each test gets a fresh namespace on its backend from the conformance
harness (harness.py); vectors are DIM-dimensional unless a check asks for 384.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from backends import create
from backends.base import Store

from . import vector_contract as contract
from .harness import HARNESSES

#: The stores whose vectors live in an index made for one dimension
#: (``fixed_dimension``); the others keep vectors beside their rows and are
#: covered by test_vectors.py.
VECTOR_BACKENDS = ("sqlitevec", "mysqlvec", "pgvector", "chromadb")


@pytest.fixture(params=VECTOR_BACKENDS)
async def make_store(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[contract.MakeStore]:
    """Opened stores of one vector backend on one fresh namespace, closed afterwards."""
    harness = HARNESSES[request.param](tmp_path)
    made: list[Store] = []

    async def make(**options: Any) -> Store:
        store = create(harness.name, **{**harness.options, "dimension": contract.DIM, "env": {}, **options})
        made.append(store)
        await store.open()
        return store

    yield make
    for store in made:
        await store.close()


def test_the_vector_backends_are_the_fixed_dimension_stores() -> None:
    from backends import store_class

    fixed = {name for name in HARNESSES if store_class(name).fixed_dimension}
    assert fixed == set(VECTOR_BACKENDS)


async def test_declares_vector_search(make_store) -> None:
    await contract.check_protocol(make_store)


async def test_ranking_and_exact_cosine_scores(make_store) -> None:
    await contract.check_ranking_and_scores(make_store)


async def test_put_without_a_vector_keeps_the_stored_embedding(make_store) -> None:
    await contract.check_none_keeps_the_stored_embedding(make_store)


async def test_a_failed_section_writes_no_row_and_no_vector(make_store) -> None:
    await contract.check_failed_section_changes_nothing(make_store)


async def test_a_vector_of_the_wrong_dimension_is_rejected(make_store) -> None:
    await contract.check_wrong_dimension_is_rejected(make_store)


async def test_a_user_crowded_out_by_another_still_gets_k(make_store) -> None:
    await contract.check_crowded_user_still_gets_k(make_store)


async def test_two_store_objects_serialise_one_user(make_store) -> None:
    await contract.check_store_objects_share_the_user_lock(lambda: make_store(dimension=384))


async def test_semantic_and_hybrid_search_with_the_offline_embedder(make_store) -> None:
    await contract.check_semantic_search_with_the_offline_embedder(make_store)
