"""How long the offline model takes to answer in the TUI: a 64-line paste it
echoes back ("remember that" + 64 lines → "Got it, I'll remember: …"), through
the real app and runner (headless, 120x40), streaming and not.

    .venv/bin/python benchmarks/offline_pace.py [--lines 64] [--runs 3]

Compared: the app's pacing now (STREAM_TOKENS_PER_SECOND by the clock) and the
pacing before issue 14 (a 12 ms sleep before every word-sized piece). Prints
figures; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _paste(lines: int) -> str:
    body = "\n".join(
        f"line {i}: the quick brown fox jumps over the lazy dog while the band plays on" for i in range(lines)
    )
    return "Remember that " + body


async def _answer_time(model_factory, streaming: bool, text: str) -> tuple[float, int, str]:
    from memchat.tui.app import MemchatApp
    from memchat.tui.widgets.message import AssistantMessage
    from tests.tui.support import make_settings, runner_factory

    app = MemchatApp(
        make_settings(streaming=streaming), runner_factory=runner_factory(model_factory), cursor_blink=False
    )
    async with app.run_test(size=(120, 40)) as pilot:
        while app.runner is None:
            await pilot.pause(0.01)
        chat_input = app.chat.chat_input
        chat_input.load_text(text)
        started = time.perf_counter()
        await pilot.press("enter")
        # The answer's view appears when the turn starts; a fast turn may be over before
        # app.busy is ever seen, so wait on the view itself.
        view = None
        while not isinstance(view, AssistantMessage):
            await asyncio.sleep(0.001)
            view = app.chat.chat_log.last_assistant()
        while app.busy or not (view.finished and view._stream is None):
            await asyncio.sleep(0.001)
        painted: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        app.call_after_refresh(lambda: painted.set_result(time.perf_counter()))
        done = await painted
        stats = str(view.query_one(".stats").render()) if view.query(".stats") else ""
        return done - started, len(view.copy_text()), stats


async def main(lines: int, runs: int) -> None:
    from memchat.agent.offline import STREAM_TOKENS_PER_SECOND, OfflineModel
    from memchat.agent.offline.language import chunks, token_estimate

    text = _paste(lines)
    reply = "Got it, I'll remember: " + text.removeprefix("Remember that ")
    tokens = sum(token_estimate(p) for p in chunks(reply))
    print(f"\n## The offline model echoing a {lines}-line paste in the TUI (headless, 120x40; "
          f"{runs} runs, median)\n")  # fmt: skip
    pace = tokens / STREAM_TOKENS_PER_SECOND
    print(f"Answer: {len(reply):,} characters, about {tokens:,} tokens "
          f"(at {STREAM_TOKENS_PER_SECOND:.0f} tokens/s: {pace:.1f} s).\n")  # fmt: skip
    print("| pacing | streaming | answer shown after | stats line |")
    print("|---|---|---|---|")
    cases = [
        ("now: by the clock", lambda: OfflineModel(tokens_per_second=STREAM_TOKENS_PER_SECOND), True),
        ("now: by the clock", lambda: OfflineModel(tokens_per_second=STREAM_TOKENS_PER_SECOND), False),
        ("before: 12 ms sleep per piece", lambda: _SleepPerPiece(0.012), True),
    ]
    for label, factory, streaming in cases:
        results = [await _answer_time(factory, streaming, text) for _ in range(runs)]
        seconds = statistics.median(r[0] for r in results)
        print(f"| {label} | {'on' if streaming else 'off'} | {seconds:.2f} s | {results[-1][2]} |")


class _SleepPerPiece:
    """The offline model as it streamed before: a fixed sleep before every piece."""

    name = "offline"

    def __init__(self, delay: float) -> None:
        from memchat.agent.offline import OfflineModel

        self._inner = OfflineModel()
        self.delay = delay

    async def close(self) -> None:
        return None

    async def stream(self, messages, tools=(), *, streaming=True):
        from memchat.agent.llm import TextChunk

        async for event in self._inner.stream(messages, tools, streaming=streaming):
            if isinstance(event, TextChunk) and streaming:
                await asyncio.sleep(self.delay)
            yield event


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.lines, args.runs))
