"""Start the MCP server the settings describe, over stdio or streamable HTTP.

Everything the server says goes to stderr: on stdio, stdout is the protocol.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import sys
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from memchat.engine import UserKey

if TYPE_CHECKING:
    from memchat.engine import MemoryService
    from memchat.settings import Settings

    from .tokens import TokenStore

log = logging.getLogger("memchat.mcp")


def _say(line: str) -> None:
    print(f"memchat mcp: {line}", file=sys.stderr, flush=True)


def start_warm_up(service: MemoryService) -> threading.Thread:
    """Load what the first search needs (the Chinese word segmentation dictionary,
    an offline embedding model: about a second) in a daemon thread now, so a
    client's first search does not wait for it; says so on stderr when done."""

    def run() -> None:
        started = time.perf_counter()
        try:
            service.warm_up()
        except Exception as exc:  # the first search says what is wrong, in one sentence
            log.debug("warm-up failed: %s", exc)
            return
        model = " and the embedding model" if service.has_embedder else ""
        _say(f"search ready: word segmentation{model} loaded in {time.perf_counter() - started:.1f} s")

    thread = threading.Thread(target=run, name="memchat-warm-up", daemon=True)
    thread.start()
    return thread


def exit_if_stuck(after: float) -> threading.Thread:
    """Once the client has gone, end the process within ``after`` seconds whatever
    still waits: the calls under way were drained (bounded) and their writes
    committed, so a server left running would only hold its client's slot and
    the store. Says so, with every thread's stack for a bug report, on stderr."""

    def run() -> None:
        time.sleep(after)
        _say(f"still shutting down after {after:g} s; exiting now (every thread's stack follows)")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(0)

    thread = threading.Thread(target=run, name="memchat-exit-watchdog", daemon=True)
    thread.start()
    return thread


def shutdown_limit(settings: Settings) -> float:
    """How long an exit may take: draining the calls under way and closing the store
    are each bounded by --timeout; a few seconds more for the interpreter itself."""
    return 2 * settings.timeout + 5


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("memchat mcp: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


def require_sdk() -> None:
    """The MCP SDK is an extra: without it, one line naming the install."""
    try:
        import mcp.server  # noqa: F401
    except ImportError as exc:
        from memchat.engine.model import ConfigError

        raise ConfigError("memchat mcp needs the MCP SDK: pip install 'memchat[mcp]'") from exc


def mcp_settings(settings: Settings) -> Settings:
    """The chat's settings minus auto extraction: the server has no conversation to
    extract from, and the clients call the tools themselves (agentic mode)."""
    return replace(settings, extract=False)


async def run_stdio(settings: Settings) -> None:
    from mcp.server.stdio import stdio_server

    from memchat.agent.factory import create_service
    from memchat.console import ProgressPrinter

    from .server import MemoryMCP

    key = UserKey(settings.app, settings.user)
    async with create_service(mcp_settings(settings), progress=ProgressPrinter(sys.stderr)) as service:
        await service.open()  # a backend that is down is one line now, not an error per call
        start_warm_up(service)
        mcp = MemoryMCP(service, key=key)
        _say(
            f"serving {len(mcp.tools)} tools ({', '.join(mcp.tools)}) on stdio for user {key.user!r} "
            f"in app {key.app!r}, memory {settings.memory}"
        )
        watcher = asyncio.create_task(mcp.watch())
        try:
            async with stdio_server() as (read, write):
                await mcp.server.run(read, write, mcp.initialization_options())
        finally:
            exit_if_stuck(shutdown_limit(settings))
            watcher.cancel()
            await mcp.drain(settings.timeout)


async def run_http(settings: Settings, host: str, port: int, tokens: TokenStore) -> None:
    from memchat.agent.factory import create_service
    from memchat.console import ProgressPrinter
    from memchat.net import is_loopback

    from .http import serve
    from .server import MemoryMCP

    count = len(tokens.records())  # a damaged token file stops the start with one line
    async with create_service(mcp_settings(settings), progress=ProgressPrinter(sys.stderr)) as service:
        await service.open()
        start_warm_up(service)
        mcp = MemoryMCP(service)

        def ready(url: str) -> None:
            _say(f"serving {len(mcp.tools)} tools on {url} (streamable HTTP), memory {settings.memory}")
            _say(f"every request needs 'Authorization: Bearer <token>'; {count} token(s) in {tokens.path}")
            if not count:
                _say("no token yet: create one with `memchat mcp token create --user <user>`")
            if not is_loopback(host):
                _say(
                    f"WARNING: {host} is reachable from other machines; tokens travel in clear text over HTTP"
                )

        watcher = asyncio.create_task(mcp.watch())
        try:
            await serve(mcp, tokens, host, port, ready=ready)
        finally:
            exit_if_stuck(shutdown_limit(settings))
            watcher.cancel()
            await mcp.drain(settings.timeout)
