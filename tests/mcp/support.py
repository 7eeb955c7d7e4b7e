"""Helpers for driving `memchat mcp` with the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from memchat.engine import MemoryService

MEMCHAT = Path(sys.executable).with_name("memchat")
#: Where the server's stderr goes in tests (a file: a pipe nobody reads could fill up).
STDERR_NAME = "mcp-stderr.log"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a `memchat` process: SQLite and tokens in tmp_path, no
    config file, no MEMCHAT_* or OPENAI_* variables from the outside."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("MEMCHAT_", "OPENAI_", "SQLITE", "XDG_"))
    }
    env.update(
        SQLITE_MEMORY_DSN=f"sqlite:///{tmp_path / 'memories.db'}",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        HOME=str(tmp_path),
    )
    env.update(extra)
    return env


def stdio_client(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, errlog: Any = None, **client: Any
) -> Any:
    """An SDK Client that starts `memchat mcp ARGS` and talks to it over stdio."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client as transport

    params = StdioServerParameters(
        command=str(MEMCHAT), args=["mcp", *args], env=env or clean_env(tmp_path), cwd=str(tmp_path)
    )
    return Client(transport(params, errlog=errlog or sys.stderr), **client)


def payload(result: Any) -> Any:
    """The JSON a tool call returned (its one text block)."""
    assert len(result.content) == 1, result
    return json.loads(result.content[0].text)


def resource_json(result: Any) -> Any:
    assert len(result.contents) == 1, result
    return json.loads(result.contents[0].text)


@contextlib.asynccontextmanager
async def http_server(service: MemoryService, tokens: Any) -> AsyncIterator[str]:
    """`memchat mcp --http` in this process on a free loopback port: yields its URL."""
    from memchat.mcp.http import serve
    from memchat.mcp.server import MemoryMCP

    loop = asyncio.get_running_loop()
    url: asyncio.Future[str] = loop.create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve(MemoryMCP(service), tokens, "127.0.0.1", 0, ready=url.set_result, stop=stop)
    )
    try:
        yield await asyncio.wait_for(url, 30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def http_client(url: str, token: str | None, **client: Any) -> Any:
    """An SDK Client over streamable HTTP, with `Authorization: Bearer TOKEN` when given."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    http = create_mcp_http_client(headers=headers)
    return _ClosingClient(Client(streamable_http_client(url, http_client=http), **client), http)


class _ClosingClient:
    """Client and its own httpx client, closed together."""

    def __init__(self, client: Any, http: Any) -> None:
        self.client, self.http = client, http

    async def __aenter__(self) -> Any:
        await self.http.__aenter__()
        try:
            return await self.client.__aenter__()
        except BaseException:
            await self.http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.client.__aexit__(*exc)
        finally:
            await self.http.__aexit__(None, None, None)


async def crud_flow(client: Any) -> None:
    """Add, search, update, read as resources, delete — through `client`, as an agent would.
    The server must offer memory_delete (--enable-tool memory_delete)."""
    from memchat.mcp.server import MEMORIES_URI

    added = payload(
        await client.call_tool("memory_add", {"memory": "User likes green tea", "topics": ["drinks"]})
    )
    assert added == {
        "message": "Memory added successfully",
        "memory": "User likes green tea",
        "topics": ["drinks"],
    }

    found = payload(await client.call_tool("memory_search", {"query": "green tea"}))
    assert [hit["memory"] for hit in found["results"]] == ["User likes green tea"]
    old_id = found["results"][0]["id"]

    updated = payload(
        await client.call_tool(
            "memory_update", {"memory_id": old_id, "memory": "User likes jasmine tea", "topics": ["drinks"]}
        )
    )
    new_id = updated["memory_id"]
    assert new_id != old_id  # the ID follows the content, as in the chat

    listing = await client.list_resources()
    uris = [r.uri for r in listing.resources]
    assert uris == [MEMORIES_URI, f"{MEMORIES_URI}/{new_id}"]
    everything = resource_json(await client.read_resource(MEMORIES_URI))
    assert everything["count"] == 1
    assert [m["memory"] for m in everything["memories"]] == ["User likes jasmine tea"]
    one = resource_json(await client.read_resource(f"{MEMORIES_URI}/{new_id}"))
    assert one["id"] == new_id and one["memory"] == "User likes jasmine tea" and one["topics"] == ["drinks"]
    assert one["updated"] >= one["created"]

    deleted = payload(await client.call_tool("memory_delete", {"memory_id": new_id}))
    assert deleted == {"message": "Memory deleted successfully", "memory_id": new_id}
    assert payload(await client.call_tool("memory_search", {"query": "jasmine tea"}))["count"] == 0
    assert resource_json(await client.read_resource(MEMORIES_URI)) == {"count": 0, "memories": []}
