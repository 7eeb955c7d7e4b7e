"""End to end: the installed ``memchat --memory sqlite`` in a real terminal
(tmux), typing the seed's demo conversation with send-keys and reading the
screen with capture-pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import require

from .support import SEED_ASK, SEED_TELL

MEMCHAT = Path(sys.executable).with_name("memchat")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, timeout=10, check=check
        )

    def start_memchat(self, cwd: Path, env: dict[str, str], *args: str) -> None:
        """``memchat *args`` in a 120x40 session named "memchat", with only ``env``
        (``env -i``), kept on screen after it exits so a test can read its end."""
        command = " ".join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), str(MEMCHAT), *args])
        size = ("-x", "120", "-y", "40")
        self("-f", "/dev/null", "new-session", "-d", "-s", "memchat", *size, "-c", str(cwd), command)
        self("set-option", "-t", "memchat", "remain-on-exit", "on")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "memchat").stdout.decode("utf-8", "replace")

    def wait_for(self, *texts: str, timeout: float = 30.0, after: str = "") -> str:
        """The screen once it shows every one of ``texts`` (below ``after``, when given)."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            below = screen[screen.index(after) :] if after in screen else ""
            if all(t in below for t in texts):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{texts} not on screen after {timeout}s:\n{screen}")

    def type(self, text: str) -> None:
        self("send-keys", "-t", "memchat", "-l", text)
        self("send-keys", "-t", "memchat", "Enter")


@pytest.fixture
def tmux(tmp_path: Path):
    require(shutil.which("tmux") is not None, "tmux is not installed")
    require(MEMCHAT.exists(), f"{MEMCHAT} is not installed (pip install -e .)")
    tmux = Tmux(f"memchat-test-{uuid.uuid4().hex[:8]}")
    yield tmux
    tmux("kill-server", check=False)


def test_seed_demo_in_a_real_terminal(tmux: Tmux, tmp_path: Path) -> None:
    env = {
        "SQLITE_MEMORY_DSN": f"sqlite:///{tmp_path / 'memories.db'}",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(tmp_path),
        "PATH": os.environ.get("PATH", ""),
    }
    tmux.start_memchat(tmp_path, env, "--memory", "sqlite")
    screen = tmux.wait_for("Memory chat ready!", "memory sqlite")
    assert "model offline" in screen and "memory-session-" in screen

    tmux.type(SEED_TELL)
    screen = tmux.wait_for("memory_add", "好的，我记住了", "tok/s", "● ready")
    # One line per tool call: state, tool, short arguments, elapsed, short result.
    line = next(line for line in screen.splitlines() if "✅ memory_add" in line)
    assert "done" in line and "→ Memory added successfully" in line
    assert "张三喜欢 Go 语言编程" in screen

    tmux.type("/new")
    tmux.wait_for("Started new memory session!", "Previous: memory-session-")

    tmux.type(SEED_ASK)
    screen = tmux.wait_for("memory_search", "根据我的记忆", "● ready")
    # The answer's lines may reach the screen a frame after the status says ready
    # (a loaded machine showed "根据我的记忆：" alone once): wait for them.
    tmux.wait_for("张三喜欢 Go 语言编程", after="根据我的记忆")

    # The side panel shows the stored memory.
    tmux("send-keys", "-t", "memchat", "C-b")
    screen = tmux.wait_for("Memories (1)", "1 memory")

    tmux("send-keys", "-t", "memchat", "C-q")
    fields = "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}"
    deadline = time.monotonic() + 15
    dead = ""
    while time.monotonic() < deadline:
        dead = tmux("display-message", "-p", "-t", "memchat", fields).stdout.decode()
        if dead.startswith("1"):
            # tmux marks the pane dead a moment before it records how it ended.
            time.sleep(0.3)
            dead = tmux("display-message", "-p", "-t", "memchat", fields).stdout.decode()
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"memchat did not exit after ctrl+q: {dead!r}")
    status = dead.split()
    assert status[0] == "1" and status[1:] in (["0"], []), f"memchat ended badly: {dead!r}"

    listed = subprocess.run(
        [str(MEMCHAT), "memory", "list", "--memory", "sqlite"], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "张三喜欢 Go 语言编程" in listed.stdout, listed.stderr
