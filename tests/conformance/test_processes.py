"""Several OS processes writing one user's memories through one backend.

Runs on every backend whose store declares ``multi_process``: nothing is lost,
nothing duplicated, and two updates of one memory never both win.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from typing import Any

import pytest

from backends import create
from memchat.engine import MemoryNotFoundError, MemoryService, UserKey

from .harness import HARNESSES, multi_process_names

KEY = UserKey("test-app", "shared-user")
WRITES_PER_PROCESS = 300  # per process, as the issue asks: 600 writes in all


def _writer(spec: tuple[str, dict[str, Any]], worker: int, start: mp.Event) -> None:
    async def run() -> None:
        async with MemoryService(create(spec[0], **spec[1]), limit=0) as svc:
            start.wait(30)
            for i in range(WRITES_PER_PROCESS):
                entry = await svc.add(KEY, f"process {worker} fact {i}")
                if i % 3 == 0:  # interleave rotations with the adds
                    await svc.update(KEY, entry.id, f"process {worker} fact {i} (revised)")

    asyncio.run(run())


def _updater(
    spec: tuple[str, dict[str, Any]], memory_id: str, text: str, start: mp.Event, results: mp.Queue
) -> None:
    async def run() -> str:
        async with MemoryService(create(spec[0], **spec[1])) as svc:
            start.wait(30)
            try:
                return (await svc.update(KEY, memory_id, text)).memory_id
            except MemoryNotFoundError:
                return "not found"

    results.put(asyncio.run(run()))


def _run_all(processes: list[mp.Process], start: mp.Event) -> None:
    for p in processes:
        p.start()
    start.set()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0, f"writer process failed with exit code {p.exitcode}"


@pytest.fixture(params=multi_process_names())
def shared(request, tmp_path):
    return HARNESSES[request.param](tmp_path)


async def test_two_processes_lose_no_write(shared) -> None:
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(shared.spec(), w, start)) for w in range(2)]
    await asyncio.to_thread(_run_all, procs, start)
    async with MemoryService(shared.make_store(), limit=0) as svc:
        entries = await svc.read(KEY)
        assert len(entries) == 2 * WRITES_PER_PROCESS
        assert len({e.id for e in entries}) == len(entries)
        texts = {e.memory.text for e in entries}
        for w in range(2):
            for i in range(WRITES_PER_PROCESS):
                base = f"process {w} fact {i}"
                assert (f"{base} (revised)" if i % 3 == 0 else base) in texts


async def test_two_processes_updating_one_memory_never_both_win(shared) -> None:
    async with MemoryService(shared.make_store()) as svc:
        entry = await svc.add(KEY, "User likes coffee")
    ctx = mp.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_updater, args=(shared.spec(), entry.id, text, start, results))
        for text in ("User likes tea", "User likes water")
    ]
    await asyncio.to_thread(_run_all, procs, start)
    outcomes = sorted(results.get(timeout=10) for _ in procs)
    assert outcomes.count("not found") == 1
    async with MemoryService(shared.make_store()) as svc:
        [active] = await svc.read(KEY)
        assert active.id in outcomes
