"""Latency of the engine's operations on every backend, beside the raw driver.

    .venv/bin/python benchmarks/store_ops.py                 # every backend, 1k and 10k
    .venv/bin/python benchmarks/store_ops.py sqlite redis --sizes 1000 --samples 100
    .venv/bin/python benchmarks/store_ops.py --search-only --sizes 1000 --samples 120

For each backend and size it fills one user with N memories through
MemoryService.add, then times (p50/p95, milliseconds) add of a new memory,
get by ID, keyword search, and read of the 10 newest — next to the same
lookup done with the raw driver (one primary-key SELECT, one Redis HGET) as
the floor — and the search a caller gets by default (issue 11):

* ``embed``: the query's embedding alone (``embed_query`` of the real default
  embedder, multilingual-e5-small), the embedder's share of a search;
* ``keyword``: ``svc.search`` with ``mode="keyword"`` on the same store;
* ``semantic``: ``svc.search`` with ``mode="semantic"`` (query embedded inside);
* ``hybrid``: ``svc.search`` with default options (hybrid: the query embedded
  inside while the store gives its keyword candidates, dense and keyword
  candidates fused, the best 100 re-ranked by static word-piece similarity,
  which caches nothing: the first search of a process ranks as fast as the
  hundredth, once the model and piece table are loaded).

Each sample is a new query (no query embedding is reused), and the modes are
interleaved sample by sample, so the machine's load hits them alike; the
ratios hybrid / keyword and embed / hybrid are printed beside the times.

Memories come from a short text generator. Their e5 vectors are computed for
real for the first ``--embed-texts`` distinct texts (default 1,000); beyond
that (10k) a memory is a base text with a variation ("… (note 7)") and gets
its base text's vector, so filling 10k takes minutes, not an hour. The search
path is the real one: queries are embedded by the model, word pieces of the
memories' real texts are looked up in the static table. Every backend is reached like
the conformance suite reaches it (tests/conformance/harness.py: pgvector and
chromadb on throwaway servers unless MEMCHAT_TEST_PGVECTOR_DSN /
MEMCHAT_TEST_CHROMA_URL name one). Prints Markdown tables.

``--add-between-searches``: an untimed ``svc.add`` of a new memory before every
timed search, as in a chat that remembers between questions: what a store
cached for its searches must then survive its own writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
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
    "coffee", "tea", "hiking", "running", "chess", "piano", "guitar", "jazz", "python", "golang", "rust",
    "berlin", "kyoto", "paris", "sister", "brother", "dog", "cat", "garden", "novel", "movie", "football",
    "tennis", "swimming", "bakery", "sushi", "ramen", "museum", "concert",
]  # fmt: skip

# A short generator of varied, natural memories (people, places, things, habits).
PEOPLE = [
    "my sister Anna", "my brother Tom", "my colleague Priya", "my friend Kenji", "my mother",
    "my neighbour Luis", "my manager Sarah", "my cousin Mei", "my partner Alex", "my old teacher",
]  # fmt: skip
PLACES = [
    "Berlin", "Kyoto", "Lisbon", "the lake house", "a small bakery downtown", "the climbing gym",
    "Paris", "the night market", "the public library", "a jazz bar in Osaka", "the office", "Toronto",
]  # fmt: skip
THINGS = [
    "green tea", "espresso", "sourdough bread", "ramen", "chess", "the piano", "tennis", "sci-fi novels",
    "old films", "trail running", "watercolour painting", "board games", "spicy food", "podcasts",
    "gardening", "vinyl records", "yoga", "photography", "sushi", "football",
]  # fmt: skip
JOBS = [
    "nurse", "software engineer", "teacher", "architect", "chef", "accountant", "designer", "pharmacist",
]  # fmt: skip
DAYS = [
    "on Monday", "last weekend", "in March", "every Friday", "in the summer", "yesterday",
    "at Christmas",
]  # fmt: skip
TEMPLATES = [
    "Likes {thing} a lot",
    "Dislikes {thing}",
    "Went to {place} with {person} {day}",
    "{Person} works as a {job} in {place}",
    "Plans to visit {place} {day}",
    "Started learning {thing} {day}",
    "{Person} recommended {thing}",
    "Had dinner with {person} at {place} {day}",
    "Is allergic to {thing}",
    "Wants to buy a gift for {person}: something about {thing}",
    "Usually spends {day} on {thing}",
    "Moved to {place} to work as a {job}",
]  # fmt: skip
TAILS = [
    "", ", mentioned twice", " and enjoyed it", ", said it matters", " (not sure why)", ", with photos",
    " before the move", " after work", ", a long story", ", happily", " with the kids", ", again",
    " according to Anna", ", in the rain", " during the holidays", ", as usual", " for the first time",
]  # fmt: skip
QUESTIONS = [
    "what does the user like to drink?", "which city did I travel to {day}?", "who works as a {job}?",
    "what hobby did I pick up?", "what am I allergic to?", "where did I go with {person}?",
    "any gift ideas for {person}?", "what food do I enjoy?", "{thing}", "{place}", "do I play any music?",
    "what is my job?", "where do I live?", "我喜欢喝什么？", "我和{person}去了哪里？", "pets and animals",
]  # fmt: skip


SUFFIXES = [
    "again", "please", "exactly", "recently", "lately", "now", "today", "honestly", "quickly", "still",
    "anyway", "though", "maybe", "then", "first", "really", "again soon", "these days", "nowadays",
    "back then", "remind me", "if you know", "in short", "by the way",
]  # fmt: skip


def text_for(i: int) -> str:
    """Memory ``i`` of the generator (a distinct text for every ``i``)."""
    t = TEMPLATES[i % len(TEMPLATES)]
    person = PEOPLE[(i // 3) % len(PEOPLE)]
    fields = {
        "person": person, "Person": person[0].upper() + person[1:], "place": PLACES[(i // 7) % len(PLACES)],
        "thing": THINGS[(i // 2) % len(THINGS)], "job": JOBS[(i // 5) % len(JOBS)],
        "day": DAYS[(i // 11) % len(DAYS)],
    }  # fmt: skip
    return f"{t.format(**fields)}{TAILS[(i // 13) % len(TAILS)]}"


def memory_text(i: int, base: int) -> tuple[str, str]:
    """(text of memory ``i``, the base text whose vector it gets): beyond ``base``
    distinct texts, memory ``i`` is base text ``i % base`` with a variation."""
    root = text_for(i % base)
    return (root if i < base else f"{root} (note {i // base})"), root


def query_for(i: int) -> str:
    """Query ``i``: a distinct, natural question for every ``i`` (no embedding reused)."""
    q = QUESTIONS[i % len(QUESTIONS)]
    n = i // len(QUESTIONS)
    q = q.format(
        person=PEOPLE[(i + n) % len(PEOPLE)], place=PLACES[(i + 2 * n) % len(PLACES)],
        thing=THINGS[(i + 3 * n) % len(THINGS)], job=JOBS[(i + n) % len(JOBS)], day=DAYS[(i + n) % len(DAYS)],
    )  # fmt: skip
    if n == 0:
        return q
    n -= 1
    first, second = SUFFIXES[n % len(SUFFIXES)], SUFFIXES[(n // len(SUFFIXES)) % len(SUFFIXES)]
    return f"{q} {first}" if n < len(SUFFIXES) else f"{q} {first} {second}"


def options_for(name: str, tmp: Path) -> dict[str, Any]:
    """A fresh namespace on ``name``, reached the way the conformance suite reaches it."""
    if name == "inmemory":
        return {}
    if name in ("sqlite", "sqlitevec"):
        return {"dsn": f"sqlite:///{tmp / f'bench-{name}-{uuid.uuid4().hex[:12]}.db'}"}
    import pytest

    from tests.conformance.harness import HARNESSES

    try:
        return dict(HARNESSES[name](tmp).options)
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        raise RuntimeError(str(exc)) from None


class CachedEmbedder:
    """The real default embedder, except that stored texts' vectors come from a
    cache filled up front in batches (see :func:`memory_text`: a varied text gets
    its base text's vector). Queries (``embed_query``) and word pieces
    (``embed_tokens``) always go to the model; every other attribute (name,
    identity, calibration…) is the model's."""

    def __init__(self) -> None:
        from memchat.engine.embedding import default_embedder

        self.inner = default_embedder()
        self.cache: dict[str, list[float]] = {}
        self.alias: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def preload(self, texts: list[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for start in range(0, len(missing), 64):
            chunk = missing[start : start + 64]
            for text, vector in zip(chunk, await self.inner.embed(chunk), strict=True):
                self.cache[text] = vector

    async def embed(self, texts: Any) -> list[list[float]]:
        texts = list(texts)
        missing = [t for t in texts if self.alias.get(t, t) not in self.cache]
        if missing:
            await self.preload(missing)
        return [self.cache[self.alias.get(t, t)] for t in texts]

    async def embed_query(self, texts: Any) -> list[list[float]]:
        return await self.inner.embed_query(list(texts))

    async def embed_tokens(self, texts: Any) -> list[Any]:
        return await self.inner.embed_tokens(list(texts))


_EMBEDDER: CachedEmbedder | None = None


def shared_embedder() -> CachedEmbedder:
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = CachedEmbedder()
        _EMBEDDER.inner.load()
    return _EMBEDDER


async def search_rows(
    svc: MemoryService, embedder: CachedEmbedder, samples: int, offset: int, add_between: bool = False
) -> dict[str, Any]:
    """Search latency, the modes interleaved sample by sample, each sample a new query."""
    keyword = SearchOptions(max_results=10, mode="keyword")
    semantic = SearchOptions(max_results=10, mode="semantic")
    default = SearchOptions(max_results=10)  # the service's default: hybrid
    ops: dict[str, Callable[[str], Awaitable[Any]]] = {
        "embed": lambda q: embedder.embed_query([q]),
        "keyword": lambda q: svc.search(KEY, q, keyword),
        "semantic": lambda q: svc.search(KEY, q, semantic),
        "hybrid": lambda q: svc.search(KEY, q, default),
    }
    times: dict[str, list[float]] = {name: [] for name in ops}
    for i in range(samples):
        q = query_for(offset + i)
        for name, op in ops.items():
            # The engine keeps its recent queries' vectors: empty that cache so every
            # mode embeds the query itself, as a new question does.
            embedder.inner.forget_queries()
            if add_between:
                await svc.add(KEY, f"{text_for(offset + i)} (between searches {name} {i})")
            start = time.perf_counter()
            await op(q)
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: percentiles(values) for name, values in times.items()}


def percentiles(durations: list[float]) -> tuple[float, float]:
    durations = sorted(durations)
    return statistics.median(durations), durations[max(0, math.ceil(len(durations) * 0.95) - 1)]


async def timed(samples: int, op: Callable[[int], Awaitable[Any]]) -> tuple[float, float]:
    durations = []
    for i in range(samples):
        start = time.perf_counter()
        await op(i)
        durations.append((time.perf_counter() - start) * 1000)
    return percentiles(durations)


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


async def raw_rows_floor(name: str, store: Any, ids: list[str], samples: int) -> tuple[float, float] | None:
    """The least a search returning 10 memories does: those 10 rows read with the
    bare driver by primary key (one HMGET on Redis). Printed beside the searches."""
    if name == "redis":
        client = await store._connected()
        key = store.keys_for(KEY).active
        return await timed(samples, lambda i: client.hmget(key, ids[i % 7 :: 7][:10]))
    if name in ("sqlite", "mysql", "postgres"):
        import sqlalchemy as sa

        table = store.table
        stmts = [
            sa.select(table.c.memory).where(
                table.c.app_name == KEY.app,
                table.c.user_id == KEY.user,
                table.c.memory_id.in_(ids[k::7][:10]),
            )
            for k in range(7)
        ]
        async with store.engine.connect() as conn:
            return await timed(samples, lambda i: conn.execute(stmts[i % 7]))
    return None


async def bench(name: str, size: int, samples: int, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    embedder = shared_embedder()
    base = min(size, args.embed_texts)
    texts = [memory_text(i, base) for i in range(size)]
    await embedder.preload([root for _, root in texts])
    for text, root in texts:
        if text != root:
            embedder.alias[text] = root
    try:
        options = options_for(name, tmp)
        if size > args.add_up_to:  # a section of 500 memories may take longer than a call's 10 s
            options["timeout"] = 120.0
        store = create(name, **options)
        svc = MemoryService(store, limit=0, embedder=embedder)
        await svc.open()
    except Exception as exc:
        return {"backend": name, "size": size, "error": f"{type(exc).__name__}: {exc}"}
    try:
        fill_start = time.perf_counter()
        if size > args.add_up_to:
            ids = await fill_in_sections(svc, store, embedder, texts)
        else:
            ids = []
            for i, (text, _) in enumerate(texts):
                ids.append((await svc.add(KEY, text, topics=[WORDS[i % len(WORDS)]])).id)
        fill = time.perf_counter() - fill_start
        row: dict[str, Any] = {"backend": name, "size": size, "fill_s": fill, "base": base}
        settled = getattr(store, "_analysis_done", None)
        if settled is not None:
            # PostgreSQL's own VACUUM (ANALYZE) after the fill runs in the background;
            # searches are timed once it is done (beside it, pgvector's keyword p95 at
            # 100k was 909 ms against 54), and its time is reported.
            started = time.perf_counter()
            await settled()
            row["maintenance_s"] = time.perf_counter() - started
        if not args.search_only:
            row["add"] = await timed(samples, lambda i: svc.add(KEY, f"fresh memory {uuid.uuid4().hex} {i}"))
            row["get"] = await timed(samples, lambda i: svc.get(KEY, ids[(i * 37) % len(ids)]))
            row["read10"] = await timed(samples, lambda i: svc.read(KEY, 10))
            row["raw_get"] = await raw_floor(name, store, ids[len(ids) // 2], samples)
        if not args.skip_search:
            # As every application does after its first frame (the TUI, the console, the
            # MCP server): the Chinese word segmentation loaded, so the first Chinese
            # query of the run times a search, not jieba's dictionary (0.6 s).
            await asyncio.to_thread(svc.warm_up)
            row.update(
                await search_rows(
                    svc,
                    embedder,
                    samples,
                    offset=1000 * len(args.done),
                    add_between=args.add_between_searches,
                )
            )
            row["raw_rows"] = await raw_rows_floor(name, store, ids, samples)
        args.done.append(name)
        return row
    finally:
        try:
            await svc.clear(KEY)
        finally:
            await svc.close()


async def fill_in_sections(
    svc: MemoryService, store: Any, embedder: Any, texts: list[tuple[str, str]]
) -> list[str]:
    """Write the memories 500 per atomic section, as ``svc.add`` builds them (same
    IDs, rows, vectors and index upkeep through the Store seam), so 100k fill in
    minutes: one section per memory would take the better part of an hour."""
    from datetime import UTC, datetime

    from memchat.engine.ids import build_memory, memory_id_for
    from memchat.engine.model import Entry

    ids: list[str] = []
    with_vectors = svc.is_vector_store and svc.has_embedder
    for start in range(0, len(texts), 500):
        chunk = [
            (text, WORDS[i % len(WORDS)]) for i, (text, _) in enumerate(texts[start : start + 500], start)
        ]
        vectors = await embedder.embed([t for t, _ in chunk]) if with_vectors else [None] * len(chunk)
        now = datetime.now(UTC)
        entries = []
        for text, topic in chunk:
            memory = build_memory(text, [topic], None)
            entries.append(
                Entry(memory_id_for(memory, KEY.app, KEY.user), KEY.app, KEY.user, memory, now, now)
            )

        async def work(tx: Any, entries: list[Entry] = entries, vectors: list[Any] = vectors) -> None:
            for entry, vector in zip(entries, vectors, strict=True):
                await tx.put(entry, vector)

        await store.atomic(KEY, work)
        ids += [e.id for e in entries]
    return ids


def fmt(pair: tuple[float, float] | None) -> str:
    if pair is None:
        return "—"
    return " / ".join(f"{v:.1f}" if v >= 10 else f"{v:.2f}" for v in pair)


def ratio(a: tuple[float, float], b: tuple[float, float]) -> str:
    return f"{a[0] / b[0]:.1f}× / {a[1] / b[1]:.1f}×"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backends", nargs="*", default=[n for n in BACKEND_NAMES])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--samples", type=int, default=120, help="queries (and operations) per measurement")
    parser.add_argument(
        "--embed-texts", type=int, default=1000, help="distinct memory texts embedded for real"
    )
    parser.add_argument(
        "--search-only", action="store_true", help="skip add / get / read, time searches only"
    )
    parser.add_argument(
        "--skip-search",
        action="store_true",
        help="time add / get / read only (an older tree as the baseline for add: its searches scan)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--add-between-searches",
        action="store_true",
        help="add a memory (untimed) before every timed search, as a chat does",
    )
    parser.add_argument(
        "--add-up-to",
        type=int,
        default=10_000,
        help="fill through svc.add up to this size; larger ones 500 memories per atomic section",
    )
    args = parser.parse_args()
    args.done = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            for name in args.backends:
                print(f"… {name} at {size}", file=sys.stderr, flush=True)
                row = await bench(name, size, args.samples, Path(tmp), args)
                rows.append(row)
                if "error" in row:
                    print(f"  unavailable: {row['error']}", file=sys.stderr, flush=True)
                else:
                    if "maintenance_s" in row:
                        print(
                            f"  background VACUUM after the fill: {row['maintenance_s']:.1f} s",
                            file=sys.stderr,
                        )
                    print(
                        f"  fill {row['fill_s']:.0f} s; add {fmt(row.get('add'))}, "
                        f"embed {fmt(row.get('embed'))}, keyword {fmt(row.get('keyword'))}, "
                        f"hybrid {fmt(row.get('hybrid'))} ms",
                        file=sys.stderr,
                        flush=True,
                    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if not args.search_only:
        print("\np50 / p95 latency in ms per operation (one user holding N memories)\n")
        print("| backend | N | add | get | raw get (floor) | read 10 newest | fill |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            if "error" in r:
                print(f"| {r['backend']} | {r['size']} | unavailable: {r['error']} |||||")
                continue
            print(
                f"| {r['backend']} | {r['size']} | {fmt(r['add'])} | {fmt(r['get'])} | {fmt(r['raw_get'])} | "
                f"{fmt(r['read10'])} | {r['fill_s']:.1f} s |"
            )
    if args.skip_search:
        return
    print(f"\nSearch p50 / p95 in ms, {args.samples} new queries each, modes interleaved per query;")
    print("hybrid = svc.search default (query embedded inside); ratios p50 / p95.\n")
    print("raw 10 rows = the 10 rows a search returns, read by primary key with the bare driver (floor).\n")
    print(
        "| backend | N | raw 10 rows (floor) | embed query alone | keyword | semantic | hybrid "
        "| hybrid ÷ keyword | embed ÷ hybrid |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['backend']} | {r['size']} | unavailable: {r['error']} |||||||")
            continue
        share = f"{r['embed'][0] / r['hybrid'][0]:.0%} / {r['embed'][1] / r['hybrid'][1]:.0%}"
        cells = [f"{r['size']:,}", fmt(r.get("raw_rows"))]
        cells += [fmt(r[m]) for m in ("embed", "keyword", "semantic", "hybrid")]
        cells += [ratio(r["hybrid"], r["keyword"]), share]
        print(f"| {r['backend']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    asyncio.run(main())
