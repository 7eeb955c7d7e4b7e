"""How fast the TUI is: first frame, a long fast stream, the memory panel at 10k.

    .venv/bin/python benchmarks/tui.py            # everything
    .venv/bin/python benchmarks/tui.py --only stream --tokens 10000 --rate 2000

1. First frame (tmux, 120x40): the installed ``memchat --memory sqlite`` is
   started in a detached tmux session; the screen is polled every 5 ms until
   the header and footer are drawn (first frame) and until the banner says
   the chat is ready (backend connected). RSS is read from /proc at both
   points. A bare Textual app (Header + Footer) is measured the same way for
   comparison.
2. Streaming (headless, in process): a model yields a 10,000-token Markdown
   answer at 2,000 tokens/s through the real runner and app. Reported: the
   rate the app let the model achieve, the lag between the last token sent and
   the answer fully shown (stream drained, next frame painted), the latency of
   keypresses typed into the message box during the stream (key sent by the
   driver → handled → painted), and event-loop stalls.
3. Memory panel (headless, sqlite): 10,000 memories seeded in one
   transaction; time from ctrl+b to the list painted, split into the engine's
   read and the UI; jumping to the end; a filter search.

Prints figures; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MEMCHAT = Path(sys.executable).with_name("memchat")
#: Added to the environment of the programs started in tmux (--pythonpath: measure another checkout).
EXTRA_ENV: dict[str, str] = {}

BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Header
class Bare(App):
    def compose(self):
        yield Header()
        yield Footer()
Bare().run()
"""

#: The bare app a person would write for a chat: a header, a log, a message box, a footer.
BARE_CHAT_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Input, RichLog
class Bare(App):
    def compose(self):
        yield Header()
        yield RichLog()
        yield Input(placeholder="Message")
        yield Footer()
Bare().run()
"""

#: Drawn = every marker on screen: the header's title and the footer's command palette key
#: (Textual's footer shows its keys a frame or more after the rest).
BARE_DRAWN = "Bare|palette"
MEMCHAT_DRAWN = "memchat|palette"


# -- 1. first frame in tmux -------------------------------------------------------------------
def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _tmux_launch(command: list[str], cwd: Path, env: dict[str, str], first: str, ready: str | None):
    socket = f"memchat-bench-{os.getpid()}"

    def tmux(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, timeout=10)

    shell = " ".join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *command])
    started = time.perf_counter()
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", "120", "-y", "40", "-c", str(cwd), shell)
    try:
        pid = int(tmux("display-message", "-p", "-t", "b", "#{pane_pid}").stdout or 0)
        title_at = first_at = ready_at = None
        rss_first = rss_ready = float("nan")
        deadline = started + 30
        while time.perf_counter() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "b").stdout.decode("utf-8", "replace")
            now = time.perf_counter()
            if title_at is None and first.split("|")[0] in screen:
                title_at = now - started
            if first_at is None and all(s in screen for s in first.split("|")):
                first_at, rss_first = now - started, _rss_mb(pid)
            if first_at is not None and (ready is None or ready in screen):
                ready_at, rss_ready = now - started, _rss_mb(pid)
                break
            time.sleep(0.005)
        return first_at, ready_at, rss_first, rss_ready, title_at
    finally:
        tmux("kill-server")


def bench_first_frame(runs: int, checkouts: list[str | None]) -> None:
    """Every program once per round, rounds repeated ``runs`` times (so a change of the
    machine's load falls on every row alike); memchat from each checkout (None: the installed one)."""
    if not shutil.which("tmux") or not MEMCHAT.exists():
        print("first frame: skipped (needs tmux and the installed memchat)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "SQLITE_MEMORY_DSN": f"sqlite:///{tmp}/memories.db",
            "XDG_CONFIG_HOME": f"{tmp}/config",
            "HOME": tmp,
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", ""),
        }
        bare_scripts = []
        for name, source in (("bare.py", BARE_APP), ("bare_chat.py", BARE_CHAT_APP)):
            (Path(tmp) / name).write_text(source)
            bare_scripts.append([sys.executable, str(Path(tmp) / name)])
        cases = [
            ("bare Textual app (Header + Footer)", bare_scripts[0], {}, BARE_DRAWN, None),
            ("bare Textual chat app (Header, RichLog, Input, Footer)", bare_scripts[1], {}, BARE_DRAWN, None),
        ]
        for checkout in checkouts:
            where = {"PYTHONPATH": str(Path(checkout).resolve())} if checkout else {}
            label = f" [{checkout}]" if len(checkouts) > 1 or checkout else ""
            cases += [
                (f"memchat --memory sqlite (offline model){label}", [str(MEMCHAT), "--memory", "sqlite"],
                 where, MEMCHAT_DRAWN, "Memory chat ready!"),
                (f"memchat --memory sqlite (openai model){label}", [str(MEMCHAT), "--memory", "sqlite"],
                 {**where, "OPENAI_API_KEY": "sk-bench-not-used"}, MEMCHAT_DRAWN, "Memory chat ready!"),
            ]  # fmt: skip
        results: list[list[tuple]] = [[] for _ in cases]
        for _ in range(runs):
            for n, (_label, command, extra, first, ready) in enumerate(cases):
                results[n].append(_tmux_launch(command, Path(tmp), {**env, **extra}, first, ready))
        print(f"\n## First frame in tmux 120x40 ({runs} rounds; median, min)\n")
        print("First frame: the header and the footer's keys on screen; header: its title alone. Ratios: to")
        print("the bare app's median first frame, and to the bare chat app's.\n")
        print("| program | first frame | ratio to bare | to bare chat | header | RSS at first frame | ready "
              "| RSS when ready |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        medians: list[float] = []
        for (label, _command, _extra, _first, ready), runs_of in zip(cases, results, strict=True):
            firsts = [r[0] for r in runs_of if r[0] is not None]
            readies = [r[1] for r in runs_of if r[1] is not None]
            if not firsts:
                print(f"| {label} | (not drawn) | | | | | | |")
                medians.append(float("nan"))
                continue
            first = statistics.median(firsts)
            medians.append(first)
            rss_first = statistics.median(r[2] for r in runs_of if r[0] is not None)
            rss_ready = (
                statistics.median(r[3] for r in runs_of if r[1] is not None) if readies else float("nan")
            )
            ready_text = (
                f"{statistics.median(readies):.2f} s ({min(readies):.2f})" if ready and readies else "—"
            )
            title = statistics.median(r[4] for r in runs_of if r[4] is not None)
            to_chat = first / medians[1] if len(medians) > 1 else 1.0
            print(
                f"| {label} | {first:.2f} s ({min(firsts):.2f}) | {first / medians[0]:.2f}× | "
                f"{to_chat:.2f}× | {title:.2f} s | "
                f"{rss_first:.0f} MB | {ready_text} | {rss_ready:.0f} MB |"
            )


# -- 1b. quitting in tmux -------------------------------------------------------------------------
def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _tmux_quit(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    ready: str,
    before: list[tuple[str, str]],
    keys: list[str],
) -> tuple[float, float] | None:
    """Start ``command``, wait for ``ready`` on screen, type ``before`` (keys, then
    the text to wait for), then time from sending ``keys`` to the app's screen
    gone (its footer no longer drawn: the terminal is back) and to the process gone."""
    socket = f"memchat-quit-{os.getpid()}"

    def tmux(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, timeout=10)

    def wait_for(text: str, seconds: float = 30) -> bool:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            if text in tmux("capture-pane", "-p", "-t", "b").stdout.decode("utf-8", "replace"):
                return True
            time.sleep(0.01)
        return False

    shell = " ".join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *command])
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", "120", "-y", "40", "-c", str(cwd), shell)
    try:
        pid = int(tmux("display-message", "-p", "-t", "b", "#{pane_pid}").stdout or 0)
        if not wait_for(ready):
            return None
        for typed, shown in before:
            tmux("send-keys", "-t", "b", "-l", typed)
            tmux("send-keys", "-t", "b", "Enter")
            if not wait_for(shown):
                return None
        time.sleep(0.3)  # let the screen settle, as a person would before quitting
        started = time.perf_counter()
        for key in keys:
            literal = len(key) > 1 and not key.startswith("C-") and key != "Enter"
            tmux("send-keys", "-t", "b", *(["-l", key] if literal else [key]))
        screen_back = None
        while not _exited(pid):
            if time.perf_counter() - started > 30:
                return None
            if screen_back is None and "palette" not in tmux("capture-pane", "-p", "-t", "b").stdout.decode(
                "utf-8", "replace"
            ):
                screen_back = time.perf_counter() - started
            time.sleep(0.002)
        gone = time.perf_counter() - started
        return (screen_back if screen_back is not None else gone), gone
    finally:
        tmux("kill-server")


def bench_quit(runs: int) -> None:
    if not shutil.which("tmux") or not MEMCHAT.exists():
        print("quit: skipped (needs tmux and the installed memchat)")
        return
    print(f"\n## Quit in tmux 120x40 ({runs} runs each; median (min); ratio to the bare app's median)\n")
    print("Screen back: the app's screen is gone, the shell is usable. Process gone: it has ended")
    print("(in auto mode it first saves the conversation's memories, with a note in the terminal).\n")
    print("| program | how | screen back | ratio | process gone | ratio |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bare.py"
        script.write_text(BARE_APP)
        bare_command = [sys.executable, str(script)]
        memchat = [str(MEMCHAT), "--memory", "sqlite"]
        turn = [("I like Go", "remember")]
        cases = [
            ("bare Textual app (Header + Footer)", "ctrl+q", bare_command, "Bare", [], ["C-q"]),
            ("memchat --memory sqlite (offline model)", "ctrl+q", memchat, "Memory chat ready!", [], ["C-q"]),
            ("memchat --memory sqlite (offline model)", "/exit", memchat, "Memory chat ready!", [],
             ["/exit", "Enter"]),
            ("memchat --memory sqlite (offline model)", "/exit after a turn that wrote a memory", memchat,
             "Memory chat ready!", turn, ["/exit", "Enter"]),
            ("memchat --memory sqlite --extract (auto mode)", "ctrl+q after a turn (extraction pending)",
             [*memchat, "--extract"], "Memory chat ready!", [("My sister is Ana", "sister")], ["C-q"]),
        ]  # fmt: skip
        bare = None
        for n, (label, how, command, ready, before, keys) in enumerate(cases):
            backs: list[float] = []
            times: list[float] = []
            for run in range(runs):
                env = {
                    "SQLITE_MEMORY_DSN": f"sqlite:///{tmp}/memories-{n}-{run}.db",
                    "XDG_CONFIG_HOME": f"{tmp}/config",
                    "HOME": tmp,
                    "TERM": "xterm-256color",
                    "LANG": "C.UTF-8",
                    "PATH": os.environ.get("PATH", ""),
                    **EXTRA_ENV,
                }
                took = _tmux_quit(command, Path(tmp), env, ready, before, keys)
                if took is not None:
                    backs.append(took[0])
                    times.append(took[1])
            if not times:
                print(f"| {label} | {how} | (did not finish) | | | |")
                continue
            back, gone = statistics.median(backs), statistics.median(times)
            bare = bare if bare is not None else (back, gone)
            print(f"| {label} | {how} | {back:.2f} s ({min(backs):.2f}) | {back / bare[0]:.2f}× | "
                  f"{gone:.2f} s ({min(times):.2f}) | {gone / bare[1]:.2f}× |")  # fmt: skip


# -- 2. a long fast stream ----------------------------------------------------------------------
def _answer_tokens(count: int) -> list[str]:
    """Markdown-looking tokens: paragraphs, a bullet list and a code block now and then."""
    words = [
        "memory",
        "engine",
        "stores",
        "facts",
        "about",
        "the",
        "user",
        "and",
        "finds",
        "them",
        "again",
        "when",
        "they",
        "matter",
    ]
    tokens: list[str] = []
    i = 0
    while len(tokens) < count:
        block = (i // 60) % 8
        if i % 60 == 0 and i:
            tokens.append("\n\n")
            if block == 3:
                tokens.append("```python\n")
            elif block == 5:
                tokens.append("- ")
        if block == 3 and i % 10 == 9:
            tokens.append("\n")
        elif block == 5 and i % 12 == 11:
            tokens.append("\n- ")
        else:
            tokens.append(words[i % len(words)] + " ")
        if block == 3 and i % 60 == 59:
            tokens.append("\n```")
        i += 1
    return tokens[:count]


class PacedModel:
    """Yields its tokens at ``rate`` per second (catching up if the loop was busy)."""

    name = "paced"

    def __init__(self, tokens: list[str], rate: float) -> None:
        self.tokens = tokens
        self.rate = rate
        self.first_sent = self.last_sent = 0.0

    async def close(self) -> None:
        return None

    async def stream(self, messages, tools=(), *, streaming=True):
        from memchat.agent.llm import ModelReply, TextChunk, Usage

        start = self.first_sent = time.perf_counter()
        sent = 0
        while sent < len(self.tokens):
            due = min(len(self.tokens), int((time.perf_counter() - start) * self.rate) + 1)
            while sent < due:
                yield TextChunk(self.tokens[sent])
                sent += 1
            await asyncio.sleep(0.001)
        self.last_sent = time.perf_counter()
        yield ModelReply("".join(self.tokens), (), Usage(completion_tokens=len(self.tokens)))


async def bench_stream(count: int, rate: float) -> None:
    from textual import events
    from textual.screen import Screen

    from memchat.tui.app import MemchatApp
    from memchat.tui.widgets.chat_input import ChatInput
    from memchat.tui.widgets.message import AssistantMessage
    from tests.tui.support import make_settings, runner_factory

    model = PacedModel(_answer_tokens(count), rate)
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    stalls: list[float] = []
    # A frame: the layout pass (arranging the widgets) and the compositor's update of
    # the screen, timed in the app's own methods, with where in the answer it happened.
    frames: list[tuple[float, int]] = []
    original_layout, original_refresh = Screen._refresh_layout, Screen._compositor_refresh

    def answer_length() -> int:
        view = app.chat.chat_log.last_assistant() if app.is_running and app.screen_stack else None
        return len(view.copy_text()) if view is not None else 0

    def timed(method):
        def wrapper(self, *args, **kwargs):
            started = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                frames.append((time.perf_counter() - started, answer_length()))

        return wrapper

    Screen._refresh_layout, Screen._compositor_refresh = timed(original_layout), timed(original_refresh)
    # Full (oldest-generation) garbage collections: each walks every object the app holds.
    full_collections: list[float] = []
    collection_started = [0.0]

    def on_collection(phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            collection_started[0] = time.perf_counter()
        else:
            full_collections.append(time.perf_counter() - collection_started[0])

    gc.callbacks.append(on_collection)
    key_handled: list[float] = []
    key_painted: list[float] = []

    async with app.run_test(size=(120, 40)) as pilot:
        while app.runner is None:
            await pilot.pause(0.01)
        chat_input = app.chat.chat_input
        pending: dict[str, float] = {}
        original_on_key = ChatInput._on_key

        async def timed_on_key(self, event):
            await original_on_key(self, event)
            sent = pending.pop(event.key, None)
            if sent is not None:
                key_handled.append(time.perf_counter() - sent)
                app.call_after_refresh(lambda: key_painted.append(time.perf_counter() - sent))

        ChatInput._on_key = timed_on_key
        chat_input.load_text("tell me everything")
        app._driver.send_message(events.Key("enter", "\r"))
        while not app.busy:
            await asyncio.sleep(0.001)

        async def watch_loop() -> None:
            while True:
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                stalls.append(time.perf_counter() - before - 0.005)

        watcher = asyncio.create_task(watch_loop())
        keys = "abcdefghijklmnopqrstuvwxyz"
        k = 0
        deadline = time.perf_counter() + 10 * count / rate + 60
        while app.busy:
            if time.perf_counter() > deadline or not app.is_running:
                raise SystemExit("the stream did not finish: the app failed or hangs")
            await asyncio.sleep(0.1)
            if app.busy and model.last_sent == 0.0:
                key = keys[k % len(keys)]
                k += 1
                pending[key] = time.perf_counter()
                app._driver.send_message(events.Key(key, key))
        view = app.chat.chat_log.last_assistant()
        assert isinstance(view, AssistantMessage)
        while not (view.finished and view._stream is None):
            await asyncio.sleep(0.001)
        painted: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        app.call_after_refresh(lambda: painted.set_result(time.perf_counter()))
        shown = await painted
        during_stream = len(full_collections)
        await asyncio.sleep(2.0)  # memchat.tui.gc_pause lets the collector catch up after the answer
        watcher.cancel()
        await pilot.pause(0.1)
        text_ok = view.copy_text() == "".join(model.tokens)
        ChatInput._on_key = original_on_key
        Screen._refresh_layout, Screen._compositor_refresh = original_layout, original_refresh
        gc.callbacks.remove(on_collection)

    achieved = count / (model.last_sent - model.first_sent)
    print(f"\n## Streaming {count:,} tokens at {rate:,.0f} tokens/s (headless, 120x40)\n")
    print(f"- model delivered the tokens at {achieved:,.0f} tokens/s "
          f"({model.last_sent - model.first_sent:.2f} s; target {count / rate:.2f} s)")  # fmt: skip
    print(f"- lag, last token sent → fully shown: {(shown - model.last_sent) * 1000:.0f} ms")
    if key_handled:
        print(
            f"- keypress latency while streaming ({len(key_handled)} keys): handled median "
            f"{statistics.median(key_handled) * 1000:.1f} ms, max {max(key_handled) * 1000:.1f} ms; painted "
            f"median {statistics.median(key_painted) * 1000:.1f} ms, max {max(key_painted) * 1000:.1f} ms"
        )
    stalls.sort()
    if stalls:
        p99 = stalls[int(len(stalls) * 0.99) - 1]
        print(f"- event-loop stalls: p99 {p99 * 1000:.1f} ms, max {stalls[-1] * 1000:.1f} ms")
    if frames:
        total = max(length for _, length in frames) or 1
        late = sorted(d for d, length in frames if length >= total * 0.8)
        every = sorted(d for d, _ in frames)
        over = sum(1 for d in every if d > 0.05)
        print(f"- layout/compositor passes ({len(every)}): median {statistics.median(every) * 1000:.1f} ms, "
              f"p99 {every[int(len(every) * 0.99) - 1] * 1000:.1f} ms, max {every[-1] * 1000:.1f} ms; "
              f"{over} over 50 ms")  # fmt: skip
        slowest = sorted(frames, reverse=True)[:5]
        listed = ", ".join(f"{d * 1000:.0f} ms at {length:,} chars" for d, length in slowest)
        print(f"- slowest passes: {listed}")
        if late:
            print(f"- in the last fifth of the answer: median {statistics.median(late) * 1000:.1f} ms, "
                  f"max {late[-1] * 1000:.1f} ms")  # fmt: skip
    during, after = full_collections[:during_stream], full_collections[during_stream:]
    for label, pauses in (("during the stream", during), ("in the 2 s after it", after)):
        summary = "none"
        if pauses:
            summary = (
                f"{len(pauses)}, longest {max(pauses) * 1000:.0f} ms, {sum(pauses) * 1000:.0f} ms in all"
            )
        print(f"- full garbage collections {label}: {summary}")
    print(f"- final text intact: {text_ok}")


# -- 3. the memory panel with 10k memories -------------------------------------------------------
async def _seed(dsn: str, count: int) -> None:
    from backends import create
    from memchat.engine import Entry, Memory, UserKey, memory_id

    store = create("sqlite", dsn=dsn)
    await store.open()
    key = UserKey("memory-chat", "user")
    start = datetime(2025, 1, 1, tzinfo=UTC)

    async def work(tx) -> None:
        for i in range(count):
            text = f"User fact number {i}: likes item {i % 97} in category {i % 13}"
            when = start + timedelta(minutes=i)
            await tx.put(Entry(memory_id(text, key.app, key.user), key.app, key.user,
                               Memory(text, (f"category-{i % 13}",)), when, when))  # fmt: skip

    await store.atomic(key, work)
    await store.close()


async def bench_panel(count: int) -> None:
    from memchat.settings import Settings
    from memchat.tui.app import MemchatApp

    with tempfile.TemporaryDirectory() as tmp:
        dsn = f"sqlite:///{tmp}/memories.db"
        seeded = time.perf_counter()
        await _seed(dsn, count)
        seeded = time.perf_counter() - seeded
        settings = Settings.load({"memory": "sqlite", "limit": 0}, environ={"SQLITE_MEMORY_DSN": dsn},
                                 cwd=Path(tmp))  # fmt: skip
        app = MemchatApp(settings, cursor_blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            while app.runner is None:
                await pilot.pause(0.01)
            service, key = app.runner.service, app.runner.key
            started = time.perf_counter()
            entries = await service.read(key)
            engine_read = time.perf_counter() - started

            async def painted_when(condition) -> float:
                begin = time.perf_counter()
                while not condition():
                    await asyncio.sleep(0.001)
                future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
                app.call_after_refresh(lambda: future.set_result(time.perf_counter()))
                return await future - begin

            started = time.perf_counter()
            app._driver.send_message(__import__("textual").events.Key("ctrl+b", None))
            # The panel is built when first opened.
            chat = app.chat

            def listed() -> bool:
                return chat.memory_panel_shown and len(chat.memory_panel.memory_list.entries) == len(entries)

            await painted_when(listed)
            opened = time.perf_counter() - started
            memory_list = app.chat.memory_panel.memory_list
            app._driver.send_message(__import__("textual").events.Key("down", None))  # filter → list
            await painted_when(lambda: app.focused is memory_list)
            started = time.perf_counter()
            app._driver.send_message(__import__("textual").events.Key("end", None))
            await painted_when(lambda: memory_list.cursor == len(entries) - 1)
            to_end = time.perf_counter() - started
            filter_box = app.chat.query_one("#memory-filter")
            filter_box.value = f"fact number {count - 1}"
            started = time.perf_counter()
            await painted_when(lambda: 0 < len(memory_list.entries) < len(entries))
            filtered = time.perf_counter() - started - 0.3  # minus the typing debounce
            found = len(memory_list.entries)

    print(f"\n## Memory panel with {count:,} memories (sqlite, headless)\n")
    print(f"- seeding {count:,} memories in one transaction: {seeded:.2f} s")
    print(
        f"- ctrl+b → list painted: {opened * 1000:.0f} ms "
        f"(of which the engine's read: {engine_read * 1000:.0f} ms)"
    )
    print(f"- end (jump to the oldest) → painted: {to_end * 1000:.1f} ms")
    print(f"- filter search → painted: {filtered * 1000:.0f} ms ({found} results; after the 0.3 s debounce)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=["first-frame", "quit", "stream", "panel"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument(
        "--pythonpath",
        action="append",
        help="run memchat from this checkout (e.g. the code before a change); first-frame takes it "
        "more than once and measures each beside the others",
    )
    args = parser.parse_args()
    if args.pythonpath:
        EXTRA_ENV["PYTHONPATH"] = str(Path(args.pythonpath[0]).resolve())
    if args.only in (None, "first-frame"):
        bench_first_frame(args.runs, args.pythonpath or [None])
    if args.only in (None, "quit"):
        bench_quit(args.runs)
    if args.only in (None, "stream"):
        asyncio.run(bench_stream(args.tokens, args.rate))
    if args.only in (None, "panel"):
        asyncio.run(bench_panel(args.memories))


if __name__ == "__main__":
    main()
