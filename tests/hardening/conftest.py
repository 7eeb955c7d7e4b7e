"""Fixtures of the hardening suite: every backend through the conformance harness.

Hypothesis profiles (strategies.py): "ci" is the default — few examples, so the
suite adds a couple of minutes on nine backends; ``HYPOTHESIS_PROFILE=thorough``
runs many more for a manual hunt. No deadline: real servers have jitter.

A property test draws many examples inside ONE test function, so it gets one
namespace (one harness) per function and keeps examples apart with a fresh
user per example, never a fresh store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from memchat.engine import MemoryService
from tests.conformance.harness import HARNESSES, Harness
from tests.conformance.test_vectors import HashEmbedder

from .strategies import register_profiles

T = TypeVar("T")

register_profiles()


class Rig:
    """One backend namespace, an event loop of its own, and services on it.

    The tests are synchronous (hypothesis's state machines are), so every
    coroutine runs on this rig's loop: the stores' connections stay bound to
    one loop for the whole test function.
    """

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.name = harness.name
        self._runner = asyncio.Runner()
        self._services: list[MemoryService] = []

    def service(self, **options: Any) -> MemoryService:
        # These properties are about data safety (errors, isolation, nothing lost),
        # not ranking: a deterministic word-hash embedder keeps every write's vector
        # path exercised without running the offline model on thousands of random
        # texts. Ranking with the real model is tests/conformance/test_semantic_search.py.
        options.setdefault("embedder", HashEmbedder())
        svc = MemoryService(self.harness.make_store(), **options)
        self._services.append(svc)
        return svc

    def run(self, work: Awaitable[T] | Callable[[], Awaitable[T]]) -> T:
        coro = work() if callable(work) else work
        return self._runner.run(coro)  # type: ignore[arg-type]

    def close(self) -> None:
        try:
            for svc in self._services:
                with contextlib.suppress(Exception):
                    self._runner.run(svc.close())
        finally:
            self._runner.close()


@pytest.fixture(params=list(HARNESSES))
def rig(request: pytest.FixtureRequest, tmp_path) -> Iterator[Rig]:
    made = Rig(HARNESSES[request.param](tmp_path))
    try:
        yield made
    finally:
        made.close()
