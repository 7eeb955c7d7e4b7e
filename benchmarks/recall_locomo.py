"""Retrieval recall on LoCoMo conversations, per backend and search mode.

    .venv/bin/python benchmarks/recall_locomo.py --data ../shared/data/locomo
    .venv/bin/python benchmarks/recall_locomo.py --backends sqlitevec --no-event-time

Per conversation, every observation (``session_N_observation``: short
third-person facts, each with the ``dia_id`` of the turn it came from) is added
as a memory of one user — with ``event_time`` = its session's date unless
``--no-event-time``. For each question of categories 1–4 with evidence, the
memories are searched with the question text; a hit at k is a top-k memory
carrying one of the question's evidence ``dia_id``s. Questions whose evidence
no observation carries cannot be hit (the ceiling).

Modes, through MemoryService.search on each backend (``max_results=10``):
  keyword  mode="keyword" (the engine's keyword ranking, §4.1)
  vector   mode="semantic" (calibrated cosine only; = svc.vector_search)
  hybrid   mode="" (the default: engine/search/fusion.py HybridRanking)
To score one conversation alone (the held-out one, benchmarks/README.md), point
``--data`` at a folder holding only its JSON file.
and two plain baselines computed here over the same data and embeddings:
Okapi BM25 (k1 1.2, b 0.75, lower-cased [a-z0-9]+ tokens) and cosine.

Every observation and question is embedded once, in batches, with the offline
embedder; the services get those vectors through a caching wrapper, so every
backend ranks the same vectors. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from memchat.engine import MemoryService, Metadata, SearchOptions, UserKey  # noqa: E402
from memchat.engine.embedding import default_embedder  # noqa: E402

KS = (5, 10)
KEY = UserKey("locomo", "speaker-pair")


def dia_ids(value: Any) -> set[str]:
    if isinstance(value, list):
        return set().union(*(dia_ids(v) for v in value)) if value else set()
    return {p for p in re.split(r"[;,\s]+", str(value)) if p}


def load(folder: Path) -> list[dict[str, Any]]:
    conversations = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        observations: list[tuple[str, set[str], datetime | None]] = []
        sessions = sorted(
            (k for k in data if re.fullmatch(r"session_\d+_observation", k)),
            key=lambda k: int(k.split("_")[1]),
        )
        for name in sessions:
            number = name.split("_")[1]
            stamp = data.get(f"session_{number}_date_time", "").strip()
            when = datetime.strptime(stamp, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC) if stamp else None
            for facts in data[name].values():
                for fact in facts:
                    observations.append((fact[0], dia_ids(fact[1]), when))
        questions = [
            (q["question"], dia_ids(q["evidence"]))
            for q in data["qa"]
            if q.get("category") in (1, 2, 3, 4) and q.get("evidence")
        ]
        conversations.append({"name": path.stem, "observations": observations, "questions": questions})
    return conversations


class CachedEmbedder:
    """The default embedder, answering from vectors computed up front (memories with
    ``embed``, questions with ``embed_query`` where the embedder tells them apart)."""

    def __init__(self, inner: Any, cache: dict[str, list[float]], queries: dict[str, list[float]]) -> None:
        self.inner, self.cache, self.queries = inner, cache, queries
        self.name, self.dimension = inner.name, inner.dimension
        self.dense_model = getattr(inner, "dense_model", None)  # its calibration (engine/search/dense.py)

    async def _cached(self, cache: dict, embed: Any, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in cache]
        if missing:
            for text, vector in zip(missing, await embed(missing), strict=True):
                cache[text] = vector
        return [cache[t] for t in texts]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._cached(self.cache, self.inner.embed, texts)

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._cached(self.queries, getattr(self.inner, "embed_query", self.inner.embed), texts)

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        return await self.inner.embed_tokens(texts)


# -- baselines ---------------------------------------------------------------


def bm25_rank(docs: list[str], query: str, k1: float = 1.2, b: float = 0.75) -> list[int]:
    tokenised = [re.findall(r"[a-z0-9]+", d.lower()) for d in docs]
    n = len(tokenised)
    avg = sum(map(len, tokenised)) / max(n, 1)
    df = collections.Counter(t for d in tokenised for t in set(d))
    scores = np.zeros(n)
    for term in set(re.findall(r"[a-z0-9]+", query.lower())):
        if term not in df:
            continue
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        for i, d in enumerate(tokenised):
            tf = d.count(term)
            if tf:
                scores[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg))
    return list(np.argsort(-scores, kind="stable")[: max(KS)])


def cosine_rank(matrix: Any, query: Any) -> list[int]:
    return list(np.argsort(-(matrix @ query), kind="stable")[: max(KS)])


# -- backends ----------------------------------------------------------------


def store_options(name: str, tmp: Path) -> tuple[dict[str, Any], Any]:
    """(options for backends.create, cleanup or None) — a fresh namespace."""
    table = f"locomo_{uuid.uuid4().hex[:12]}"
    if name == "sqlitevec":
        return {"dsn": f"sqlite:///{tmp / (table + '.db')}"}, None
    # The conformance harness knows how to reach (or start) every other server.
    import pytest

    from tests.conformance.harness import HARNESSES

    try:
        harness = HARNESSES[name](tmp)
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        raise RuntimeError(str(exc)) from None
    return dict(harness.options), None


async def run_backend(
    name: str, conversations: list[dict[str, Any]], embedder: CachedEmbedder, event_time: bool, tmp: Path
) -> dict[str, Any]:
    from backends import create

    hits = {mode: dict.fromkeys(KS, 0) for mode in ("keyword", "vector", "hybrid")}
    timings: dict[str, list[float]] = {mode: [] for mode in hits}
    total = 0
    for conv in conversations:
        options, _ = store_options(name, tmp)
        svc = MemoryService(create(name, **options), limit=0, embedder=embedder)
        try:
            await svc.open()
            evidence: dict[str, set[str]] = {}
            for text, ids, when in conv["observations"]:
                metadata = Metadata(event_time=when) if event_time and when else None
                added = await svc.add(KEY, text, metadata=metadata)
                evidence.setdefault(added.id, set()).update(ids)
            for question, wanted in conv["questions"]:
                total += 1
                for mode in hits:
                    start = time.perf_counter()
                    wanted_mode = {"keyword": "keyword", "vector": "semantic", "hybrid": ""}[mode]
                    found = await svc.search(
                        KEY, question, SearchOptions(max_results=max(KS), mode=wanted_mode)
                    )
                    timings[mode].append((time.perf_counter() - start) * 1000)
                    for k in KS:
                        if any(evidence.get(e.id, set()) & wanted for e in found[:k]):
                            hits[mode][k] += 1
        finally:
            await svc.clear(KEY)
            await svc.close()
    return {
        "recall": {m: {k: hits[m][k] / total for k in KS} for m in hits},
        "p50_ms": {m: float(np.median(timings[m])) for m in timings},
        "questions": total,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    parser.add_argument("--backends", default="sqlitevec,mysqlvec,pgvector,chromadb")
    parser.add_argument("--no-event-time", action="store_true", help="add the observations without dates")
    args = parser.parse_args()
    conversations = load(Path(args.data))
    if not conversations:
        sys.exit(f"no LoCoMo files in {args.data}")

    inner = default_embedder()
    texts = sorted({t for c in conversations for t, _, _ in c["observations"]})
    asked = sorted({q for c in conversations for q, _ in c["questions"]})
    start = time.perf_counter()
    cache = dict(zip(texts, await inner.embed(texts), strict=True))
    query_embed = getattr(inner, "embed_query", inner.embed)
    queries = dict(zip(asked, await query_embed(asked), strict=True))
    print(f"embedded {len(texts) + len(asked)} texts in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    embedder = CachedEmbedder(inner, cache, queries)
    cache = {**cache, **queries}  # the cosine baseline: questions as the engine embeds them

    # Baselines and the ceiling.
    base = {"bm25": dict.fromkeys(KS, 0), "cosine": dict.fromkeys(KS, 0)}
    reachable = total = 0
    for conv in conversations:
        docs = [t for t, _, _ in conv["observations"]]
        ids = [i for _, i, _ in conv["observations"]]
        matrix = np.array([cache[t] for t in docs], dtype=np.float32)
        for question, wanted in conv["questions"]:
            total += 1
            reachable += any(i & wanted for i in ids)
            for name, ranked in (
                ("bm25", bm25_rank(docs, question)),
                ("cosine", cosine_rank(matrix, np.array(cache[question], dtype=np.float32))),
            ):
                for k in KS:
                    base[name][k] += any(ids[i] & wanted for i in ranked[:k])

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
            print(f"… {name}", file=sys.stderr, flush=True)
            try:
                rows.append(
                    (
                        name,
                        await run_backend(name, conversations, embedder, not args.no_event_time, Path(tmp)),
                    )
                )
            except Exception as exc:
                rows.append((name, {"error": f"{type(exc).__name__}: {exc}"}))

    dates = "without dates" if args.no_event_time else "event_time = session date"
    print(f"\nLoCoMo recall, {len(conversations)} conversations, {total} questions (categories 1–4), {dates}")
    print(f"ceiling (evidence carried by some observation): {reachable / total:.3f}\n")
    print("| backend | mode | recall@5 | recall@10 | search p50 ms |")
    print("|---|---|---|---|---|")
    for name in ("bm25", "cosine"):
        print(f"| baseline | plain {name} | {base[name][5] / total:.3f} | {base[name][10] / total:.3f} | |")
    for name, result in rows:
        if "error" in result:
            print(f"| {name} | unavailable: {result['error']} | | | |")
            continue
        for mode, recall in result["recall"].items():
            print(f"| {name} | {mode} | {recall[5]:.3f} | {recall[10]:.3f} | {result['p50_ms'][mode]:.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
