"""memchat.net: the loopback check shared by the MCP server and the Chroma client."""

from __future__ import annotations

import pytest

from memchat.net import is_loopback


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.8.9.10", "::1"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.2", "example.com", "localhost.example", ""])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)
