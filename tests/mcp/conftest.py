from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.support import require

from .support import MEMCHAT, STDERR_NAME, stdio_client


@pytest.fixture(autouse=True)
def _sdk() -> None:
    pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install -e '.[mcp]'")
    require(MEMCHAT.exists(), f"{MEMCHAT} is not installed (pip install -e .)")


@pytest.fixture
def stdio(tmp_path: Path):
    """stdio(*args, env=None) -> a Client running `memchat mcp ARGS`; the server's
    stderr goes to tmp_path/mcp-stderr.log (printed when a test fails)."""
    errlog = open(tmp_path / STDERR_NAME, "a")  # noqa: SIM115
    yield functools.partial(stdio_client, tmp_path, errlog=errlog)
    errlog.close()
    log = (tmp_path / STDERR_NAME).read_text()
    print(f"--- memchat mcp stderr ---\n{log}")
