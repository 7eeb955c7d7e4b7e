"""End to end: a running `memchat` TUI (tmux) and `memchat mcp` (the SDK's stdio
client) on the same SQLite file. A memory added over MCP shows up in the TUI's
side panel on refresh (f5), and one the chat makes is found over MCP."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from tests.support import require
from tests.tui.test_tmux_e2e import Tmux

from .support import clean_env, payload, resource_json


@pytest.fixture
def tmux():
    require(shutil.which("tmux") is not None, "tmux is not installed")
    tmux = Tmux(f"memchat-mcp-test-{uuid.uuid4().hex[:8]}")
    yield tmux
    tmux("kill-server", check=False)


def wait_until_gone(tmux: Tmux, text: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while text in tmux.screen():
        assert time.monotonic() < deadline, f"{text!r} still on screen after {timeout}s"
        time.sleep(0.1)


async def test_mcp_and_the_tui_see_each_others_memories(tmux: Tmux, stdio, tmp_path: Path) -> None:
    # Both processes: the same database, keyword search (no model to load twice on 2 cores).
    env = clean_env(
        tmp_path, MEMCHAT_EMBEDDER="none", TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8"
    )
    keep = ("SQLITE_MEMORY_DSN", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "HOME", "PATH", "TERM", "LANG", "LC_ALL",
            "MEMCHAT_EMBEDDER")  # fmt: skip
    tmux.start_memchat(tmp_path, {k: env[k] for k in keep}, "--memory", "sqlite")
    tmux.wait_for("Memory chat ready!", "memory sqlite")
    tmux("send-keys", "-t", "memchat", "C-b")
    tmux.wait_for("No memories yet.")

    async with stdio("--memory", "sqlite", env=env) as client:
        # MCP → TUI: the open panel shows it after a refresh.
        await client.call_tool(
            "memory_add", {"memory": "User's favourite editor is Helix", "topics": ["tools"]}
        )
        tmux("send-keys", "-t", "memchat", "F5")
        tmux.wait_for("favourite editor is Helix", "Memories (1)", "1 memory")

        # TUI → MCP: the chat's model stores a memory; the MCP client finds it.
        tmux("send-keys", "-t", "memchat", "C-b")  # close the panel, back to the input
        wait_until_gone(tmux, "Memories (1)")
        time.sleep(0.5)  # the app moves the focus to the input after the panel has gone
        tmux.type("I like Go")
        tmux.wait_for("✅ memory_add", "tok/s", "● ready")
        hits = payload(await client.call_tool("memory_search", {"query": "Go"}))
        assert [hit["memory"] for hit in hits["results"]] == ["User likes Go"]
        memories = resource_json(await client.read_resource("memchat://memories"))
        assert [m["memory"] for m in memories["memories"]] == [
            "User likes Go",
            "User's favourite editor is Helix",
        ]

        # And the panel, opened again, lists both.
        tmux("send-keys", "-t", "memchat", "C-b")
        tmux.wait_for("Memories (2)", "User likes Go", "favourite editor is Helix")
