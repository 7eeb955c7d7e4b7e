"""Test-wide rules.

With MEMCHAT_REQUIRE_SERVICES=1 (set by .ci/run) a test that would skip
because a service or driver is unavailable fails instead: CI must prove every
backend, a laptop may run what it can.
"""

from __future__ import annotations

import pytest

from tests.support import REQUIRE_SERVICES


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_SERVICES and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under MEMCHAT_REQUIRE_SERVICES=1: {report.longrepr}"
