"""Latency of a ``memory_search`` call through `memchat mcp`, over stdio and
streamable HTTP, beside the same tool called in process.

    .venv/bin/python benchmarks/mcp_latency.py                       # 1k memories, 200 samples
    .venv/bin/python benchmarks/mcp_latency.py --size 1000 --samples 300 --embedder none

One user gets ``--size`` memories in a fresh SQLite file (the default backend;
text generator of store_ops.py, real vectors from the default embedder unless
``--embedder none``). Then, each with the MCP SDK's own client:

* ``in process``: ``Tool.run`` of memory_search on a MemoryService over the same
  file: the engine's share, no protocol;
* ``stdio``: ``memchat mcp`` started by the client as a subprocess;
* ``http``: ``memchat mcp --http 127.0.0.1:0`` as a subprocess, a bearer token
  on every request (created in a throwaway token file).

The three are open at once and called in turn, sample by sample, so the
machine's load hits them alike. Every sample is a new query (no embedding
reused); 10 warm-up calls first (the model loads on the first). Prints a
Markdown table of p50/p95/mean in milliseconds and the protocol's cost (p50
minus in process) with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_ops import query_for, text_for  # noqa: E402

from memchat.engine import UserKey  # noqa: E402

MEMCHAT = Path(sys.executable).with_name("memchat")
KEY = UserKey("memory-chat", "bench-user")
WARMUP = 10


def environment(tmp: Path, embedder: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCHAT_", "OPENAI_", "SQLITE"))}
    env.update(
        SQLITE_MEMORY_DSN=f"sqlite:///{tmp / 'memories.db'}",
        MEMCHAT_MCP_TOKENS=str(tmp / "tokens.json"),
        MEMCHAT_USER=KEY.user,
        MEMCHAT_EMBEDDER=embedder,
        XDG_CONFIG_HOME=str(tmp / "config"),
        XDG_DATA_HOME=str(tmp / "data"),
    )
    return env


def settings(env: dict[str, str]) -> Any:
    from memchat.settings import Settings

    return Settings.load({}, environ=env, cwd=Path(env["XDG_CONFIG_HOME"]).parent)


async def seed(env: dict[str, str], size: int) -> None:
    from memchat.agent.factory import create_service

    started = time.perf_counter()
    async with create_service(settings(env)) as svc:
        for i in range(size):
            await svc.add(KEY, text_for(i), topics=["bench"])
        count = await svc.count(KEY)
    print(f"seeded {count} memories in {time.perf_counter() - started:.1f}s", file=sys.stderr)


def check(text: str) -> None:
    body = json.loads(text)
    if "error" in body:
        raise SystemExit(f"memory_search failed: {body['error']}")


Call = Callable[[int], Awaitable[None]]


def over_mcp(client: Any) -> Call:
    async def call(i: int) -> None:
        result = await client.call_tool("memory_search", {"query": query_for(i)})
        check(result.content[0].text)

    return call


async def interleaved(calls: dict[str, Call], samples: int) -> dict[str, list[float]]:
    """Sample i of every transport back to back, so the machine's load hits them alike."""
    for i in range(WARMUP):
        for call in calls.values():
            await call(100_000 + i)
    durations: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(samples):
        for name, call in calls.items():
            started = time.perf_counter()
            await call(i)
            durations[name].append((time.perf_counter() - started) * 1000)
    return durations


async def measure(env: dict[str, str], samples: int) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from memchat.agent.factory import create_service
    from memchat.mcp.tokens import TokenStore

    token, _ = TokenStore(env["MEMCHAT_MCP_TOKENS"]).create(KEY)
    server = subprocess.Popen(
        [str(MEMCHAT), "mcp", "--http", "127.0.0.1:0"], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    params = StdioServerParameters(command=str(MEMCHAT), args=["mcp"], env=env)
    try:
        url = await asyncio.to_thread(_url_from, server)
        with open(os.devnull, "w") as quiet:
            async with (
                create_service(settings(env)) as svc,
                Client(stdio_client(params, errlog=quiet)) as over_stdio,
                create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as over_http,
            ):
                tool = {t.name: t for t in svc.tools()}["memory_search"]

                async def in_process(i: int) -> None:
                    check((await tool.run({"query": query_for(i)}, KEY)).content)

                calls = {
                    "in process (Tool.run)": in_process,
                    "MCP stdio": over_mcp(over_stdio),
                    "MCP streamable HTTP": over_mcp(over_http),
                }
                return await interleaved(calls, samples)
    finally:
        server.terminate()
        server.wait(30)


def _url_from(server: subprocess.Popen) -> str:
    deadline = time.monotonic() + 120
    assert server.stderr is not None
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        if not line:
            raise SystemExit(f"memchat mcp --http ended: exit {server.wait()}")
        match = re.search(r"on (http://\S+/mcp)", line)
        if match:
            return match.group(1)
    raise SystemExit("memchat mcp --http did not start within 120 s")


def row(name: str, durations: list[float], floor: float | None) -> str:
    ordered = sorted(durations)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    cost = f"+{p50 - floor:.2f}" if floor is not None else "—"
    return f"| {name} | {p50:.2f} | {p95:.2f} | {statistics.fmean(ordered):.2f} | {cost} |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="memories of the user (default 1000)")
    parser.add_argument("--samples", type=int, default=200, help="timed calls per transport (default 200)")
    parser.add_argument("--embedder", default="default", help="MEMCHAT_EMBEDDER: default, none, … (default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memchat-mcp-bench-") as name:
        env = environment(Path(name), args.embedder)
        await seed(env, args.size)
        durations = await measure(env, args.samples)
    floor = statistics.median(durations["in process (Tool.run)"])
    mode = "hybrid" if args.embedder != "none" else "keyword"
    load = os.getloadavg()[0]
    print(
        f"\nmemory_search on SQLite, {args.size} memories, {mode} search, {args.samples} samples per "
        f"transport, interleaved (ms; load average {load:.1f} on {os.cpu_count()} cores)\n"
    )
    print("| transport | p50 | p95 | mean | protocol cost (p50) |")
    print("|---|---|---|---|---|")
    for name, values in durations.items():
        print(row(name, values, None if name.startswith("in process") else floor))


if __name__ == "__main__":
    asyncio.run(main())
