"""The read path of searches of the Chroma store (``ChromaStore``'s mixin, kept
apart so each module stays small): keyword candidates from the index collection
(backends/_chroma_index.py), nearest neighbours from Chroma's HNSW index, and
the memories behind both read only when this process has not read them at the
user's current index version (backends/_chroma_entries.py).

A Chroma server spends far more on a record's document and metadata than on
finding it, so searches ask Chroma for IDs and distances only and read the
documents of just the memories they return.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from memchat.engine.model import Entry, UserKey, to_micros
from memchat.engine.products import matrix_times_vector
from memchat.engine.search.index import KeywordStats, NewestFirst
from memchat.engine.search.scope import share, shared_read
from memchat.engine.vectors import IndexingProgress, ProgressCallback, report_progress

from . import _chroma_newest as newest_list
from ._chroma_index import (
    EMPTY,
    INDEX_META,
    LAYOUT,
    ChromaKeywordIndex,
    UserStats,
    index_version,
    layout_of,
    new_token,
    ranker,
    read_in_place,
)
from ._chroma_records import (
    DENSE_KEY,
    chunks,
    dense_filter,
    dense_tag,
    pages,
    record_entry,
    record_id,
    user_filter,
)
from ._vectors import check_query

if TYPE_CHECKING:
    from memchat.engine.search.candidates import KeywordPlanner

    from ._chroma_background import BackgroundReads
    from ._chroma_entries import EntryCache
    from ._chroma_matrix import ChromaMatrices
    from ._chroma_transaction import ChromaTransaction
    from ._chroma_user_vectors import UserVectorCollections

T = TypeVar("T")

#: How many more neighbours than asked for an approximate (HNSW) search fetches.
OVERFETCH = 4
#: Records read per request.
PAGE_SIZE = 500
#: Up to this many active memories, the background read of a user's vectors
#: reads their records too (a decoded entry takes about 0.6 KB: 15 MB at the
#: bound) and the searches after it rank the kept matrix. Past it, a user whose
#: own vector collection is current keeps nothing: the searches ask that
#: collection's HNSW index (7 ms at 100k, about what the matrix's product over
#: 100k rows costs), which spares the 9 s read of the vectors that slowed every
#: search beside it, and 154 MB per user; a search reads the records of the
#: memories it ranks.
ENTRIES_KEPT_UP_TO = 25_000
#: Records per request of that background read (see ``_user_vectors``).
VECTOR_PAGE_SIZE = 500


class ChromaSearch:
    """``ChromaStore``'s searches and its keyword index upkeep on open (see the module docstring)."""

    if TYPE_CHECKING:
        name: str
        _background: BackgroundReads
        _index: ChromaKeywordIndex | None
        _index_ready: bool
        _entries: EntryCache
        _matrices: ChromaMatrices
        _vector_collections: UserVectorCollections | None
        _vector_versions: dict[UserKey, str]
        dimension: int
        progress: ProgressCallback | None

        async def _call(self, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        async def _read_call(self, action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        async def _ready(self) -> Any: ...
        async def record_ids(self, where: dict[str, Any]) -> builtins.list[str]: ...
        async def users(self) -> builtins.list[UserKey]: ...
        async def read_meta(self, name: str) -> str | None: ...
        async def write_meta(self, name: str, value: str) -> None: ...
        async def list(
            self, key: UserKey, *, limit: int = 0, include_deleted: bool = False
        ) -> builtins.list[Entry]: ...
        async def atomic(self, key: UserKey, work: Callable[[ChromaTransaction], Any]) -> Any: ...
        def check_vector(self, vector: Sequence[float]) -> builtins.list[float]: ...

    # -- the keyword index ---------------------------------------------------

    async def _user_stats(self, key: UserKey) -> UserStats | None:
        """The user's index statistics when they can be trusted, else None."""
        index = self._index
        if not self._index_ready or index is None:
            return None
        # Within one search, the statistics the keyword read brought (or an earlier ask).
        stats = await shared_read(self._stats_read(key), lambda: self._read_call("reading", index.stats, key))
        if stats is None:
            return EMPTY  # no memory written yet
        return None if stats.dirty else stats

    def _stats_read(self, key: UserKey) -> tuple[str, int, UserKey]:
        """The name of this store's read of the user's statistics, shared within a search."""
        return ("chroma statistics", id(self), key)

    async def _ensure_keyword_index(self) -> None:
        """Index a collection made before the keyword index (or changed by a memchat
        that did not keep it), user by user, each under its user's lock."""
        index = self._index
        if index is None:
            return
        collection = await self._ready()
        recorded = await self.read_meta(INDEX_META)
        if read_in_place(recorded):
            every = await self._read_call("reading the keyword index", index.every_stats)
            # A writer that does not keep the index (an older memchat) adding or
            # removing records makes the counts differ.
            total = await self._read_call("counting", collection.count)
            if sum(s.records for s in every.values()) == total and not any(s.dirty for s in every.values()):
                layout = layout_of(recorded) or LAYOUT
                keys = sorted(every, key=lambda k: (k.app, k.user))
                if layout < 6:  # no vector collection per user
                    await self._build_vector_collections(keys)
                if layout < 7:  # no times in the index
                    await self._add_times(index, keys, every)
                if recorded != index_version():
                    await self.write_meta(INDEX_META, index_version())
                self._index_ready = True
                return
        else:
            every = {}
        active = len(await self.record_ids({"deleted_at_us": 0}))
        keys = sorted({*await self.users(), *every}, key=lambda k: (k.app, k.user))
        done = 0
        await report_progress(self.progress, IndexingProgress(done, active))
        for key in keys:

            async def rebuild(tx: ChromaTransaction, key: UserKey = key) -> int:
                entries = await self.list(key)
                self._entries.drop(key)
                await self._tag_searchable(key)
                await self._rebuild_user(index, key, entries, await self._record_count(key))
                return len(entries)

            done += await self.atomic(key, rebuild)
            await report_progress(self.progress, IndexingProgress(done, active))
        await self.write_meta(INDEX_META, index_version())
        self._index_ready = True

    async def _add_times(
        self, index: ChromaKeywordIndex, keys: Sequence[UserKey], every: dict[UserKey, UserStats]
    ) -> None:
        """Write each user's times into an index of an older layout (one read of
        their records and one write of about a record per 30 memories), with the
        progress line."""

        async def add(key: UserKey) -> int:
            return await self._call("indexing", index.add_times, key, await self.list(key))

        await self._each_user(keys, sum(every[key].active for key in keys), add)

    async def _each_user(
        self,
        keys: Sequence[UserKey],
        total: int,
        work: Callable[[UserKey], Awaitable[int]],
        *,
        quiet: bool = False,
    ) -> None:
        """``work`` for each of ``keys`` under the user's lock, its memories done (of
        ``total``) on the progress line, unless ``quiet`` or there is nothing to do."""
        told = self.progress if total and not quiet else None
        done = 0
        await report_progress(told, IndexingProgress(done, total))
        for key in keys:

            async def under_lock(tx: ChromaTransaction, key: UserKey = key) -> int:
                return await work(key)

            done += await self.atomic(key, under_lock)
            await report_progress(told, IndexingProgress(done, total))

    # -- each user's vector collection (backends/_chroma_user_vectors.py) -------

    async def _vectors_at(self, key: UserKey, version: str) -> bool:
        """Whether the user's vector collection matches ``version``: known to this
        process, or read from its marker (one small request)."""
        collections = self._vector_collections
        if collections is None:
            return False
        if self._vector_versions.get(key) == version:
            return True
        found = self._vector_versions[key] = await self._read_call("reading", collections.marker, key)
        return found == version

    async def _rebuild_user(
        self, index: ChromaKeywordIndex, key: UserKey, entries: builtins.list[Entry], records: int
    ) -> str:
        """Index the user afresh (under the user's lock): their vector collection from
        the memories' stored vectors, then the keyword index, both at one new version."""
        version = new_token()
        collections = self._vector_collections
        self._vector_versions.pop(key, None)
        if collections is not None:
            collection = await self._ready()
            vectors, _ = await self._read_call("indexing", searchable_records, collection, key, False)
            await self._call("indexing", collections.rebuild, key, vectors, version)
        version = await self._call("indexing", index.rebuild, key, entries, records, version)
        if collections is not None:
            self._vector_versions[key] = version
        return version

    async def _build_vector_collections(
        self, keys: Sequence[UserKey] | None = None, *, quiet: bool = False
    ) -> None:
        """Each user's vector collection (of ``keys``; None: every indexed user) at
        their index's version, from the memories' stored vectors, user by user under
        each user's lock; with the progress line unless ``quiet``."""
        index, collections = self._index, self._vector_collections
        if index is None or collections is None:
            return
        collection = await self._ready()
        every = await self._read_call("reading the keyword index", index.every_stats)
        if keys is None:
            keys = sorted(every, key=lambda k: (k.app, k.user))

        async def build(key: UserKey) -> int:
            stats = await self._read_call("reading", index.stats, key)
            if stats is None or stats.dirty or not stats.version:
                return 0  # a marked index: the user's next write rebuilds both
            vectors, _ = await self._read_call("indexing", searchable_records, collection, key, False)
            await self._call("indexing", collections.rebuild, key, vectors, stats.version)
            self._vector_versions[key] = stats.version
            return stats.active

        total = sum(every[key].active for key in keys if key in every)
        await self._each_user(keys, total, build, quiet=quiet)

    async def _empty_user_vectors(self) -> None:
        """After every stored vector was marked stale: each user's vector collection
        built again, so empty, at their index's version (re-embedding then fills it
        write by write)."""
        collections = self._vector_collections
        if collections is None:
            return
        await self._call("forgetting the old vectors", collections.drop_all)
        self._vector_versions.clear()
        await self._build_vector_collections(quiet=True)

    async def _record_count(self, key: UserKey) -> int:
        """The user's records, tombstones included."""
        return len(await self.record_ids(user_filter(key, active=False)))

    async def _tag_searchable(self, key: UserKey) -> None:
        """Set ``DENSE_KEY`` on exactly the user's active records with a real
        embedding (records written before it existed have none)."""
        collection = await self._ready()
        tag = dense_tag(key.app, key.user)
        wrong = {"$or": [{"deleted_at_us": {"$ne": 0}}, {"has_embedding": False}]}
        untag = await self.record_ids({"$and": [{DENSE_KEY: tag}, wrong]})
        searchable = await self.record_ids(user_filter(key, active=True, embedded=True))
        for ids, value in ((untag, None), (searchable, tag)):
            for batch in chunks(ids, PAGE_SIZE):
                metas = [{DENSE_KEY: value}] * len(batch)
                await self._call("indexing", collection.update, ids=list(batch), metadatas=metas)

    async def keyword_candidates(self, key: UserKey, query: str) -> builtins.list[Entry]:
        return await self.list(key)

    async def indexed_keyword_candidates(
        self, key: UserKey, space: str, terms: Sequence[str], planner: KeywordPlanner | None = None
    ) -> tuple[builtins.list[Entry], KeywordStats | None]:
        """The active memories holding one of ``terms`` (with a ``planner``, its
        best-ranked ones: search/candidates.py) and the user's statistics; every
        active memory and no statistics while the index is not to be trusted."""
        with self._background.searches.search():  # background reads wait for it
            return await self._keyword_candidates(key, space, terms, planner)

    async def _keyword_candidates(
        self, key: UserKey, space: str, terms: Sequence[str], planner: KeywordPlanner | None
    ) -> tuple[builtins.list[Entry], KeywordStats | None]:
        index = self._index
        if not self._index_ready or index is None:
            return await self.list(key), None
        terms = list(dict.fromkeys(terms))
        stats, names, postings = await self._read_call("searching", index.read, key, terms)
        if stats is not None and stats.dirty:
            return await self.list(key), None
        # Clean statistics, checked unchanged over the read: the nearest memories'
        # ask of the same search (after the query's embedding) needs no other.
        share(self._stats_read(key), stats)
        version = stats.version if stats is not None else ""
        newest_first = self._newest_first(index, key, stats)
        # In a worker thread: cutting a tie at the limit may read the tied holders' times.
        ids, found = await self._read_call(
            "searching", lambda: ranker(stats, names, postings).lookup(space, terms, planner, newest_first)
        )
        entries = await self._active_entries(key, version, [record_id(key, mid) for mid in ids])
        return entries, found

    def _newest_first(
        self, index: ChromaKeywordIndex, key: UserKey, stats: UserStats | None
    ) -> Callable[[builtins.list[str]], dict[str, NewestFirst] | None]:
        """``Entry.newest_first`` of memory IDs at the version of ``stats``: from the
        records this process keeps at it (up to ``ENTRIES_KEPT_UP_TO`` memories,
        after the read of the user's vectors or the process's own writes), else
        from the index's times (backends/_chroma_times.py; blocking: called in a
        worker thread); None when neither knows them (an index of an older
        layout): a tie at the keyword limit is then cut by ID, and the engine
        reads the ones left out if they could matter."""
        version = stats.version if stats is not None else ""
        kept = self._entries.at(key, version) if version else {}

        def newest_first(ids: builtins.list[str]) -> dict[str, NewestFirst] | None:
            found = {}
            for memory_id in ids:
                entry = kept.get(record_id(key, memory_id))
                if entry is None:
                    return index.times(key, stats, ids) if stats is not None else None
                found[memory_id] = entry.newest_first
            return found

        return newest_first

    async def _active_entries(
        self, key: UserKey, version: str | None, ids: Sequence[str]
    ) -> builtins.list[Entry]:
        """The user's active memories of the record ``ids``, in that order: from the
        cache at ``version`` (None: the index cannot vouch for it), the rest read."""
        cached = self._entries.at(key, version) if version is not None else {}
        # Taken before the read: a write section of this process may carry the cache
        # to its next version meanwhile, and what is read then must not join it.
        known = {rid: cached[rid] for rid in ids if rid in cached}
        missing = [rid for rid in ids if rid not in known]
        if missing:
            collection = await self._ready()

            def fetch() -> builtins.list[tuple[str, Entry]]:
                read: builtins.list[tuple[str, Entry]] = []
                for batch in chunks(missing, PAGE_SIZE):
                    page = collection.get(ids=list(batch), include=["documents", "metadatas"])
                    for rid, document, meta in zip(
                        page["ids"], page["documents"], page["metadatas"], strict=True
                    ):
                        if meta and meta.get("app_name") == key.app and meta.get("user_id") == key.user:
                            read.append((rid, record_entry(document, meta)))
                return read

            read = dict(await self._read_call("reading", fetch))
            if version is not None:
                self._entries.keep(key, version, read)  # only while the user is still at it
            known.update(read)
        return [entry for rid in ids if (entry := known.get(rid)) is not None and not entry.is_deleted]

    async def _newest(self, key: UserKey, limit: int) -> builtins.list[Entry] | None:
        """The user's ``limit`` newest active memories, from the index's list of them
        (backends/_chroma_newest.py): the statistics record and those memories; None
        when the list cannot answer (the caller then reads every record)."""
        stats = await self._user_stats(key)
        # Whoever lists a user's newest memories (the chat's preload, the TUI's
        # memory panel) is about to search them: read their vectors now, in the
        # background, rather than beside the first searches (at 10k memories the
        # searches during that read took 100–300 ms against 30–40 after it).
        # Past ``ENTRIES_KEPT_UP_TO`` memories, their commonest terms instead.
        if stats is not None:
            self._warm_postings(key, stats)
        if (
            stats is not None
            and stats.version
            and not self._matrices.known(key)
            and not await self._ranked_by_own_collection(key, stats.active, stats.version)
        ):
            self._matrices.read_later(key, self._user_vectors)
        listed = stats.newest if stats is not None else None
        if stats is None or listed is None or not newest_list.readable(listed, stats.active, limit):
            return None
        items = builtins.list(listed[:limit])
        entries = await self._active_entries(key, stats.version, [record_id(key, item[2]) for item in items])
        # A write between the two reads: only what the list names, as it names it, is an answer.
        if [newest_list.item_of(entry) for entry in entries] != items:
            return None
        return entries

    async def memories_in_periods(
        self, key: UserKey, periods: Sequence[tuple[datetime, datetime]], limit: int
    ) -> builtins.list[Entry] | None:
        """The user's active memories in ``periods``: a metadata filter on their
        event time (Chroma's own index of it), then their records."""
        if not periods:
            return []
        ranges: builtins.list[dict[str, Any]] = [
            {
                "$and": [
                    {"event_time_us": {"$gte": to_micros(start)}},
                    {"event_time_us": {"$lt": to_micros(end)}},
                ]
            }
            for start, end in periods
        ]
        when = ranges[0] if len(ranges) == 1 else {"$or": ranges}
        where = user_filter(key, active=True)
        where["$and"] += [{"has_event_time": True}, when]
        ids = await self.record_ids(where)
        if len(ids) > limit:
            return None
        stats = await self._user_stats(key)
        return await self._active_entries(key, stats.version if stats is not None else None, ids)

    # -- nearest neighbours ----------------------------------------------------

    async def count(self, key: UserKey, *, include_deleted: bool = False) -> int:
        if not include_deleted:
            stats = await self._user_stats(key)
            if stats is not None:  # one record read; counting reads every record's ID
                return stats.active
        return len(await self.record_ids(user_filter(key, active=not include_deleted)))

    async def vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> builtins.list[Entry]:
        """Up to ``k`` of the user's active memories nearest to ``vector``,
        best first, ``score`` = cosine similarity: exact from the matrix this
        process keeps while it is at the user's index version
        (backends/_chroma_matrix.py; none past ``ENTRIES_KEPT_UP_TO`` memories),
        else from Chroma's HNSW index of the user's own vector collection
        (backends/_chroma_user_vectors.py), else from the memories collection's
        HNSW index filtered to the user."""
        if k <= 0:
            return []
        with self._background.searches.search():  # background reads wait for it
            return await self._vector_candidates(key, vector, k)

    async def _vector_candidates(self, key: UserKey, vector: Sequence[float], k: int) -> builtins.list[Entry]:
        query = self.check_vector(vector)
        collection = await self._ready()
        wanted = max(k * OVERFETCH, k)

        # The statistics: shared with the search's keyword read, and what says
        # whether the kept matrix or the user's vector collection is current.
        stats = await self._user_stats(key)
        version = stats.version if stats is not None else ""
        matrix = self._matrices.at(key, version) if self._matrices.known(key) else None
        if matrix is not None:
            scores = await matrix.reaching_soon(check_query(query, self.dimension), k)
            return await self._nearest(key, stats, scores, k)
        collections = self._vector_collections
        if collections is not None and version and await self._vectors_at(key, version):
            # The user's own collection: no filter to resolve (7 ms against 330 for a
            # user of 100k memories), and every vector in it is a candidate.
            scores = await self._read_call("searching", collections.query, key, query, wanted)
        else:
            found = await self._read_call(
                "searching",
                collection.query,
                query_embeddings=[query],
                n_results=wanted,
                where=dense_filter(key),
                include=["distances"],
            )
            scores = {
                rid: 1.0 - float(d) for rid, d in zip(found["ids"][0], found["distances"][0], strict=True)
            }
        if stats is not None and version and await self._ranked_by_own_collection(key, stats.active, version):
            self._matrices.drop(key)  # one kept from before (another version): never used again
        elif version:
            self._matrices.read_later(key, self._user_vectors)  # the next searches rank it
        # HNSW search is approximate (filtered, all the more): it was asked for more
        # than k; if it still returned fewer than the user has, rank the user's vectors exactly.
        if len(scores) < wanted:  # the filter starved the search
            active = stats.active if stats is not None else await self.count(key)
            if len(scores) < active:
                return (await self._exact_candidates(collection, key, query))[:k]
        if len(scores) > k:  # only the k nearest (and any tied with the k-th) are read
            kth = sorted(scores.values(), reverse=True)[k - 1]
            scores = {rid: score for rid, score in scores.items() if score >= kth}
        return await self._nearest(key, stats, scores, k)

    async def _nearest(
        self, key: UserKey, stats: UserStats | None, scores: dict[str, float], k: int
    ) -> builtins.list[Entry]:
        """The entries of ``scores`` (record ID → cosine), best first, ties by memory ID."""
        entries = await self._active_entries(key, stats.version if stats else None, list(scores))
        ranked = [entry.with_score(scores[record_id(key, entry.id)]) for entry in entries]
        return sorted(ranked, key=lambda e: (-e.score, e.id))[:k]

    def _warm_postings(self, key: UserKey, stats: UserStats) -> None:
        """For a user past ``ENTRIES_KEPT_UP_TO`` memories, read the shards of their
        commonest terms in the background, once per version
        (``ChromaKeywordIndex.warm``): at 100k memories their first reads at a
        version were most of a keyword search's time.

        Started by a listing (the chat's preload, the TUI's memory panel), which
        comes before the searches, not by a search: beside the searches of a new
        process the read slowed them (100k memories, keyword p95 60–72 → 86–90 ms,
        semantic 57–67 → 98 ms), while after a listing the keyword p95 fell in five
        paired runs, 61–81 → 49–66 ms (benchmarks/README.md, twentieth session). A smaller
        user's searches read few shards (their vectors and records are read then
        instead)."""
        index, name = self._index, ("postings", key)
        if index is None or stats.active <= ENTRIES_KEPT_UP_TO or stats.dirty or not stats.version:
            return
        if self._background.running(name) or (user := index.shards.to_warm(key, stats.version)) is None:
            return

        async def warm(stopped: threading.Event) -> None:
            pause = functools.partial(self._background.searches.pause, stopped)
            await self._read_call("reading the keyword index", index.warm, key, stats, user, stopped, pause)

        self._background.start(name, warm)

    async def _ranked_by_own_collection(self, key: UserKey, active: int, version: str) -> bool:
        """Whether the user's searches ask their own vector collection and keep no
        matrix: past ``ENTRIES_KEPT_UP_TO`` memories (``active``), while that
        collection is at ``version``."""
        return active > ENTRIES_KEPT_UP_TO and await self._vectors_at(key, version)

    async def _user_vectors(self, key: UserKey) -> tuple[str, dict[str, Sequence[float]], str] | None:
        """(index version, record ID → vector of every active embedded record, version
        after the read): the background read of backends/_chroma_matrix.py; None for
        a user whose own vector collection answers their searches
        (``_ranked_by_own_collection``).

        Up to ``ENTRIES_KEPT_UP_TO`` memories it reads their records in the same
        request and keeps them at that version (if no write came between), so the
        searches after it read no memory from the server: at 10k memories a search
        read its 300 keyword candidates and 100 nearest, 20–50 ms of a hybrid
        search's 60. In the same request, not after it: a second read of the
        records (0.7 s of the server's time at 10k) slowed the searches beside it
        for seconds, one request for a second and a half."""
        before = await self._user_stats(key)
        if before is None or not before.version:
            return None
        if await self._ranked_by_own_collection(key, before.active, before.version):
            return None  # their own collection answers their searches: nothing to keep
        collection = await self._ready()
        whole = before.active <= ENTRIES_KEPT_UP_TO
        stopped = threading.Event()
        loop = asyncio.get_running_loop()

        def page_read(entries: dict[str, Entry]) -> None:
            # Each page's records join the cache at once (on the loop, which owns it):
            # the searches beside the read find a growing share of theirs there
            # instead of asking the server for them too.
            # RuntimeError: the loop closed (a command ended), nothing to keep them for.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._entries.fill, key, before.version, entries)

        try:
            # Between its pages it yields to the store's searches (``SearchActivity``).
            pause = functools.partial(self._background.searches.pause, stopped)
            vectors, entries = await self._read_call(
                "reading the vectors",
                searchable_records,
                collection,
                key,
                whole,
                stopped,
                pause,
                page_read if whole else None,
            )
        except asyncio.CancelledError:
            # The store is closing (BackgroundReads.close): the worker thread stops after
            # the page it is reading, so a short-lived command does not wait at its exit
            # for the rest of a large user's vectors.
            stopped.set()
            raise
        after = await self._user_stats(key)
        version = after.version if after is not None else ""
        if whole and version == before.version:
            self._entries.fill(key, version, entries)
        return before.version, vectors, version

    async def _exact_candidates(
        self, collection: Any, key: UserKey, query: Sequence[float]
    ) -> builtins.list[Entry]:
        import numpy as np

        records = await self._read_call(
            "searching",
            collection.get,
            where=user_filter(key, active=True, embedded=True),
            include=["documents", "metadatas", "embeddings"],
        )
        if not records["ids"]:
            return []
        matrix = np.asarray(records["embeddings"], dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
        scores = matrix_times_vector(matrix, q) / np.where(norms == 0, 1.0, norms)
        entries = [
            record_entry(document, meta).with_score(float(score))
            for document, meta, score in zip(records["documents"], records["metadatas"], scores, strict=True)
        ]
        return sorted(entries, key=lambda e: (-e.score, e.id))


def searchable_records(
    collection: Any,
    key: UserKey,
    whole: bool,
    stopped: threading.Event | None = None,
    pause: Callable[[], None] | None = None,
    page_read: Callable[[dict[str, Entry]], None] | None = None,
) -> tuple[dict[str, Sequence[float]], dict[str, Entry]]:
    """(record ID → vector, and with ``whole`` record ID → entry) of the user's
    active memories with a real embedding, read a page at a time until done or
    ``stopped`` (the store is closing: the rest is not needed).

    A page at a time: Chroma's client parses a response in calls that hold the
    GIL, and one response of 10k vectors (40 MB of JSON) held it for a second,
    stopping the event loop (a search, the TUI) meanwhile. A page holds it for
    a few tens of ms. The pages are read by ID (``pages``): 1.1 s at 10k, against
    2.4 s by offset."""
    include = ["embeddings", "documents", "metadatas"] if whole else ["embeddings"]
    vectors: dict[str, Sequence[float]] = {}
    entries: dict[str, Entry] = {}
    for found in pages(collection, dense_filter(key), include, VECTOR_PAGE_SIZE, stopped, pause):
        ids = found["ids"]
        vectors.update(zip(ids, found["embeddings"], strict=True))
        if whole:
            records = zip(ids, found["documents"], found["metadatas"], strict=True)
            page = {rid: record_entry(document, meta) for rid, document, meta in records}
            entries.update(page)
            if page_read is not None:
                page_read(page)
    return vectors, entries
