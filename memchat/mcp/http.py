"""Streamable HTTP for the MCP server: every request needs a bearer token.

The SDK's bearer middleware asks ``TokenStoreVerifier`` about the token of
each request; no token, a malformed, unknown or revoked one are all answered
401 before anything reaches the MCP layer. A valid token's (app, user) rides
on the request as claims, which ``MemoryMCP.key_for`` reads — so a token
reaches its own user's memories and no one else's. An MCP session belongs to
the token that opened it: another token using its id is answered as if the
session did not exist (the SDK's session-owner check).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterator
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from memchat.engine.model import ConfigError

from .server import APP_CLAIM, USER_CLAIM, MemoryMCP
from .tokens import TokenStore

PATH = "/mcp"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


class TokenStoreVerifier:
    """The SDK's TokenVerifier over memchat's token file."""

    def __init__(self, tokens: TokenStore) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        record = self.tokens.verify(token)
        if record is None:
            return None
        return AccessToken(
            token=token,
            client_id=record.id,  # sessions are bound to the token that opened them
            scopes=[],
            subject=record.user,
            claims={APP_CLAIM: record.app, USER_CLAIM: record.user},
        )


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (loopback), ``[::1]:PORT`` for IPv6."""
    text = value.strip()
    host, port_text = DEFAULT_HOST, text
    if text.startswith("["):
        inside, _, rest = text[1:].partition("]")
        host, port_text = inside, rest.removeprefix(":")
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
        host = host or DEFAULT_HOST
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535 or not host:
        raise ConfigError(
            f"--http {value!r} is not an address: give HOST:PORT such as 127.0.0.1:{DEFAULT_PORT}, "
            f"or just a port ({DEFAULT_PORT}) for this machine only"
        )
    return host, int(port_text)


def build_app(mcp: MemoryMCP, tokens: TokenStore, *, host: str, port: int) -> Starlette:
    """The ASGI app: ``/mcp`` behind the bearer check."""
    base = f"http://{_url_host(host)}:{port}"
    return mcp.server.streamable_http_app(
        streamable_http_path=PATH,
        host=host,  # loopback turns on the SDK's DNS-rebinding protection (Host/Origin checks)
        # The SDK's bearer check is configured through its OAuth settings; memchat
        # issues its own tokens, so the issuer is the server itself.
        auth=AuthSettings(issuer_url=AnyHttpUrl(base), resource_server_url=None),
        token_verifier=TokenStoreVerifier(tokens),
    )


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving, so port 0 picks a free port the caller can print."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --http port"
        ) from exc
    # Answers are small: without NODELAY each waits ~40 ms for the client's delayed ACK
    # (asyncio sets it only on the sockets it creates itself).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(
    mcp: MemoryMCP,
    tokens: TokenStore,
    host: str,
    port: int,
    *,
    ready: Callable[[str], Any] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until ctrl+c, SIGTERM or ``stop``; ``ready`` gets the URL once listening."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises a captured ctrl+c once it has stopped, which would
            # interrupt the store's closing below; the handlers here just stop it.
            yield

    sock = bind(host, port)
    port = sock.getsockname()[1]
    app = build_app(mcp, tokens, host=host, port=port)
    # uvicorn logs to stderr; its access log would list every call, so warnings only.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = Server(config)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(signum, stop.set)
            handled.append(signum)

    async def stop_when_asked() -> None:
        await stop.wait()
        server.should_exit = True

    watcher = asyncio.create_task(stop_when_asked())
    if ready is not None:
        ready(f"http://{_url_host(host)}:{port}{PATH}")
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        for signum in handled:
            loop.remove_signal_handler(signum)
        sock.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
