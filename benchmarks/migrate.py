"""Time of import, export and migration of 100k memories (issue 15).

    .venv/bin/python benchmarks/migrate.py                        # 100k, 4 users, sqlite → redis, postgres
    .venv/bin/python benchmarks/migrate.py --count 5000 --targets redis

1. Writes an export file of ``--count`` memories over ``--users`` users
   (varied texts from a word list, 1 in 10 an episode with time, participants
   and place, 1 in 20 a tombstone), each with a unit vector. The vectors are
   seeded random ones recorded under the identity of the default embedder
   (multilingual-e5-small): making 100k real e5 vectors takes about half an hour
   on these machines and is not what is measured; the re-embedding rate is
   measured separately (step 5).
2. ``import_lines`` of that file into a fresh SQLite file (the source).
3. ``export_lines`` of the SQLite store with vectors, compared byte for byte
   with the file of step 1.
4. ``migrate`` SQLite → each target (Redis under a fresh key prefix,
   PostgreSQL in fresh tables of database ``test``), with the default
   embedder on the target, so vectors are copied; count and checksum verified.
5. The default embedder's rate on 512 memory texts, from which the time to
   migrate with re-embedding (a target with another embedder) is estimated.

Everything made is removed at the end (the Redis prefix, the PostgreSQL
tables, the temporary folder). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from backends import create
from memchat.engine import MemoryService
from memchat.engine.embedding import default_embedder
from memchat.engine.portability import FORMAT, VERSION, export_lines, import_lines, migrate
from memchat.engine.vectors import embedder_identity

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
    "lisbon",
    "tokyo",
    "cat",
    "dog",
    "garden",
    "cooking",
    "baking",
    "cycling",
    "swimming",
    "novels",
    "history",
    "physics",
    "painting",
    "photography",
    "yoga",
    "climbing",
    "football",
    "tennis",
    "sushi",
    "pasta",
    "curry",
    "mornings",
    "evenings",
    "weekends",
    "sister",
    "brother",
    "mother",
    "friend",
    "colleague",
    "project",
    "deadline",
    "meeting",
    "vacation",
    "birthday",
    "concert",
    "museum",
    "podcast",
]
TEMPLATES = (
    "{u} likes {a} and {b}",
    "{u} has a {a} named {b}",
    "{u} is learning {a} with a {b} teacher",
    "{u} went to {a} with their {b}",
    "{u} prefers {a} over {b} on {c}",
    "{u} works on a {a} project about {b}",
)
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
POSTGRES_DSN = os.environ.get("MEMCHAT_TEST_POSTGRES_DSN") or "postgresql://root@127.0.0.1:5432/test"


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="microseconds")


def make_file(path: Path, count: int, users: int, identity: str) -> None:
    """An export file as `memchat memory export --vectors` writes it (records sorted
    by user, then ID; the closing line is left out: import only warns about it)."""
    from memchat.engine.ids import memory_id_for
    from memchat.engine.model import Memory

    rng = random.Random(15)
    vectors = np.random.default_rng(15)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    records: dict[str, list[dict[str, Any]]] = {}
    for i in range(count):
        user = f"user-{i % users}"
        words = rng.sample(WORDS, 3)
        text = rng.choice(TEMPLATES).format(u=user.title(), a=words[0], b=words[1], c=words[2]) + f" (#{i})"
        episode = i % 10 == 0
        memory = Memory(
            text=text,
            topics=(words[0],),
            kind="episode" if episode else "fact",
            event_time=start + timedelta(days=i % 700) if episode else None,
            participants=(user.title(), "Sam") if episode else (),
            location="Lisbon" if episode else "",
        )
        created = start + timedelta(seconds=30 * i)
        vector = vectors.standard_normal(384).astype("<f4")
        vector /= np.linalg.norm(vector)
        records.setdefault(user, []).append({
            "app": "bench-app", "user": user, "id": memory_id_for(memory, "bench-app", user),
            "text": text, "topics": list(memory.topics), "kind": memory.kind,
            "event_time": _time(memory.event_time), "participants": list(memory.participants),
            "location": memory.location, "created_at": _time(created),
            "updated_at": _time(created + timedelta(seconds=i % 7)),
            "deleted_at": _time(created + timedelta(days=1)) if i % 20 == 7 else None,
            "vector": base64.b64encode(vector.tobytes()).decode("ascii"),
        })  # fmt: skip
    with path.open("w", encoding="utf-8") as f:
        f.write(
            json.dumps({"format": FORMAT, "version": VERSION, "embedder": identity}, separators=(",", ":"))
        )
        f.write("\n")
        for user in sorted(records):
            for record in sorted(records[user], key=lambda r: r["id"]):
                f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


class Progress:
    def __init__(self, label: str) -> None:
        self.label, self.last, self.started = label, -1, time.perf_counter()

    def __call__(self, state: Any) -> None:
        if state.percent // 10 != self.last:
            self.last = state.percent // 10
            elapsed = time.perf_counter() - self.started
            print(
                f"  {self.label}: {state.percent}% ({state.done:,}/{state.total:,}) {elapsed:.0f} s",
                file=sys.stderr,
            )


def target_store(name: str, tag: str) -> Any:
    if name == "redis":
        return create("redis", url=REDIS_URL, key_prefix=f"memchat-bench:{tag}:")
    if name in ("postgres", "mysql"):
        dsn = POSTGRES_DSN if name == "postgres" else "mysql://root@127.0.0.1:3306/test"
        return create(name, dsn=dsn, table=f"memchat_bench_{tag}")
    raise SystemExit(f"unsupported target {name}: use redis, postgres or mysql")


async def cleanup(name: str, tag: str) -> None:
    if name == "redis":
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(REDIS_URL)
        async for key in client.scan_iter(match=f"memchat-bench:{tag}:*", count=1000):
            await client.delete(key)
        await client.aclose()
    elif name == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_DSN.replace("postgresql://", "postgresql://"), autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (f"memchat_bench_{tag}%",)
            )]  # fmt: skip
            for table in tables:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            conn.execute("DELETE FROM memchat_meta WHERE name LIKE %s", (f"memchat_bench_{tag}%",))


def show(row: tuple[str, float, str], count: int) -> None:
    """A row as soon as it is measured (stderr), so a long run shows its figures early."""
    print(f"  done: {row[0]}: {row[1]:.1f} s, {count / row[1]:,.0f}/s, {row[2]}", file=sys.stderr, flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--targets", default="redis,postgres")
    args = parser.parse_args()
    embedder = default_embedder()
    identity = embedder_identity(embedder)
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memories.jsonl"
        started = time.perf_counter()
        make_file(path, args.count, args.users, identity)
        size = path.stat().st_size
        made = time.perf_counter() - started
        print(f"file: {args.count:,} memories, {size / 1e6:.0f} MB, made in {made:.0f} s", file=sys.stderr)

        source = MemoryService(
            create("sqlite", dsn=f"sqlite:///{folder}/source.db"), embedder=embedder, limit=0
        )
        async with source:
            started = time.perf_counter()
            with path.open(encoding="utf-8") as f:
                report = await import_lines(source, f)
            seconds = time.perf_counter() - started
            assert report.added == args.count and not report.errors, report
            rows.append(("import file → sqlite", seconds, f"{report.added:,} added"))
            show(rows[-1], args.count)

            started = time.perf_counter()
            exported = Path(folder) / "again.jsonl"
            with exported.open("w", encoding="utf-8") as f:
                async for line in export_lines(source.store, with_vectors=True):
                    f.write(line + "\n")
            seconds = time.perf_counter() - started
            same = exported.read_bytes().rsplit(b"\n", 2)[0] + b"\n" == path.read_bytes()
            rows.append(
                ("export sqlite → file (with vectors)", seconds, f"same records as the input: {same}")
            )
            show(rows[-1], args.count)
            again_started = time.perf_counter()
            with path.open(encoding="utf-8") as f:
                again = await import_lines(source, f)
            note = f"{again.added} added, {again.updated} updated, {again.skipped:,} skipped"
            rows.append(("import the same file again", time.perf_counter() - again_started, note))
            show(rows[-1], args.count)

        for name in [t for t in args.targets.split(",") if t]:
            tag = uuid.uuid4().hex[:10]
            target = MemoryService(target_store(name, tag), embedder=embedder, limit=0)
            reader = create("sqlite", dsn=f"sqlite:///{folder}/source.db")
            try:
                started = time.perf_counter()
                async with target:
                    result = await migrate(reader, target, progress=Progress(f"sqlite → {name}"))
                seconds = time.perf_counter() - started
                await reader.close()
            except Exception as exc:  # a server gone away: the table says so, the other targets still run
                rows.append((f"migrate sqlite → {name}", time.perf_counter() - started, f"FAILED: {exc}"))
                show(rows[-1], args.count)
            else:
                same_sum = result.source_checksum == result.target_checksum
                note = (
                    f"verified {result.verified} ({result.target_count:,}/{result.source_count:,}, "
                    f"checksum {'equal' if same_sum else 'differs'}), "
                    f"vectors copied {result.vectors_copied}"
                )
                rows.append((f"migrate sqlite → {name}", seconds, note))
                show(rows[-1], args.count)
            finally:
                await cleanup(name, tag)

    texts = [
        f"{t.format(u='Alex', a=a, b=b, c='weekends')}"
        for t in TEMPLATES
        for a in WORDS[:9]
        for b in WORDS[9:18]
    ]
    texts = texts[:512]
    await embedder.embed(texts[:8])
    started = time.perf_counter()
    await embedder.embed(texts)
    rate = len(texts) / (time.perf_counter() - started)
    estimate = f"{rate:.0f} texts/s → re-embedding {args.count:,} adds ≈ {args.count / rate / 60:.0f} min"
    rows.append(("embed 512 memory texts (e5, default embedder)", len(texts) / rate, estimate))

    print(f"\n{args.count:,} memories, {args.users} users ({time.strftime('%Y-%m-%d')})\n")
    print("| step | seconds | memories/s | note |")
    print("|---|---|---|---|")
    for step, seconds, note in rows:
        per = f"{args.count / seconds:,.0f}" if not step.startswith("embed") else "—"
        print(f"| {step} | {seconds:.1f} | {per} | {note} |")


if __name__ == "__main__":
    asyncio.run(main())
