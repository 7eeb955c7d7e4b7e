from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from memchat.engine import MemoryService

from .harness import HARNESSES, Harness


@pytest.fixture(params=list(HARNESSES))
def harness(request: pytest.FixtureRequest, tmp_path) -> Harness:
    return HARNESSES[request.param](tmp_path)


@pytest.fixture
async def make_service(harness: Harness) -> AsyncIterator[Callable[..., MemoryService]]:
    """Build MemoryService objects on this test's backend namespace."""
    made: list[MemoryService] = []

    def make(**options: Any) -> MemoryService:
        svc = MemoryService(harness.make_store(), **options)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        await svc.close()
