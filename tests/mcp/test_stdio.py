"""`memchat mcp` over stdio, driven by the MCP SDK's own client in a real subprocess:
the chat's tools, rules and errors, the memories as resources, change notifications."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from backends import create
from memchat.engine import MemoryService, UserKey
from memchat.engine.tools import ToolSettings, unknown_tool_result
from memchat.engine.vectors import NO_EMBEDDER

from .support import MEMCHAT, clean_env, crud_flow, payload, resource_json


def chat_tools(enabled: dict[str, bool] | None = None) -> list:
    """The tools the chat would give its model with these settings (in process)."""
    service = MemoryService(
        create("inmemory"), embedder=NO_EMBEDDER, tool_settings=ToolSettings(enabled=enabled or {})
    )
    return service.tools()


async def read_db(tmp_path: Path, key: UserKey) -> list:
    store = create("sqlite", dsn=str(tmp_path / "memories.db"))
    async with MemoryService(store, embedder=NO_EMBEDDER) as svc:
        return await svc.read(key)


@pytest.mark.parametrize(
    ("args", "extra_env", "enabled"),
    [
        ((), {}, {}),
        (("--enable-tool", "memory_delete", "--disable-tool", "memory_load"), {},
         {"memory_delete": True, "memory_load": False}),
        ((), {"MEMCHAT_ENABLE_TOOLS": "memory_clear"}, {"memory_clear": True}),
    ],
    ids=["defaults", "flags", "environment"],
)  # fmt: skip
async def test_offers_the_chats_tools_with_their_names_descriptions_and_schemas(
    stdio, tmp_path, args, extra_env, enabled
) -> None:
    expected = chat_tools(enabled)
    async with stdio(*args, env=clean_env(tmp_path, MEMCHAT_EMBEDDER="none", **extra_env)) as client:
        listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in expected]
    for offered, tool in zip(listed, expected, strict=True):
        assert offered.description == tool.description
        assert offered.input_schema == tool.parameters
    hints = {t.name: t.annotations for t in listed}
    assert hints["memory_search"].read_only_hint is True
    if "memory_delete" in hints:
        assert hints["memory_delete"].destructive_hint is True


async def test_add_search_update_delete_and_read_the_resource(stdio, tmp_path) -> None:
    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    async with stdio(
        "--enable-tool", "memory_delete", "--user", "alice", "--app", "notes", env=env
    ) as client:
        await crud_flow(client)
        await client.call_tool("memory_add", {"memory": "Alice has a cat named Tom", "topics": ["pets"]})
    # Stored for the user and app of the flags, in the backend the chat uses.
    stored = await read_db(tmp_path, UserKey("notes", "alice"))
    assert [e.memory.text for e in stored] == ["Alice has a cat named Tom"]
    assert await read_db(tmp_path, UserKey("memory-chat", "user")) == []


async def test_search_ranks_by_meaning_as_the_chat_does(stdio, tmp_path) -> None:
    """The default embedder: "kitten" finds the cat, though they share no word."""
    async with stdio("--memory", "sqlite") as client:
        for text in ("User has a cat named Tom", "User works as a dentist in Lyon", "User likes jazz"):
            await client.call_tool("memory_add", {"memory": text})
        hits = payload(await client.call_tool("memory_search", {"query": "kitten"}))["results"]
    assert hits and hits[0]["memory"] == "User has a cat named Tom"


async def test_loads_what_the_first_search_needs_before_a_client_asks(stdio, tmp_path) -> None:
    """Without the chat's warm-up the first Chinese search waited about a second
    for the word segmentation dictionary and the model: the server loads them as
    it starts, says so on stderr, and the first search finds by meaning."""
    from .support import STDERR_NAME

    log = tmp_path / STDERR_NAME
    async with stdio("--memory", "sqlite") as client:
        for _ in range(600):  # before any search: the server loads them unasked
            if "search ready" in log.read_text():
                break
            await asyncio.sleep(0.1)
        ready = [line for line in log.read_text().splitlines() if "search ready" in line]
        assert ready and "word segmentation and the embedding model loaded in" in ready[0]
        await client.call_tool("memory_add", {"memory": "用户养了一只叫汤姆的猫"})
        await client.call_tool("memory_add", {"memory": "用户在里昂当牙医"})
        hits = payload(await client.call_tool("memory_search", {"query": "他有宠物吗？"}))["results"]
    assert hits and hits[0]["memory"] == "用户养了一只叫汤姆的猫"


BAD_CALLS = [
    ("memory_teleport", {"memory": "x"}),
    ("memory_add", {"memory": 42}),
    ("memory_add", {"memory": "   "}),
    ("memory_add", {"memory": "x" * 20_000}),
    ("memory_add", {"memory": "ok", "topics": "a" * 500}),
    ("memory_add", {"memory": "ok", "padding": "y" * (1 << 20)}),  # over the 1 MiB argument limit
    ("memory_add", {"memory": "ok", "topics": [[[[[["deep"]]]]]]}),
    ("memory_update", {"memory": "no id"}),
    ("memory_update", {"memory_id": "0" * 64, "memory": "nothing to update"}),
    ("memory_search", {"query": "tea", "kind": "dream"}),
    ("memory_load", {"limit": "many"}),
    ("memory_search", {}),
]


async def test_bad_input_gets_the_chats_errors_and_the_server_lives_on(stdio, tmp_path) -> None:
    tools = {t.name: t for t in chat_tools()}
    key = UserKey("memory-chat", "user")
    async with stdio(env=clean_env(tmp_path, MEMCHAT_EMBEDDER="none")) as client:
        for name, arguments in BAD_CALLS:
            result = await client.call_tool(name, arguments)
            # What the chat's runner would have answered its model, word for word.
            if name in tools:
                expected = await tools[name].run(json.dumps(arguments), key)
            else:
                expected = unknown_tool_result(name, tools)
            assert (result.is_error, result.content[0].text) == (expected.is_error, expected.content), name
            assert result.is_error == ((name, arguments) != ("memory_search", {}))
        # Still serving, nothing stored by the bad calls.
        assert (
            payload(await client.call_tool("memory_add", {"memory": "User likes tea"}))["memory"]
            == "User likes tea"
        )
        assert resource_json(await client.read_resource("memchat://memories"))["count"] == 1
        with pytest.raises(Exception, match="unknown resource"):
            await client.read_resource("memchat://passwords")
        with pytest.raises(Exception, match="no such memory"):
            await client.read_resource("memchat://memories/" + "0" * 64)


async def test_a_client_listening_hears_of_each_change(stdio, tmp_path) -> None:
    from mcp.shared.subscriptions import ResourceUpdated

    from memchat.mcp.server import MEMORIES_URI

    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    async with stdio(env=env) as client, client.listen(resource_subscriptions=[MEMORIES_URI]) as subscription:
        await client.call_tool("memory_search", {"query": "tea"})  # a read changes nothing
        await client.call_tool("memory_add", {"memory": "User likes tea"})
        event = await asyncio.wait_for(anext(aiter(subscription)), 10)
    assert event == ResourceUpdated(uri=MEMORIES_URI)


async def test_an_older_client_subscribes_and_is_notified(stdio, tmp_path) -> None:
    """The 2025 handshake: resources/subscribe, then notifications/resources/updated."""
    import warnings

    import mcp_types as types

    from memchat.mcp.server import MEMORIES_URI

    updates: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.put_nowait(message.params.uri)

    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    async with stdio(env=env, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources.subscribe is True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource(MEMORIES_URI)
        await client.call_tool("memory_add", {"memory": "User likes tea"})
        assert await asyncio.wait_for(updates.get(), 10) == MEMORIES_URI
        await client.call_tool("memory_load", {})
        await asyncio.sleep(0.3)
        assert updates.empty()  # a read is no change


def test_a_backend_that_is_down_is_one_line_and_nothing_on_stdout(tmp_path) -> None:
    env = clean_env(tmp_path, REDIS_URL="redis://127.0.0.1:9/0", MEMCHAT_EMBEDDER="none")
    done = subprocess.run(
        [str(MEMCHAT), "mcp", "--memory", "redis", "--timeout", "2s"], env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.startswith("memchat:")]
    assert len(lines) == 1 and "127.0.0.1:9" in lines[0] and "Traceback" not in done.stderr


def test_garbage_on_stdin_is_answered_and_the_server_lives_on(tmp_path) -> None:
    """What no SDK client sends — broken JSON, a non-object, an unknown method, a
    tools/call with arguments of the wrong type — gets a JSON-RPC error; the next
    proper request is served, and stdout carries nothing but protocol messages."""
    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    client = {"name": "raw", "version": "0"}
    lines = [
        "{this is not json",
        "[1, 2, 3]",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "memory/steal", "params": {}}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "memory_add", "arguments": "not an object"}}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "memory_add", "arguments": {"memory": "User likes tea"}}}),
    ]  # fmt: skip
    server = subprocess.Popen(
        [str(MEMCHAT), "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    replies = {}
    try:
        for line in lines:
            server.stdin.write(line + "\n")
            server.stdin.flush()
            if '"id"' in line:  # a request: wait for its answer before sending the next line
                message = json.loads(server.stdout.readline())  # stdout carries protocol messages only
                replies[message.get("id")] = message
        server.stdin.close()  # the client leaves: the server ends by itself
        assert server.wait(30) == 0
    finally:
        server.kill()
    stderr = server.stderr.read() if server.stderr else ""
    assert "result" in replies[1]
    assert replies[2]["error"]["code"] == -32601  # method not found
    assert "error" in replies[3]
    assert json.loads(replies[4]["result"]["content"][0]["text"])["message"] == "Memory added successfully"
    assert server.stdout.read() == ""
    assert "Traceback" not in stderr


def test_a_client_that_leaves_mid_call_lets_the_server_end(tmp_path) -> None:
    """Requests written, stdin closed at once: the calls under way still finish (a
    write is not cut off inside its transaction) and the server exits promptly."""
    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    client = {"name": "raw", "version": "0"}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        *(json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                      "params": {"name": "memory_add", "arguments": {"memory": f"User likes tea {i}"}}})
          for i in range(3)),
    ]  # fmt: skip
    acknowledged = set()
    for _ in range(3):  # before the fix, most runs hung in asyncio's shutdown
        done = subprocess.run(
            [str(MEMCHAT), "mcp"], input="\n".join(lines) + "\n", env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        for line in done.stdout.splitlines():
            result = json.loads(line).get("result", {})
            if "content" in result:
                acknowledged.add(json.loads(result["content"][0]["text"])["memory"])
    stored = {e.memory.text for e in asyncio.run(read_db(tmp_path, UserKey("memory-chat", "user")))}
    assert acknowledged <= stored  # what the server said it stored, it stored


def test_a_server_stuck_on_its_way_out_still_ends_and_says_where_it_was_stuck() -> None:
    """Whatever hangs after the client has gone (a thread that never ends here), the
    process ends within the limit, exit code 0, with one line and the stacks on stderr."""
    script = (
        "import threading\n"
        "from memchat.mcp.run import exit_if_stuck\n"
        "exit_if_stuck(0.5)\n"
        "threading.Thread(target=threading.Event().wait, name='never-ends').start()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    first, *stacks = done.stderr.splitlines()
    assert first == "memchat mcp: still shutting down after 0.5 s; exiting now (every thread's stack follows)"
    assert any("Event.wait" in line or "in wait" in line for line in stacks), done.stderr


async def test_a_change_made_elsewhere_is_announced_too(stdio, tmp_path) -> None:
    """The chat (here: the library on the same SQLite file) adds a memory; the
    listening MCP client hears of it within a few seconds (the server looks every 2 s)."""
    from mcp.shared.subscriptions import ResourceUpdated

    from memchat.mcp.server import MEMORIES_URI

    env = clean_env(tmp_path, MEMCHAT_EMBEDDER="none")
    async with stdio(env=env) as client, client.listen(resource_subscriptions=[MEMORIES_URI]) as subscription:
        await client.call_tool("memory_add", {"memory": "User likes tea"})
        assert await asyncio.wait_for(anext(aiter(subscription)), 10) == ResourceUpdated(uri=MEMORIES_URI)
        with pytest.raises(TimeoutError):  # the server's next look at its own write is no news
            await asyncio.wait_for(anext(aiter(subscription)), 2.5)
        store = create("sqlite", dsn=str(tmp_path / "memories.db"))
        async with MemoryService(store, embedder=NO_EMBEDDER) as elsewhere:
            await elsewhere.add(UserKey("memory-chat", "user"), "User plays chess on Sundays")
        assert await asyncio.wait_for(anext(aiter(subscription)), 10) == ResourceUpdated(uri=MEMORIES_URI)
        memories = resource_json(await client.read_resource(MEMORIES_URI))["memories"]
        assert [m["memory"] for m in memories] == ["User plays chess on Sundays", "User likes tea"]
