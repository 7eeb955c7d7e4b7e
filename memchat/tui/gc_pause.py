"""Keep Python's full garbage collections out of a streaming answer.

A streamed answer allocates hundreds of thousands of short-lived objects
(Markdown tokens, segments, strips), so the collector runs its full, oldest-
generation pass about ten times per 10k-token answer, and each pass walks
every object the app holds: 0.1-0.5 s each with the UI frozen, on this
project's 2-core test machine (``benchmarks/tui.py`` prints them).

While an answer streams, the oldest generation's threshold is raised out of
reach; the young generations still run as usual, so cycles made during the
stream are collected as they die. When the answer ends (finished, stopped or
removed) and no other starts within ``RESUME_AFTER`` seconds, the threshold
is restored and the one catch-up collection runs then, while the person
reads, instead of inside the answer's frames.

Textual pauses the collector the same way during smooth scrolling
(``App.PAUSE_GC_ON_SCROLL``)."""

from __future__ import annotations

import asyncio
import gc

#: The oldest generation's threshold while an answer streams: out of reach.
PAUSED_THRESHOLD = 1_000_000_000
#: Seconds after the last answer ends before full collections resume.
RESUME_AFTER = 1.0

_holders = 0
_saved: tuple[int, int, int] | None = None
_resume: asyncio.TimerHandle | None = None


def hold() -> None:
    """A stream began (nested holds share one pause)."""
    global _holders, _saved, _resume
    if _resume is not None:
        _resume.cancel()
        _resume = None
    if _saved is None:
        _saved = gc.get_threshold()
        young, middle, _ = _saved
        gc.set_threshold(young, middle, PAUSED_THRESHOLD)
    _holders += 1


def release() -> None:
    """A stream ended: when the last one has ended, resume after a short idle."""
    global _holders, _resume
    if _holders == 0:
        return
    _holders -= 1
    if _holders:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        resume()
        return
    _resume = loop.call_later(RESUME_AFTER, resume)


def resume() -> None:
    """Full collections run again, starting with one now."""
    global _resume
    _resume = None
    if not _holders and _restore():
        gc.collect()


def end() -> None:
    """The app is closing: full collections run again at once. A resume still
    waiting on the app's event loop would never run once the loop is gone, and
    the threshold would stay out of reach for whatever the process does next."""
    global _holders, _resume
    if _resume is not None:
        _resume.cancel()
        _resume = None
    _holders = 0
    _restore()


def _restore() -> bool:
    """The saved threshold back, if a pause saved one."""
    global _saved
    if _saved is None:
        return False
    gc.set_threshold(*_saved)
    _saved = None
    return True


def holders() -> int:
    """How many streams hold the pause (for tests)."""
    return _holders


def paused() -> bool:
    """Whether full collections are held back (a stream, or the idle after one)."""
    return _saved is not None
