"""Network helpers that both the app (the MCP server) and the backends (the
Chroma client) use; this module imports nothing of memchat, so every layer may
import it."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost``, or an IPv4 or IPv6
    loopback address. Any other name is not (it may resolve anywhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
