"""End to end in a real terminal (tmux): chat, quit, `memchat -c` brings the
conversation back and the model sees it; after /new, /sessions lists both."""

from __future__ import annotations

import os
import time
from pathlib import Path

from .test_tmux_e2e import Tmux, tmux

__all__ = ["tmux"]


def start(tmux: Tmux, tmp_path: Path, *args: str) -> None:
    env = {
        "SQLITE_MEMORY_DSN": f"sqlite:///{tmp_path / 'memories.db'}",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "MEMCHAT_EMBEDDER": "none",
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(tmp_path),
        "PATH": os.environ.get("PATH", ""),
    }
    tmux.start_memchat(tmp_path, env, "--memory", "sqlite", *args)
    tmux.wait_for("Memory chat ready!", "● ready")


def quit_and_wait(tmux: Tmux) -> None:
    tmux("send-keys", "-t", "memchat", "C-q")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if tmux("display-message", "-p", "-t", "memchat", "#{pane_dead}").stdout.decode().startswith("1"):
            tmux("kill-session", "-t", "memchat", check=False)
            return
        time.sleep(0.1)
    raise AssertionError("memchat did not exit after ctrl+q")


def test_quit_continue_with_c_and_list_sessions(tmux: Tmux, tmp_path: Path) -> None:
    start(tmux, tmp_path)
    tmux.type("I like Go")
    tmux.wait_for("memory_add", "Got it, I'll remember", "● ready")
    quit_and_wait(tmux)

    start(tmux, tmp_path, "-c")
    screen = tmux.wait_for("Continuing session", "I like Go", "✅ memory_add")
    tmux.type("What did I just say?")
    # The offline model answers this from the history it was given, not from memory.
    screen = tmux.wait_for("Earlier in this conversation you said", "● ready")
    assert "“I like Go”" in screen

    tmux.type("/new")
    tmux.wait_for("Started new memory session!")
    tmux.type("hello")
    tmux.wait_for("I'm memchat's offline model", "● ready")
    tmux.type("/sessions")
    screen = tmux.wait_for("2 sessions, most recent first", "enter open")
    rows = [
        line
        for line in screen.splitlines()
        if "memory-session-" in line and ("hello" in line or "I like Go" in line)
    ]
    assert len(rows) == 2 and "hello" in rows[0] and "I like Go" in rows[1], screen
    tmux("send-keys", "-t", "memchat", "Escape")
    quit_and_wait(tmux)
