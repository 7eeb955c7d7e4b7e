"""Test-wide rules.

With MEMCHAT_REQUIRE_SERVICES=1 (set by .ci/run) a test that would skip
because a service or driver is unavailable fails instead: CI must prove every
backend, a laptop may run what it can.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import REQUIRE_SERVICES


@pytest.fixture(scope="session", autouse=True)
def _shared_test_servers() -> Iterator[None]:
    """At the session's end: delete the namespaces tests made on shared servers,
    then stop the throwaway servers tests started (both happen on first use)."""
    yield
    from tests.conformance.harness import cleanup_namespaces
    from tests.vector_servers import stop_servers

    cleanup_namespaces()
    stop_servers()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_SERVICES and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under MEMCHAT_REQUIRE_SERVICES=1: {report.longrepr}"
