"""A server that stops answering (SIGSTOP) fails a call in about the timeout,
with one clear sentence, nothing half-written and nothing on stderr; the next
call after SIGCONT works in the same process.

Every server here is one this module starts itself, on a free loopback port
(the machine's shared servers are never signalled). Each scenario runs in a
subprocess, so stderr (driver warnings, "Task was destroyed", ResourceWarning,
garbage-collector complaints at exit) can be asserted empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import require

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 1.5
#: A hang test, not a speed test: generous for a loaded 2-core machine.
SLACK = 8.0

SCENARIO = r"""
import asyncio, dataclasses, gc, json, os, signal, sys, time
from backends import create
from memchat.engine import BackendError, MemoryService, UserKey

name, options, pids, pgroups, with_children = json.loads(sys.argv[1])
KEY = UserKey("memory-chat", "stuck")

def children(parent):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found

stopped = []

def signal_all(sig):
    if sig == signal.SIGSTOP:
        # The parent first, so that it forks no new child meanwhile.
        stopped[:] = [p for pid in pids for p in [pid, *(children(pid) if with_children else [])]]
    for pid in stopped:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # a backend that just ended
    for group in pgroups:
        os.killpg(group, sig)

async def failing(call):
    started = time.monotonic()
    try:
        await call
    except BackendError as exc:
        return str(exc), time.monotonic() - started
    return None, time.monotonic() - started

class Embedder:  # a tiny deterministic one: the vector stores need no model here
    name, dimension = "test", 8

    async def embed(self, texts):
        return [[float(len(t) % 7 + 1), 1.0, *([0.0] * 6)] for t in texts]

async def main():
    report = {}
    store = create(name, **options)
    vector = store.capabilities.vector_search
    svc = MemoryService(store, embedder=Embedder() if vector else None)
    kept = await svc.add(KEY, "before the stop")

    signal_all(signal.SIGSTOP)
    try:
        report["add"] = await failing(svc.add(KEY, "while stopped"))
        report["read"] = await failing(svc.read(KEY))
    finally:
        signal_all(signal.SIGCONT)
    started = time.monotonic()
    await svc.add(KEY, "after the stop")
    report["recovery"] = time.monotonic() - started

    # Stopped in the middle of a write section: nothing of it may stay.
    async def work(tx):
        await tx.put(dataclasses.replace(kept, memory=dataclasses.replace(kept.memory, text="half")))
        signal_all(signal.SIGSTOP)
        await tx.remove(kept.id)
        await tx.count_active()

    try:
        report["section"] = await failing(store.atomic(KEY, work))
    finally:
        signal_all(signal.SIGCONT)
    started = time.monotonic()
    report["texts"] = sorted(e.memory.text for e in await svc.read(KEY))
    report["recovery2"] = time.monotonic() - started
    await svc.clear(KEY)
    await svc.close()
    print(json.dumps(report))

asyncio.run(main())
gc.collect()
"""


def run_scenario(
    name: str,
    options: dict[str, Any],
    pids: list[int],
    pgroups: list[int] = (),
    *,
    with_children: bool = False,
) -> dict:
    """Run SCENARIO against the server of ``pids`` (and their children, with
    ``with_children``: PostgreSQL's backends) or process groups ``pgroups``."""
    args = json.dumps([name, {**options, "timeout": TIMEOUT}, pids, list(pgroups), with_children])
    try:
        done = subprocess.run(
            [sys.executable, "-W", "always::ResourceWarning", "-c", SCENARIO, args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:  # whatever happened to the script, the server runs again
        for pid in pids:
            for each in [pid, *(_children(pid) if with_children else [])]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(each, signal.SIGCONT)
        for group in pgroups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGCONT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(name, {k: v for k, v in report.items() if k != "texts"})
    return report


def check(report: dict, sentence: str) -> None:
    for call in ("add", "read", "section"):
        message, seconds = report[call]
        assert message is not None, f"{call} did not fail while the server was stopped"
        assert sentence in message, message
        assert message.count("\n") == 0 and "Traceback" not in message
        assert TIMEOUT * 0.9 <= seconds < TIMEOUT + SLACK, (call, seconds)
    assert report["recovery"] < SLACK and report["recovery2"] < SLACK
    # The section stopped mid-way changed nothing; the add during the stop wrote nothing.
    assert report["texts"] == ["after the stop", "before the stop"]


def _sentence(kind: str, address: str) -> str:
    return (
        f"the {kind} at {address} did not answer within {TIMEOUT:g} s "
        "(it is stopped, overloaded or unreachable): check it, or raise --timeout"
    )


# -- servers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mariadb() -> Iterator[Any]:
    from tests.test_sql_servers import MARIADB_BINARIES, MariaDB

    missing = [b for b in MARIADB_BINARIES if not os.access(b, os.X_OK)]
    require(not missing, f"MariaDB server binaries are not installed: {', '.join(missing)}")
    require(os.geteuid() == 0, "a private mariadbd is started as root (--user=root) in these tests")
    server = MariaDB()
    try:
        server.start()
        server.sql("CREATE DATABASE stuck CHARACTER SET utf8mb4")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def postgres() -> Iterator[Any]:
    from tests.test_sql_servers import PG_BIN, Postgres, _has_user

    missing = [str(PG_BIN / b) for b in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / b).exists()]
    require(not missing, f"PostgreSQL server binaries are not installed: {', '.join(missing)}")
    require(os.geteuid() == 0 and _has_user("postgres"), "a private cluster runs as the postgres OS user")
    server = Postgres()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _postmaster(data: Path) -> int:
    return int((data / "postmaster.pid").read_text().split()[0])


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry.name))
    return found


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Any]:
    require(shutil.which("redis-server") is not None, "redis-server is not installed")
    from tests.test_redis_backend import RedisServer

    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -- the scenarios --------------------------------------------------------------


def test_a_stopped_mariadb_fails_in_the_timeout_and_recovers(mariadb) -> None:
    dsn = f"root@tcp(127.0.0.1:{mariadb.port})/stuck"
    report = run_scenario("mysql", {"dsn": dsn, "table": f"t_{uuid.uuid4().hex[:8]}"}, [mariadb.proc.pid])
    check(report, _sentence("MySQL/MariaDB server", f"127.0.0.1:{mariadb.port}"))


def test_a_stopped_postgres_fails_in_the_timeout_and_recovers(postgres) -> None:
    options = {"dsn": postgres.dsn(), "table": f"t_{uuid.uuid4().hex[:8]}"}
    report = run_scenario("postgres", options, [_postmaster(postgres.data)], with_children=True)
    check(report, _sentence("PostgreSQL server", f"127.0.0.1:{postgres.port}"))


def test_a_stopped_redis_fails_in_the_timeout_and_recovers(redis_server) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    report = run_scenario("redis", {"url": url, "key_prefix": "stuck"}, [redis_server.process.pid])
    check(report, _sentence("Redis server", f"127.0.0.1:{redis_server.port}"))


def test_a_stopped_pgvector_fails_in_the_timeout_and_recovers() -> None:
    from tests.vector_servers import PgVectorServer, ServerUnavailable

    try:
        server = PgVectorServer()
        server.start()
    except ServerUnavailable as exc:
        require(False, str(exc))
    try:
        options = {"dsn": server.dsn, "table": f"t_{uuid.uuid4().hex[:8]}", "dimension": 8}
        report = run_scenario("pgvector", options, [_postmaster(server.data)], with_children=True)
    finally:
        server.stop()
    check(report, _sentence("PostgreSQL server", f"127.0.0.1:{server.port}"))


def test_a_stopped_chroma_server_fails_in_the_timeout_and_recovers() -> None:
    from tests.vector_servers import ChromaServer, ServerUnavailable

    try:
        server = ChromaServer()
        server.start()
    except ServerUnavailable as exc:
        require(False, str(exc))
    try:
        options = {"url": server.url, "collection": f"stuck-{uuid.uuid4().hex[:8]}", "dimension": 8}
        # ``chroma run`` leads its own session: stop the whole process group.
        report = run_scenario("chromadb", options, [], [server.process.pid])
    finally:
        server.stop()
    check(report, _sentence("Chroma server", server.url))


def test_the_timeout_reaches_every_store(tmp_path: Path) -> None:
    from backends import BACKEND_NAMES, create

    for name in BACKEND_NAMES:
        options: dict[str, Any] = {"timeout": 2.5, "env": {}}
        if name in ("sqlite", "sqlitevec"):
            options["dsn"] = f"sqlite:///{tmp_path / name}.db"
        if name == "chromadb":
            options["path"] = tmp_path / "chroma"
        store = create(name, **options)
        assert store.timeout == 2.5, name
        assert create(name, **{**options, "timeout": None}).timeout == 10.0, name


def test_a_timeout_that_is_not_positive_is_refused() -> None:
    from backends import create
    from memchat.engine import ConfigError

    for bad in (0, -1, float("nan"), "10"):
        with pytest.raises(ConfigError, match="the timeout must be a positive number of seconds"):
            create("inmemory", timeout=bad)


# -- a writer that waits too long for another ------------------------------------


@pytest.mark.parametrize("name", ["mysql", "postgres", "sqlite", "inmemory"])
async def test_a_lock_wait_longer_than_the_timeout_fails_with_its_reason(name: str, tmp_path: Path) -> None:
    """Another writer of the same user holds the lock (a lock row, an advisory
    lock, the in-process lock) past the timeout: the waiting call fails with
    why, in about the timeout, and the user's writes work once it lets go."""
    import asyncio

    from backends import create
    from memchat.engine import BackendError, MemoryService, UserKey
    from tests.conformance.harness import HARNESSES

    key = UserKey("memory-chat", f"locked-{uuid.uuid4().hex[:6]}")
    if name == "inmemory":
        holder = waiter = create("inmemory", timeout=TIMEOUT)
    else:
        options = dict(HARNESSES[name](tmp_path).options)
        holder, waiter = create(name, **options), create(name, **options, timeout=TIMEOUT)
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(tx: Any) -> None:
        await tx.count_active()
        held.set()
        await release.wait()

    holding = asyncio.create_task(holder.atomic(key, hold))
    try:
        await asyncio.wait_for(held.wait(), 30)
        started = asyncio.get_running_loop().time()
        with pytest.raises(BackendError) as info:
            await MemoryService(waiter).add(key, "waits for the lock")
        seconds = asyncio.get_running_loop().time() - started
    finally:
        release.set()
        await holding
    message = str(info.value)
    expected = {
        "inmemory": "waited more than 1.5 s for this user's other writes: try again, or raise --timeout",
        "sqlite": "stayed locked by another process for 1.5 s: try again, or raise --timeout",
    }.get(
        name, "another writer of this user held its lock for more than 1.5 s: try again, or raise --timeout"
    )
    assert message.endswith(expected), message
    assert TIMEOUT * 0.5 <= seconds < TIMEOUT + SLACK
    async with MemoryService(waiter) as svc:
        await svc.add(key, "after the lock")
        assert await svc.count(key) == 1
        await svc.clear(key)
    await holder.close()
