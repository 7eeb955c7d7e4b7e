"""Ties at the store's keyword limit, cut as results order equal scores.

A user holding many copies of one sentence ("… (note 7)") gives a query hundreds
of keyword holders with the same rank, and the store's candidate limit cuts
through them. Hybrid search orders equal scores newest first, so a store that
cut the tie by ID left the engine unsure whether a newer copy it left out
belonged in the results: it asked again for every holder at the cutoff (at 100k
memories, 35 % of store_ops' searches). The in-memory and SQL stores now cut
such a tie newest first, knowing the tied holders' times (Chroma, past the
records it keeps in the process, from its index's times), and say so
(``KeywordStats.cutoff_key``): hybrid search then asks once, and ranks as the
full scan does. With the real default model, so the token re-rank's targets,
chosen among equal scores newest first too, are part of it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import memchat.engine.retrieval as service_module  # where search reads KEYWORD_CANDIDATES
from memchat.engine import MemoryService, SearchOptions, UserKey
from memchat.engine.search.candidates import CandidatePlan
from tests.conformance.harness import HARNESSES

KEY = UserKey("ties-app", "ties-user")
BASES = [
    "I drink green tea every morning",
    "I play chess with my brother Tom",
    "My friend Kenji loves jazz bars in Osaka",
    "I am learning the piano on Sundays",
]
#: Copies per base text: a query's holders outnumber the store's limit (hybrid
#: search's re-rank depth, 100), and the nearest 100 are all copies of one text.
COPIES = 110
QUERIES = ["green tea", "chess", "jazz bars", "piano lessons on Sundays"]


class CopiesEmbedder:
    """The default model, a copy embedded as its base text (same vector, as
    store_ops' generator does), each base text once."""

    def __init__(self) -> None:
        from memchat.engine.embedding import default_embedder

        self.inner = default_embedder()
        self.cache: dict[str, list[float]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def embed(self, texts: Any) -> list[list[float]]:
        bases = [re.sub(r" \(note \d+\)$", "", t) for t in texts]
        missing = [b for b in dict.fromkeys(bases) if b not in self.cache]
        if missing:
            self.cache.update(zip(missing, await self.inner.embed(missing), strict=True))
        return [self.cache[b] for b in bases]

    async def embed_query(self, texts: Any) -> list[list[float]]:
        return await self.inner.embed_query(list(texts))

    async def embed_tokens(self, texts: Any) -> list[Any]:
        return await self.inner.embed_tokens(list(texts))


@pytest.fixture(scope="module")
def embedder() -> CopiesEmbedder:
    return CopiesEmbedder()


@pytest.fixture(params=["inmemory", "sqlite", "chromadb"])
async def service(request, tmp_path, embedder, monkeypatch):
    """(the service that wrote the copies, the one whose searches are checked)."""
    if request.param == "chromadb":
        # A user past the records Chroma keeps in the process: the tied holders'
        # times come from the index (backends/_chroma_times.py), as at 100k memories.
        import backends._chroma_search as chroma_search
        import backends.chromadb as chroma_module

        monkeypatch.setattr(chroma_search, "ENTRIES_KEPT_UP_TO", 5)
        monkeypatch.setattr(chroma_module, "ENTRIES_KEPT_UP_TO", 5)
    harness = HARNESSES[request.param](tmp_path)
    svc = MemoryService(harness.make_store(), embedder=embedder, limit=0)
    await svc.open()
    for n in range(COPIES):
        for base in BASES:
            await svc.add(KEY, base if n == 0 else f"{base} (note {n})")
    if request.param != "chromadb":
        yield svc, svc
        await svc.close()
        return
    # The searches under test run in another process, which keeps none of the
    # records the writer (or its full-scan searches) read.
    other = MemoryService(harness.make_store(), embedder=embedder, limit=0)
    await other.open()
    yield svc, other
    await other.close()
    await svc.clear(KEY)
    await svc.close()


def _asks(store: Any, monkeypatch) -> list[Any]:
    """The statistics of every keyword answer the store gives from now on."""
    asked: list[Any] = []
    lookup = store.indexed_keyword_candidates

    async def counted(key: Any, space: str, *args: Any, **kwargs: Any) -> Any:
        found, stats = await lookup(key, space, *args, **kwargs)
        asked.append(stats)
        return found, stats

    monkeypatch.setattr(store, "indexed_keyword_candidates", counted)
    return asked


async def _ranked(
    svc: MemoryService, asked: list[Any], monkeypatch
) -> tuple[dict[str, list[tuple[str, float]]], dict[str, int]]:
    """Each query's results with the store's limit at hybrid search's re-rank depth,
    and how many times each asked the store."""
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 1)  # the limit: the re-rank depth
    options = SearchOptions(max_results=10)
    results, asks = {}, {}
    for q in QUERIES:
        before = len(asked)
        results[q] = [(e.id, round(e.score, 9)) for e in await svc.search(KEY, q, options)]
        asks[q] = len(asked) - before
    return results, asks


async def test_a_tie_cut_newest_first_needs_no_second_ask_and_ranks_as_the_full_scan(
    service, monkeypatch
) -> None:
    writer, service = service
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 10**9)
    options = SearchOptions(max_results=10)
    full = {q: [(e.id, round(e.score, 9)) for e in await writer.search(KEY, q, options)] for q in QUERIES}
    assert all(full.values())
    asked = _asks(service.store, monkeypatch)
    capped, asks = await _ranked(service, asked, monkeypatch)
    assert capped == full
    assert all(stats.cutoff_key is not None for stats in asked[:1])  # the limit cut a tie, newest first
    # Once each, but where a left-out holder ties with a nearest memory the store
    # left out (the copies share one vector: the nearest 100 are copies too, cut by
    # ID), which only its time places: "piano lessons on Sundays".
    assert [asks[q] for q in QUERIES[:3]] == [1, 1, 1]

    # Cut by ID (the store told of no times), the same searches ask again for the
    # holders at the cutoff, to rank the same: what the times save.
    asked.clear()
    monkeypatch.setattr(CandidatePlan, "tied", lambda self, ranks: np.flatnonzero(ranks < 0))
    by_id, asks_by_id = await _ranked(service, asked, monkeypatch)
    assert by_id == full
    assert [asks_by_id[q] for q in QUERIES[:3]] == [2, 2, 2]
