"""`memchat mcp --http`: streamable HTTP on a free loopback port (uvicorn in this
process), driven by the SDK's streamable HTTP client. Every request needs a
bearer token; a token reaches its own user's memories and nobody else's."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx2
import pytest

from backends import create
from memchat.engine import MemoryService, UserKey
from memchat.engine.tools import ToolSettings
from memchat.engine.vectors import NO_EMBEDDER
from memchat.mcp.server import MEMORIES_URI
from memchat.mcp.tokens import TokenStore

from .support import MEMCHAT, clean_env, crud_flow, http_client, http_server, payload, resource_json

ALICE = UserKey("memory-chat", "alice")
BOB = UserKey("memory-chat", "bob")
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.fixture
async def service(tmp_path: Path):
    tools = ToolSettings(enabled={"memory_delete": True})
    store = create("sqlite", dsn=str(tmp_path / "memories.db"))
    async with MemoryService(store, embedder=NO_EMBEDDER, tool_settings=tools) as svc:
        yield svc


@pytest.fixture
def tokens(tmp_path: Path) -> TokenStore:
    return TokenStore(tmp_path / "tokens.json")


async def test_the_tools_and_the_resource_over_http(service, tokens) -> None:
    token, _ = tokens.create(ALICE)
    async with http_server(service, tokens) as url, http_client(url, token) as client:
        assert [t.name for t in (await client.list_tools()).tools] == [t.name for t in service.tools()]
        await crud_flow(client)


@pytest.mark.parametrize("backend", ["redis", "postgres", "mysql"])
async def test_the_same_tools_on_a_server_backend(backend, tokens, tmp_path) -> None:
    """The adapter knows no backend: the flow passes on the real servers too."""
    from tests.conformance.harness import HARNESSES

    store = HARNESSES[backend](tmp_path).make_store()
    tools = ToolSettings(enabled={"memory_delete": True})
    token, _ = tokens.create(ALICE)
    async with (
        MemoryService(store, embedder=NO_EMBEDDER, tool_settings=tools) as service,
        http_server(service, tokens) as url,
        http_client(url, token) as client,
    ):
        await crud_flow(client)


async def test_two_users_with_two_tokens_are_isolated(service, tokens) -> None:
    alice_token, _ = tokens.create(ALICE)
    bob_token, _ = tokens.create(BOB)
    async with http_server(service, tokens) as url:
        async with http_client(url, alice_token) as alice:
            await alice.call_tool("memory_add", {"memory": "Alice's bank PIN hint is her cat's name"})
            # Arguments naming another user are ignored: the token says who is calling.
            await alice.call_tool(
                "memory_add", {"memory": "Alice likes tea", "user_id": "bob", "app_name": "x"}
            )
            alice_ids = [m["id"] for m in resource_json(await alice.read_resource(MEMORIES_URI))["memories"]]
        assert len(alice_ids) == 2

        async with http_client(url, bob_token) as bob:
            assert payload(await bob.call_tool("memory_search", {"query": "Alice PIN cat tea"}))["count"] == 0
            assert payload(await bob.call_tool("memory_load", {}))["count"] == 0
            assert resource_json(await bob.read_resource(MEMORIES_URI)) == {"count": 0, "memories": []}
            assert [r.uri for r in (await bob.list_resources()).resources] == [MEMORIES_URI]
            with pytest.raises(Exception, match="no such memory"):
                await bob.read_resource(f"{MEMORIES_URI}/{alice_ids[0]}")
            for memory_id in alice_ids:
                deleted = await bob.call_tool("memory_delete", {"memory_id": memory_id})
                assert deleted.is_error and "not found" in payload(deleted)["error"]
                updated = await bob.call_tool(
                    "memory_update", {"memory_id": memory_id, "memory": "Bob was here"}
                )
                assert updated.is_error
            await bob.call_tool("memory_add", {"memory": "Bob likes coffee"})

    assert sorted(e.memory.text for e in await service.read(ALICE)) == [
        "Alice likes tea",
        "Alice's bank PIN hint is her cat's name",
    ]
    assert [e.memory.text for e in await service.read(BOB)] == ["Bob likes coffee"]


async def test_no_token_or_a_wrong_one_gets_401_and_nothing_else(service, tokens) -> None:
    good, _ = tokens.create(ALICE)
    revoked, revoked_record = tokens.create(ALICE)
    tokens.revoke(revoked_record.id)
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")  # right id, wrong secret
    add = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "memory_add", "arguments": {"memory": "intruder was here"}},
    }
    async with http_server(service, tokens) as url:
        async with httpx2.AsyncClient() as http:
            for authorization in (None, "Bearer", "Bearer nonsense", f"Bearer {forged}", f"Bearer {revoked}",
                                  f"Basic {good}", f"Bearer {good}x"):  # fmt: skip
                headers = dict(ACCEPT) | ({"Authorization": authorization} if authorization else {})
                for body in (INITIALIZE, LIST_TOOLS, add):
                    response = await http.post(url, json=body, headers=headers)
                    assert response.status_code == 401, (authorization, response.text)
                    assert response.json() == {
                        "error": "invalid_token",
                        "error_description": "Authentication required",
                    }
                    assert response.headers["www-authenticate"].startswith("Bearer ")
            # The one good token passes the same door.
            ok = await http.post(
                url, json=INITIALIZE, headers=dict(ACCEPT) | {"Authorization": f"Bearer {good}"}
            )
            assert ok.status_code == 200

        # The SDK's client without a token, or with a wrong one, never connects.
        for token in (None, forged, revoked):
            with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in task-group errors
                async with http_client(url, token) as client:
                    await client.list_tools()
    assert await service.read(ALICE) == []


async def test_a_session_answers_only_the_token_that_opened_it(service, tokens) -> None:
    alice_token, _ = tokens.create(ALICE)
    bob_token, _ = tokens.create(BOB)
    async with http_server(service, tokens) as url, httpx2.AsyncClient() as http:
        opened = await http.post(
            url, json=INITIALIZE, headers=dict(ACCEPT) | {"Authorization": f"Bearer {alice_token}"}
        )
        session = opened.headers["mcp-session-id"]
        hijack = dict(ACCEPT) | {"Authorization": f"Bearer {bob_token}", "Mcp-Session-Id": session,
                                 "Mcp-Protocol-Version": "2025-06-18"}  # fmt: skip
        response = await http.post(url, json=LIST_TOOLS, headers=hijack)
        assert response.status_code == 404


async def test_a_token_revoked_on_the_command_line_stops_working_at_once(service, tokens, tmp_path) -> None:
    token, record = tokens.create(ALICE)
    async with http_server(service, tokens) as url:
        async with http_client(url, token) as client:
            assert payload(await client.call_tool("memory_load", {}))["count"] == 0
        env = clean_env(tmp_path, MEMCHAT_MCP_TOKENS=str(tokens.path))
        listed = subprocess.run(
            [str(MEMCHAT), "mcp", "token", "list"], env=env, capture_output=True, text=True
        )
        assert record.id in listed.stdout and token not in listed.stdout
        revoked = subprocess.run(
            [str(MEMCHAT), "mcp", "token", "revoke", record.id], env=env, capture_output=True, text=True
        )
        assert revoked.returncode == 0, revoked.stderr
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                url, json=INITIALIZE, headers=dict(ACCEPT) | {"Authorization": f"Bearer {token}"}
            )
        assert response.status_code == 401


async def test_each_user_hears_only_of_their_own_changes(service, tokens) -> None:
    from mcp.shared.subscriptions import ResourceUpdated

    alice_token, _ = tokens.create(ALICE)
    bob_token, _ = tokens.create(BOB)
    async with (
        http_server(service, tokens) as url,
        http_client(url, alice_token) as alice,
        alice.listen(resource_subscriptions=[MEMORIES_URI]) as events,
    ):
        async with http_client(url, bob_token) as bob:
            await bob.call_tool("memory_add", {"memory": "Bob likes coffee"})
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(aiter(events)), 1.0)
        await alice.call_tool("memory_add", {"memory": "Alice likes tea"})
        assert await asyncio.wait_for(anext(aiter(events)), 10) == ResourceUpdated(uri=MEMORIES_URI)


async def test_a_huge_request_is_refused_and_the_server_keeps_serving(service, tokens) -> None:
    token, _ = tokens.create(ALICE)
    async with http_server(service, tokens) as url, http_client(url, token) as client:
        # Over memchat's 1 MiB argument limit: the chat's sentence.
        big = await client.call_tool("memory_add", {"memory": "x", "padding": "y" * (2 << 20)})
        assert big.is_error and "over 1048576 bytes" in payload(big)["error"]
        # Over the HTTP body limit (4 MiB): refused before it is parsed.
        started = time.monotonic()
        async with httpx2.AsyncClient() as http:
            headers = dict(ACCEPT) | {"Authorization": f"Bearer {token}"}
            response = await http.post(url, content=b"[" + b" " * (5 << 20) + b"]", headers=headers)
        assert response.status_code == 413 and time.monotonic() - started < 30
        assert (
            payload(await client.call_tool("memory_add", {"memory": "Alice likes tea"}))["memory"]
            == "Alice likes tea"
        )


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl+c", "SIGTERM"])
async def test_the_real_command_serves_and_stops_cleanly(tmp_path, stop) -> None:
    """`memchat mcp --http 127.0.0.1:0` as a user starts it: it says where it listens
    (stderr), serves a token's user, and ctrl+c / SIGTERM end it with nothing on stdout."""
    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    token = subprocess.run(
        [str(MEMCHAT), "mcp", "token", "create", "--user", "alice"], env=env, capture_output=True, text=True
    ).stdout.strip()
    server = subprocess.Popen(
        [str(MEMCHAT), "mcp", "--http", "127.0.0.1:0", "--memory", "sqlite"], env=env, cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        first = await asyncio.to_thread(server.stderr.readline)
        url = re.search(r"on (http://127\.0\.0\.1:\d+/mcp) ", first)
        assert url, first
        async with http_client(url.group(1), token) as client:
            added = payload(await client.call_tool("memory_add", {"memory": "Alice likes tea"}))
            assert added["memory"] == "Alice likes tea"
        server.send_signal(stop)
        out, err = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert out == "" and "Traceback" not in err and "ERROR" not in err
    store = create("sqlite", dsn=str(tmp_path / "memories.db"))
    async with MemoryService(store, embedder=NO_EMBEDDER) as svc:
        assert [e.memory.text for e in await svc.read(ALICE)] == ["Alice likes tea"]
