"""Latency of the engine's operations on every backend, beside the raw driver.

    .venv/bin/python benchmarks/store_ops.py                 # every backend, 1k and 10k
    .venv/bin/python benchmarks/store_ops.py sqlite redis --sizes 1000 --samples 100

For each backend and size it fills one user with N memories through
MemoryService.add, then times (p50/p95, milliseconds) add of a new memory,
get by ID, keyword search, and read of the 10 newest — next to the same
lookup done with the raw driver (one primary-key SELECT, one Redis HGET) as
the floor. Services are the machine's (127.0.0.1); a backend whose service is
down is reported and skipped. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends import BACKEND_NAMES, create
from memchat.engine import MemoryService, SearchOptions, UserKey

KEY = UserKey("bench-app", "bench-user")
WORDS = [
    "coffee",
    "tea",
    "hiking",
    "running",
    "chess",
    "piano",
    "guitar",
    "jazz",
    "python",
    "golang",
    "rust",
    "berlin",
    "kyoto",
    "paris",
    "sister",
    "brother",
    "dog",
    "cat",
    "garden",
    "novel",
    "movie",
    "football",
    "tennis",
    "swimming",
    "bakery",
    "sushi",
    "ramen",
    "museum",
    "concert",
]


def text_for(i: int) -> str:
    pick = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11)]
    return f"User memory {i}: likes {pick[0]} and {pick[1]}, visited {pick[2]} with {pick[3]}"


def options_for(name: str, tmp: Path) -> dict[str, Any]:
    table = f"bench_{uuid.uuid4().hex[:12]}"
    return {
        "inmemory": {},
        "sqlite": {"dsn": str(tmp / f"{table}.db")},
        "redis": {"url": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), "key_prefix": table},
        "mysql": {"dsn": os.environ.get("MEMCHAT_TEST_MYSQL_DSN", "mysql://root@127.0.0.1:3306/test"),
                  "table": table},
        "postgres": {"dsn": os.environ.get("MEMCHAT_TEST_POSTGRES_DSN", "postgresql://root@127.0.0.1:5432/test"),
                     "table": table},
        "sqlitevec": {"dsn": str(tmp / f"{table}-vec.db")},
        "mysqlvec": {"dsn": os.environ.get("MEMCHAT_TEST_MYSQL_DSN", "mysql://root@127.0.0.1:3306/test"),
                     "table": table},
    }.get(name, {})  # fmt: skip


class CachedEmbedder:
    """The offline embedder, answering from vectors computed up front in batches
    (so filling 10k memories is quick); anything else is embedded for real."""

    def __init__(self) -> None:
        from memchat.engine.embedding import default_embedder

        self.inner = default_embedder()
        self.name, self.dimension = self.inner.name, self.inner.dimension
        self.cache: dict[str, list[float]] = {}

    async def preload(self, texts: list[str]) -> None:
        for text, vector in zip(texts, await self.inner.embed(texts), strict=True):
            self.cache[text] = vector

    async def embed(self, texts: Any) -> list[list[float]]:
        missing = [t for t in texts if t not in self.cache]
        if missing:
            await self.preload(missing)
        return [self.cache[t] for t in texts]

    async def embed_tokens(self, texts: Any) -> list[Any]:
        return await self.inner.embed_tokens(texts)


VECTOR_QUERIES = [
    "coffee", "hiking berlin", "sister piano", "what does the user like to drink",
    "which city did the user travel to", "pets and animals", "music the user enjoys",
]  # fmt: skip


async def vector_rows(svc: MemoryService, samples: int) -> dict[str, Any]:
    """Search latency on a vector store: semantic and hybrid with the query's
    embedding computed in the search (each sample a new query), then hybrid
    again for the same queries with every model output already cached."""
    queries = [f"{VECTOR_QUERIES[i % len(VECTOR_QUERIES)]} {i}" for i in range(samples)]
    hybrid = SearchOptions(max_results=10, hybrid_search=True)
    semantic = SearchOptions(max_results=10)
    return {
        "vector": await timed(samples, lambda i: svc.vector_search(KEY, queries[i], semantic)),
        "hybrid": await timed(samples, lambda i: svc.search(KEY, f"{queries[i]}?", hybrid)),
        "hybrid_cached": await timed(samples, lambda i: svc.search(KEY, f"{queries[i]}?", hybrid)),
    }


async def timed(samples: int, op: Callable[[int], Awaitable[Any]]) -> tuple[float, float]:
    durations = []
    for i in range(samples):
        start = time.perf_counter()
        await op(i)
        durations.append((time.perf_counter() - start) * 1000)
    durations.sort()
    return statistics.median(durations), durations[int(len(durations) * 0.95) - 1]


async def raw_floor(name: str, store: Any, memory_id: str, samples: int) -> tuple[float, float] | None:
    """The same by-ID lookup with the bare driver: the cost the engine adds sits above this."""
    if name == "redis":
        client = await store._connected()  # the store's own connection pool
        key = store.keys_for(KEY).active
        return await timed(samples, lambda i: client.hget(key, memory_id))
    if name in ("sqlite", "mysql", "postgres"):
        import sqlalchemy as sa

        table = store.table
        stmt = sa.select(table.c.memory).where(
            table.c.app_name == KEY.app, table.c.user_id == KEY.user, table.c.memory_id == memory_id
        )
        async with store.engine.connect() as conn:
            return await timed(samples, lambda i: conn.execute(stmt))
    return None


async def bench(name: str, size: int, samples: int, tmp: Path) -> dict[str, Any]:
    store = create(name, **options_for(name, tmp))
    vector = bool(getattr(store.capabilities, "vector_search", False))
    embedder = CachedEmbedder() if vector else None
    svc = MemoryService(store, limit=0, embedder=embedder)
    try:
        await svc.open()
        if embedder is not None:
            await embedder.preload([text_for(i) for i in range(size)])
    except Exception as exc:
        return {"backend": name, "size": size, "error": str(exc)}
    try:
        fill_start = time.perf_counter()
        ids = []
        for i in range(size):
            ids.append((await svc.add(KEY, text_for(i), topics=[WORDS[i % len(WORDS)]])).id)
        fill = time.perf_counter() - fill_start
        row: dict[str, Any] = {"backend": name, "size": size, "fill_s": fill}
        row["add"] = await timed(samples, lambda i: svc.add(KEY, f"fresh memory {uuid.uuid4().hex} {i}"))
        row["get"] = await timed(samples, lambda i: svc.get(KEY, ids[(i * 37) % len(ids)]))
        queries = ["coffee", "hiking berlin", "sister piano", "what does the user like to drink"]
        row["search"] = await timed(
            samples, lambda i: svc.search(KEY, queries[i % len(queries)], SearchOptions(max_results=10))
        )
        row["read10"] = await timed(samples, lambda i: svc.read(KEY, 10))
        row["raw_get"] = await raw_floor(name, store, ids[len(ids) // 2], samples)
        if vector:
            row.update(await vector_rows(svc, samples))
        return row
    finally:
        try:
            await svc.clear(KEY)
        finally:
            await svc.close()


def fmt(pair: tuple[float, float] | None) -> str:
    return "—" if pair is None else f"{pair[0]:.2f} / {pair[1]:.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backends", nargs="*", default=[n for n in BACKEND_NAMES])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.backends:
            for size in args.sizes:
                print(f"… {name} at {size}", file=sys.stderr, flush=True)
                rows.append(await bench(name, size, args.samples, Path(tmp)))
    print("\np50 / p95 latency in ms per operation (one user holding N memories)\n")
    print("| backend | N | add | get | raw get (floor) | keyword search | read 10 newest | fill |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['backend']} | {r['size']} | unavailable: {r['error']} |||||")
            continue
        print(
            f"| {r['backend']} | {r['size']} | {fmt(r['add'])} | {fmt(r['get'])} | {fmt(r['raw_get'])} | "
            f"{fmt(r['search'])} | {fmt(r['read10'])} | {r['fill_s']:.1f} s |"
        )
    vector_rows_ = [r for r in rows if "hybrid" in r]
    if vector_rows_:
        print("\nVector stores: search p50 / p95 in ms. 'with embedding': each sample a new query, embedded")
        print("in the search (and hybrid re-ranks its best 50 with token vectors, cached per memory text);")
        print("'model cached': the same hybrid searches again, every model output already cached.\n")
        print("| backend | N | semantic (with embedding) | hybrid (with embedding) | hybrid (model cached) |")
        print("|---|---|---|---|---|")
        for r in vector_rows_:
            print(
                f"| {r['backend']} | {r['size']} | {fmt(r['vector'])} | {fmt(r['hybrid'])} | "
                f"{fmt(r['hybrid_cached'])} |"
            )


if __name__ == "__main__":
    asyncio.run(main())
