"""Helpers shared by the test modules."""

from __future__ import annotations

import os

import pytest

REQUIRE_SERVICES = os.environ.get("MEMCHAT_REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


def require(condition: bool, reason: str) -> None:
    """Skip (or fail under MEMCHAT_REQUIRE_SERVICES) when ``condition`` is false."""
    if condition:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"required service unavailable: {reason}", pytrace=False)
    pytest.skip(reason)
