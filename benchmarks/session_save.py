"""What saving the conversation costs per message (issue 15), on SQLite by
default and on any other session backend asked for.

    .venv/bin/python benchmarks/session_save.py                    # sqlite, 2,000 messages
    .venv/bin/python benchmarks/session_save.py sqlite redis mysql postgres --messages 1000

A message is saved by ``SessionStore.append`` (one write: read the session's
counts under the user's writer lock, insert the record, update the session
row), called by the recorder's writer task as the runner adds the message to
its history. Printed, in milliseconds (p50 / p95 / max):

* ``append``: one message appended and committed, awaited alone — the work a
  message adds, which the writer does off the turn's path;
* ``record()``: what the runner itself waits for per message: the
  recorder's ``message()`` call (it only queues);
* ``turn +save`` / ``turn bare``: a whole turn of the offline model (user
  message, one tool call and its result, the answer: 4 messages and the
  stats) with and without a recorder, the saving flushed inside the timing,
  so the difference is the saving's real cost to a turn.

Messages are realistic: a user line, an answer of a few hundred characters,
tool calls with JSON arguments and results, on a file in a fresh temporary
folder (WAL, synchronous=NORMAL, as the app runs it). Sessions grow as a chat
does (50 messages per session), so appends land on long sessions too.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends import create
from memchat.engine import MemoryService, UserKey
from memchat.sessions.model import SessionInfo, SessionRecord

KEY = UserKey("bench-app", "bench-user")
PER_SESSION = 50
ANSWER = (
    "Here is what I found in my memory: you like Go and green tea, you live in Lyon and you work on "
    "a compiler. You mentioned last week that you were learning the piano, and that your cat is called "
    "Miso. Would you like me to remember anything else about your projects?"
)


RESULT = '{"query":"drink morning","results":[{"memory":"User likes green tea","score":0.71}]}'


def message(i: int) -> SessionRecord:
    kind = i % 4
    if kind == 0:
        data = {"role": "user", "content": f"Message {i}: what do I like to drink in the morning?"}
    elif kind == 1:
        data = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "memory_search", "arguments": '{"query": "drink morning"}'}}]}  # fmt: skip
    elif kind == 2:
        data = {"role": "tool", "tool_call_id": f"call_{i - 1}", "content": RESULT}
    else:
        data = {"role": "assistant", "content": ANSWER}
    return SessionRecord("message", data, {"name": "memory_search"} if kind == 2 else {})


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.3f} / {p95 * 1000:.3f} / {ordered[-1] * 1000:.3f}"


def session_store(backend: str, folder: Path):
    """A fresh namespace on ``backend``, reached as the conformance suite reaches
    it (its memory tables and Redis keys are removed at exit)."""
    from tests.conformance.harness import HARNESSES
    from tests.sessions.conftest import build_session_store

    return build_session_store(HARNESSES[backend](folder).make_store())


async def drop_tables(store) -> None:
    """A SQL server's session tables go (the harness drops only the memory table)."""
    from tests.sessions.conftest import _drop_tables

    await _drop_tables(store)


async def bench_append(store, messages: int) -> list[float]:
    await store.open()
    times = []
    session = SessionInfo(id="")
    for i in range(messages):
        if i % PER_SESSION == 0:
            session = SessionInfo(id=f"bench-{uuid.uuid4().hex[:8]}")
        started = time.perf_counter()
        await store.append(KEY, session, [message(i)])
        times.append(time.perf_counter() - started)
    return times


async def bench_turns(store, turns: int) -> tuple[list[float], list[float], list[float]]:
    """(turn with saving, turn without, record() calls) in seconds, interleaved."""
    from memchat.agent.offline import OfflineModel
    from memchat.agent.runner import Runner
    from memchat.sessions.recorder import SessionRecorder

    service = MemoryService(create("inmemory"))
    await service.open()
    saved, bare, calls = [], [], []

    class TimedRecorder(SessionRecorder):
        def message(self, session_id, message, meta):
            started = time.perf_counter()
            super().message(session_id, message, meta)
            calls.append(time.perf_counter() - started)

    recorder = TimedRecorder(store, KEY, model="offline", backend="bench")
    with_saving = Runner(OfflineModel(), service, recorder=recorder)
    without = Runner(OfflineModel(), service)
    for i in range(turns):
        text = "I like green tea" if i % 2 else "What do I like?"
        for runner, into in ((with_saving, saved), (without, bare)):
            if i % (PER_SESSION // 5) == 0:
                runner.new_session()
            started = time.perf_counter()
            async for _ in runner.run(text):
                pass
            if runner is with_saving:
                await recorder.flush()
            into.append(time.perf_counter() - started)
    await recorder.close()
    await service.close()
    return saved, bare, calls


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backends", nargs="*", default=["sqlite"])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    print("| backend | append (ms p50 / p95 / max) | record() | turn +save | turn bare |")
    print("|---|---|---|---|---|")
    for backend in args.backends:
        with tempfile.TemporaryDirectory() as folder:
            try:
                store = session_store(backend, Path(folder))
                appends = await bench_append(store, args.messages)
                await store.close()
                await drop_tables(store)
                store = session_store(backend, Path(folder))
                saved, bare, calls = await bench_turns(store, args.turns)  # closes the store
                await drop_tables(store)
            except BaseException as exc:  # a server that is down: say so, go on
                if isinstance(exc, KeyboardInterrupt):
                    raise
                print(f"| {backend} | skipped: {exc} | | | |")
                continue
            print(f"| {backend} | {ms(appends)} | {ms(calls)} | {ms(saved)} | {ms(bare)} |")


if __name__ == "__main__":
    asyncio.run(main())
