"""The Chroma store's inverted index for keyword search (memchat/engine/search/index.py).

Chroma filters records but cannot rank or count them, so the index lives in a
second collection beside the memories, ``memchat-index-<the memories
collection's ID>`` (a memories collection deleted and made again starts a fresh
index), records of the user's terms and one of statistics per user:

* term records (``kind`` "term": app, user, term and ``postings``, JSON
  {memory ID: [content tf, topic tf, content length, topic length]} for the
  user's active memories holding the term). A term's root record holds its
  postings, or, for a common term, only its ``level``: its postings are then
  split over 2 ** level shard records by a hash of the memory ID
  (backends/_chroma_shards.py), so an add rewrites about the same number of
  postings whether the user has a hundred memories or a hundred thousand (a
  single record per term made every add rewrite every holder of its terms);
* a statistics record (``kind`` "stats"): the active count, the four length
  sums, ``records`` (all the user's records, tombstones too: opening compares
  their sum with the collection's count, one cheap request), ``version`` (a
  new random token with every write: what the store's entry cache is checked
  against), the user's newest memories (``newest``: backends/_chroma_newest.py)
  and an ``open_<token>`` key per write section under way.

Chroma has no transactions. A write section (``ChromaStore._apply``, under the
user's lock) marks the statistics with its own ``open_<token>`` key while it
reads the statistics and the term records it changes (a mark merges into the
record, so an earlier section's mark stays beside it), writes the memories,
then the changed term records, removes the shards of a term it split again,
and writes the statistics without its mark. A section that fails half-way
leaves its mark: that user's searches scan every memory, as before the index
existed, until the user's next write rebuilds the index (which removes every
mark). Each record's embedding is a placeholder ([1.0]: a collection needs
one).

A search reads the statistics and the query terms' roots in one request (and
the shards of its split terms in a second) and ranks the holders in numpy with
the in-memory store's code (backends/_keyword_index.py), so the candidates are
what every store returns.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from memchat.engine.model import Entry, UserKey
from memchat.engine.search.index import INDEX_VERSION, NewestFirst, index_record

from . import _chroma_newest as newest_list
from ._chroma_postings import MAX_POSTINGS, ShardCache, Slots, UserShards
from ._chroma_records import chunks, pages
from ._chroma_shards import (
    SPLIT_AT,
    TermPostings,
    columns,
    decode,
    level_for,
    record_id,
    shard_id,
    shard_of,
)
from ._chroma_times import TIMES_TERM, TimedRecord, newest_first, times_of
from ._keyword_index import Posting, UserKeywordIndex

__all__ = [
    "EMPTY",
    "INDEX_META",
    "LAYOUT",
    "ChromaKeywordIndex",
    "IndexPlan",
    "UserStats",
    "index_collection_name",
    "index_version",
    "layout_of",
    "new_token",
    "ranker",
    "read_in_place",
    "record_of",
]

#: The store's meta entry holding the index version its index was built with.
INDEX_META = "keyword_index"
#: Index records written per request.
_BATCH = 500
_PLACEHOLDER = [1.0]
_LENGTHS = ("k_content", "k_topics", "s_content", "s_topics")
#: Prefix of the statistics' key marking a write section under way.
_MARK = "open_"
#: ``warm`` reads the shards of terms split at least this often (8 shards and more:
#: a rarer term costs a search little to read), the commonest first, ...
WARM_FROM_LEVEL = 3
#: ... until about this many postings are kept (at most: a term of level ``n`` holds
#: up to ``SPLIT_AT / 2 << n``), what the cache keeps per user.
WARM_POSTINGS = MAX_POSTINGS


def new_token() -> str:
    """A write section's mark (and a version): random, so no two sections share one."""
    return uuid.uuid4().hex


def index_collection_name(collection_id: Any) -> str:
    return f"memchat-index-{collection_id}"


def record_of(entry: Entry | None) -> TimedRecord | None:
    """What an entry adds to the index (its terms and its times): nothing unless it is active."""
    if entry is None or entry.is_deleted:
        return None
    return TimedRecord(index_record(entry.memory), times_of(entry))


def _stats_id(key: UserKey) -> str:
    # "\0" cannot start a term: the statistics never share an ID with one.
    return record_id(key, "\0stats")


def _stats_in(found: dict[str, dict[str, Any]], key: UserKey) -> UserStats | None:
    """The user's statistics among records read by ID (None: not there): what a
    read checks again after its other requests, to know no write came between."""
    meta = found.get(_stats_id(key))
    return UserStats.of(meta) if meta is not None else None


def _user(key: UserKey) -> dict[str, Any]:
    return {"$and": [{"app_name": key.app}, {"user_id": key.user}]}


@dataclass(frozen=True, slots=True)
class UserStats:
    """One user's statistics record."""

    active: int
    lengths: tuple[int, int, int, int]
    #: Changes with every write of the user (the entry cache's check).
    version: str
    #: The user's records in the memories collection, tombstones included.
    records: int = 0
    #: The marks of write sections under way or that did not finish.
    marks: frozenset[str] = frozenset()
    #: Written by a finished section or build (a record holding only marks is not).
    complete: bool = True
    #: The user's newest active memories as stored (backends/_chroma_newest.py;
    #: None: not kept); decoded only by what reads them (``newest``).
    newest_text: str | None = None

    @classmethod
    def of(cls, meta: dict[str, Any]) -> UserStats:
        version = str(meta.get("version") or "")
        return cls(
            active=int(meta.get("active") or 0),
            lengths=tuple(int(meta.get(name) or 0) for name in _LENGTHS),  # type: ignore[arg-type]
            version=version,
            records=int(meta.get("records") or 0),
            marks=frozenset(k for k, v in meta.items() if k.startswith(_MARK) and v),
            complete="active" in meta,
            # Written with another version: a writer that does not keep the list wrote since.
            newest_text=newest
            if isinstance(newest := meta.get("newest"), str)
            and version
            and meta.get("newest_version") == version
            else None,
        )

    @property
    def newest(self) -> tuple[newest_list.Item, ...] | None:
        return newest_list.decode(self.newest_text)

    @property
    def dirty(self) -> bool:
        """A write section did not finish (or is under way): the postings cannot be trusted."""
        return bool(self.marks) or not self.complete

    def dirty_besides(self, token: str) -> bool:
        """Dirty but for the section ``token``'s own mark (its record may hold only that)."""
        others = self.marks - {_MARK + token}
        return bool(others) or (not self.complete and not self.marks)


EMPTY = UserStats(0, (0, 0, 0, 0), "")


@dataclass(slots=True)
class IndexPlan:
    """A section's change to one user's index, worked out before its writes."""

    key: UserKey
    #: The statistics before the section (None: the user had none).
    before: UserStats | None
    #: The term records to write: record ID → metadata.
    writes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The shards of terms split again, to remove (after ``writes``).
    dropped: list[str] = field(default_factory=list)
    active: int = 0
    records: int = 0
    lengths: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    #: The user's newest memories after the section (None: not known).
    newest: list[newest_list.Item] | None = None

    #: An earlier section did not finish: rebuild the index from the memories instead.
    rebuild: bool = False


class ChromaKeywordIndex:
    """The index collection's reads and writes (blocking: run them in a worker thread)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        #: Shard records searches read, per user and version.
        self.shards = ShardCache()

    # -- reads ---------------------------------------------------------------

    def _get(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        found = self.collection.get(ids=list(ids), include=["metadatas"])
        return {rid: meta for rid, meta in zip(found["ids"], found["metadatas"] or [], strict=True) if meta}

    def _roots(self, key: UserKey, terms: Sequence[str]) -> tuple[UserStats | None, dict[str, TermPostings]]:
        """The user's statistics (None: none recorded) and the root records of ``terms``."""
        ids = [_stats_id(key), *(record_id(key, term) for term in terms)]
        by_id = self._get(ids)
        stats = _stats_in(by_id, key)
        roots = {term: TermPostings.of_root(by_id.get(rid)) for term, rid in zip(terms, ids[1:], strict=True)}
        return stats, roots

    def _load(self, key: UserKey, wanted: Iterable[tuple[str, TermPostings, int]]) -> None:
        """Read the shards ``wanted`` ((term, its postings, shard)) not read yet, in one request."""
        wanted = list(
            {(term, s): (term, held, s) for term, held, s in wanted if s not in held.shards}.values()
        )
        ids = [shard_id(key, term, held.level, s) for term, held, s in wanted]
        by_id = self._get(ids)
        for rid, (_, held, s) in zip(ids, wanted, strict=True):
            held.shards[s] = decode(by_id.get(rid))

    def read(
        self, key: UserKey, terms: Sequence[str]
    ) -> tuple[UserStats | None, Sequence[str], dict[str, Slots]]:
        """The user's statistics (None: none recorded), the user's memory IDs, and
        the postings of ``terms`` as (places among those IDs, counts) arrays (not
        read when the statistics are dirty: the caller then scans). Two requests
        at most: the statistics with the terms' roots, then the shards of the
        split terms not kept from an earlier search at this version
        (backends/_chroma_postings.py), with the statistics again."""
        ids = [_stats_id(key), *(record_id(key, term) for term in terms)]
        by_id = self._get(ids)
        stats = _stats_in(by_id, key)
        if stats is not None and stats.dirty:
            return stats, [], {}
        version = stats.version if stats is not None else ""
        user = self.shards.at(key, version)
        records: dict[str, list[str]] = {}  # term → its records holding postings
        roots: dict[str, tuple[list[str], Any]] = {}
        for term, rid in zip(terms, ids[1:], strict=True):
            root = by_id.get(rid)
            level = int((root or {}).get("level") or 0)
            if level:
                records[term] = [shard_id(key, term, level, s) for s in range(1 << level)]
            elif root is not None:
                records[term], roots[rid] = [rid], columns(root)
        placed = self.shards.place(key, user, version, roots, keep=False)
        split = [rid for held in records.values() for rid in held if rid not in roots]
        placed.update(self.shards.held(user, split) if version else {})
        missing = [rid for rid in split if rid not in placed]
        if missing:
            shards = self._get([*missing, ids[0]])
            if _stats_in(shards, key) != stats:
                # A write of the user between the two requests (a search takes no
                # lock): the shards may not match the roots, so the caller scans.
                return replace(stats or EMPTY, complete=False), [], {}
            # A shard no holder reached is not written: kept as empty, not asked for again.
            read = {rid: columns(shards.get(rid)) for rid in missing}
            placed.update(self.shards.place(key, user, version, read, keep=bool(version)))
        postings = {
            term: _joined([placed[rid] for rid in held if rid in placed]) for term, held in records.items()
        }
        return stats, user.names, {term: held for term, held in postings.items() if len(held[0])}

    def warm(
        self,
        key: UserKey,
        stats: UserStats,
        user: UserShards,
        stopped: threading.Event,
        pause: Callable[[], None] | None = None,
    ) -> int:
        """Read the shards of the user's commonest terms at ``stats``' version into
        ``user`` (what ``shards.to_warm`` gave for that version), unless read
        there already; the postings read.

        At 100k memories a question's common terms are hundreds to 1,500 shard
        records, and their first read at a version was most of a hybrid search's
        time (76–170 ms). A listing of a large user (backends/_chroma_search.py,
        ``_warm_postings``) starts this in the background, so the searches after
        it read only their rarer terms. It stops at a write of the user (the
        version moved on: what it read then may not match), or when ``stopped``
        is set."""
        wanted: list[str] = []
        budget = WARM_POSTINGS
        for term, level in self._split_terms(key):
            holders = (SPLIT_AT // 2) << level  # about as many (level_for)
            if holders > budget:
                continue
            budget -= holders
            wanted += [shard_id(key, term, level, s) for s in range(1 << level)]
        stats_id, read = _stats_id(key), 0
        for batch in chunks(wanted, _BATCH):
            if pause is not None:
                pause()  # yield to the store's searches (backends/_chroma_background.py)
            if stopped.is_set():
                break
            held = self.shards.held(user, batch)
            missing = [rid for rid in batch if rid not in held]
            if not missing:
                continue
            found = self._get([*missing, stats_id])
            if _stats_in(found, key) != stats:
                break  # a write of the user since the statistics were read
            placed = self.shards.place(
                key, user, stats.version, {rid: columns(found.get(rid)) for rid in missing}, keep=True
            )
            read += sum(len(places) for places, _ in placed.values())
        return read

    def times(self, key: UserKey, stats: UserStats, ids: Sequence[str]) -> dict[str, NewestFirst] | None:
        """``Entry.newest_first`` of the user's active memories ``ids`` from the
        postings of ``TIMES_TERM`` (backends/_chroma_times.py) at ``stats``' version,
        reading only the shards holding them that no search read at that version;
        None when one is not there (an index of layout 6 and before holds no
        times) or a write of the user came between."""
        version, stats_id = stats.version, _stats_id(key)
        if not version:
            return None
        user = self.shards.at(key, version)
        root_id = record_id(key, TIMES_TERM)
        level = self.shards.level(user, root_id)
        if level is None:
            found = self._get([root_id, stats_id])
            if _stats_in(found, key) != stats:
                return None  # a write of the user since the statistics were read
            root = found.get(root_id)
            if root is None:
                return None
            level = int(root.get("level") or 0)
            read = {} if level else {root_id: columns(root)}
            self.shards.place(key, user, version, read, keep=True, levels={root_id: level})
        numbers = {shard_of(mid, level) for mid in ids} if level else set()
        wanted = [shard_id(key, TIMES_TERM, level, n) for n in sorted(numbers)] if level else [root_id]
        held = self.shards.held(user, wanted)
        missing = [rid for rid in wanted if rid not in held]
        if missing:
            found = self._get([*missing, stats_id])
            if _stats_in(found, key) != stats:
                return None
            read = {rid: columns(found.get(rid)) for rid in missing}
            held.update(self.shards.place(key, user, version, read, keep=True))
        # The asked holders' rows, found among the shards' by place (hundreds of
        # shards of about 30 postings: a loop over them all cost several ms).
        places, counts = _joined(list(held.values()))
        asked = list(dict.fromkeys(ids))
        wanted_places = np.fromiter(
            (user.places.get(mid, -1) for mid in asked), dtype=np.int64, count=len(asked)
        )
        order = np.argsort(places, kind="stable")
        at = np.minimum(np.searchsorted(places, wanted_places, sorter=order), max(len(places) - 1, 0))
        if not len(places) or not np.array_equal(places[order[at]], wanted_places):
            return None  # one is not held (an older layout's index, or a removed memory)
        return newest_first(asked, counts[order[at]])

    def _split_terms(self, key: UserKey) -> list[tuple[str, int]]:
        """(term, level) of the user's terms split at least ``WARM_FROM_LEVEL``
        times, the times' term first, then the commonest first (their roots, a page
        at a time)."""
        where = {"$and": [*_user(key)["$and"], {"kind": "term"}, {"level": {"$gte": WARM_FROM_LEVEL}}]}
        found: list[tuple[str, int]] = []
        for page in pages(self.collection, where, ["metadatas"], _BATCH):
            found += [(str(meta["term"]), int(meta["level"])) for meta in page["metadatas"] or [] if meta]
        # The times' term first: a tie at the keyword limit reads them, whatever the words.
        return sorted(found, key=lambda item: (item[0] != TIMES_TERM, -item[1], item[0]))

    def stats(self, key: UserKey) -> UserStats | None:
        return self._roots(key, ())[0]

    def every_stats(self) -> dict[UserKey, UserStats]:
        """Every user's statistics record (what opening checks against the memories)."""
        found: dict[UserKey, UserStats] = {}
        for page in pages(self.collection, {"kind": "stats"}, ["metadatas"], _BATCH):
            for meta in page["metadatas"] or []:
                if meta:
                    found[UserKey(str(meta["app_name"]), str(meta["user_id"]))] = UserStats.of(meta)
        return found

    def _user_records(self, key: UserKey) -> tuple[list[str], list[dict[str, Any]]]:
        """The IDs and metadata of every index record of the user, a page at a time: in
        one request, a user with 100k memories (tens of thousands of records) made the
        server fail with "too many SQL variables"."""
        ids: list[str] = []
        metadatas: list[dict[str, Any]] = []
        for page in pages(self.collection, _user(key), ["metadatas"], _BATCH):
            ids += page["ids"]
            metadatas += [dict(meta or {}) for meta in page["metadatas"] or [{}] * len(page["ids"])]
        return ids, metadatas

    # -- writes --------------------------------------------------------------

    def prepare(
        self,
        key: UserKey,
        changes: Iterable[tuple[str, TimedRecord | None, TimedRecord | None]],
        token: str,
        added: int,
        written: Sequence[tuple[str, Entry | None]] = (),
    ) -> IndexPlan:
        """Read what ``changes`` (memory ID, its record before, after) touch and
        work out the index after them; nothing is written. ``token``: the
        section's mark, which may be written while this reads; ``added``: how
        many records the section adds (less those it removes); ``written``:
        every memory the section writes (ID → entry, None: removed)."""
        changes = [c for c in changes if c[1] != c[2]]
        terms = sorted({t for _, before, after in changes for r in (before, after) if r for t in r.terms})
        stats, roots = self._roots(key, terms)
        if stats is not None and not stats.complete and not stats.dirty_besides(token):
            stats = None  # only this section's mark: a user without statistics yet
        plan = IndexPlan(key, stats)
        if stats is not None and stats.dirty_besides(token):
            plan.rebuild = True
            return plan
        current = stats or EMPTY
        plan.active, plan.lengths = current.active, list(current.lengths)
        plan.records = current.records + added
        listed = () if stats is None else current.newest
        if listed is not None:
            plan.newest = newest_list.updated(listed, current.active, written)
        # Only the shards holding the changed memories are read and written.
        touched = [
            (mid, term) for mid, before, after in changes for r in (before, after) if r for term in r.terms
        ]
        self._load(key, ((term, roots[term], shard_of(mid, roots[term].level)) for mid, term in touched))
        changed: dict[str, set[int]] = {term: set() for term in terms}
        for mid, term in touched:
            changed[term].add(shard_of(mid, roots[term].level))
        for memory_id, before, after in changes:
            if before is not None:
                plan.active -= 1
                plan.lengths = [a - b for a, b in zip(plan.lengths, before.lengths, strict=True)]
                for term in before.terms:
                    roots[term].shard(memory_id).pop(memory_id, None)
            if after is not None:
                plan.active += 1
                plan.lengths = [a + b for a, b in zip(plan.lengths, after.lengths, strict=True)]
                for term, *counts in after.postings():
                    roots[term].shard(memory_id)[memory_id] = tuple(counts)  # type: ignore[assignment]
        full = [term for term in terms if roots[term].overflows(changed[term])]
        self._load(key, ((term, roots[term], s) for term in full for s in roots[term].missing()))
        for term in terms:
            held = roots[term]
            if term in full:  # split (again): every shard read, written at the new level
                if held.level:
                    plan.dropped += [shard_id(key, term, held.level, s) for s in held.shards]
                merged = held.merged()
                held = TermPostings.split(merged, level_for(len(merged), held.level + 1))
                plan.writes.update(held.records(key, term))
            else:
                plan.writes.update(held.records(key, term, changed[term]))
        return plan

    def add_times(self, key: UserKey, entries: Iterable[Entry]) -> int:
        """Write the times' postings (backends/_chroma_times.py) of the user's active
        ``entries`` into an index of an older layout, which has none (under the
        user's lock); their number. The version stays: no posting a search
        ranks changes."""
        held: dict[str, Posting] = {e.id: times_of(e) for e in entries if not e.is_deleted}
        if held:
            records = TermPostings.split(held, level_for(len(held))).records(key, TIMES_TERM)
            for batch in chunks(list(records), _BATCH):
                self._upsert(batch)
        self.shards.drop(key)
        return len(held)

    def mark(self, key: UserKey, token: str) -> None:
        """Before a section's writes: until its ``commit``, the index is not to be
        trusted. (Upsert merges metadata: the counts and other marks stay.)"""
        meta = {"kind": "stats", "app_name": key.app, "user_id": key.user, _MARK + token: True}
        self.collection.upsert(ids=[_stats_id(key)], embeddings=[_PLACEHOLDER], metadatas=[meta])

    def commit(self, plan: IndexPlan, token: str, version: str | None = None) -> str:
        """Write a prepared change (after the memories were written), removing the
        section's mark; the new version (``version`` when given)."""
        try:
            version = self._write(
                plan.key,
                plan.writes,
                plan.dropped,
                plan.active,
                plan.records,
                plan.lengths,
                {_MARK + token},
                plan.newest,
                version,
            )
        except BaseException:
            self.shards.drop(plan.key)
            raise
        before = plan.before.version if plan.before is not None else ""
        self.shards.advance(plan.key, before, version, [*plan.writes, *plan.dropped])
        return version

    def rebuild(
        self, key: UserKey, entries: Iterable[Entry], records: int, version: str | None = None
    ) -> str:
        """Index the user's active ``entries`` afresh (its old records and every mark
        removed), the user holding ``records`` records; the new version (``version``
        when given)."""
        self.shards.drop(key)
        token = new_token()
        self.mark(key, token)
        postings: dict[str, dict[str, Posting]] = {}
        active, lengths = 0, [0, 0, 0, 0]
        entries = list(entries)
        for entry in entries:
            record = record_of(entry)
            if record is None:
                continue
            active += 1
            lengths = [a + b for a, b in zip(lengths, record.lengths, strict=True)]
            for term, *counts in record.postings():
                postings.setdefault(term, {})[entry.id] = tuple(counts)  # type: ignore[assignment]
        writes: dict[str, dict[str, Any]] = {}
        for term, held in postings.items():
            writes.update(TermPostings.split(held, level_for(len(held))).records(key, term))
        ids, metadatas = self._user_records(key)
        old = set(ids)
        marks = {k for meta in metadatas if meta.get("kind") == "stats" for k in meta if k.startswith(_MARK)}
        stale = sorted(old - writes.keys() - {_stats_id(key)})
        for batch in chunks(stale, _BATCH):
            self.collection.delete(ids=list(batch))
        return self._write(
            key,
            writes,
            [],
            active,
            records,
            lengths,
            marks | {_MARK + token},
            newest_list.of_entries(entries),
            version,
        )

    def _write(
        self,
        key: UserKey,
        writes: dict[str, dict[str, Any]],
        dropped: Sequence[str],
        active: int,
        records: int,
        lengths: Sequence[int],
        unmark: Iterable[str],
        listed: Sequence[newest_list.Item] | None,
        version: str | None = None,
    ) -> str:
        """Upsert the term records, remove the ``dropped`` ones, and then write the
        statistics without the ``unmark`` marks (with the last terms when nothing
        is removed), and ``listed`` as the newest memories (None: not known); the
        new version: ``version``, or a new token. (A section gives its own, known
        before the write, so the user's vector collection can be written at it:
        backends/_chroma_user_vectors.py.)"""
        version = version or new_token()
        meta: dict[str, Any] = {
            "kind": "stats",
            "app_name": key.app,
            "user_id": key.user,
            "active": active,
            "records": records,
            **dict(zip(_LENGTHS, (int(n) for n in lengths), strict=True)),
            "version": version,
            "newest": newest_list.encode(listed) if listed is not None else None,
            "newest_version": version if listed is not None else None,
            **dict.fromkeys(unmark),  # None removes a key
        }
        stats = (_stats_id(key), meta)
        items = [*writes.items(), *([] if dropped else [stats])]
        for batch in chunks(items, _BATCH):
            self._upsert(batch)
        if dropped:
            for ids in chunks(dropped, _BATCH):
                self.collection.delete(ids=list(ids))
            self._upsert([stats])
        return version

    def _upsert(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.collection.upsert(
            ids=[rid for rid, _ in items],
            embeddings=[_PLACEHOLDER] * len(items),
            metadatas=[meta for _, meta in items],
        )


def _joined(parts: Sequence[Slots]) -> Slots:
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.zeros(0, dtype=np.int32), np.zeros((0, 4), dtype=np.int32)
    return np.concatenate([places for places, _ in parts]), np.concatenate([counts for _, counts in parts])


def ranker(stats: UserStats | None, names: Sequence[str], postings: dict[str, Slots]) -> UserKeywordIndex:
    """The in-memory index of one query's postings, to rank them as every store does."""
    current = stats or EMPTY
    return UserKeywordIndex.of_slots(current.active, current.lengths, names, postings)


#: What else opening builds with the index: 1, the records' ``DENSE_KEY``;
#: 2, the statistics' ``records``; 3, common terms' postings split into shards
#: (backends/_chroma_shards.py); 4, the statistics' newest memories (backends/_chroma_newest.py);
#: 5, postings as a list of IDs and an array of counts instead of one JSON object;
#: 6, a vector collection per user (backends/_chroma_user_vectors.py); 7, each
#: memory's times as the postings of one more term (backends/_chroma_times.py).
LAYOUT = 7


def index_version() -> str:
    """The meta value of a collection indexed as this memchat does."""
    return f"{INDEX_VERSION}.{LAYOUT}"


#: Layouts read as they are, without indexing again: layout 4 differs from 5
#: only in how a record holds its postings, which ``columns`` reads either way
#: (a record takes layout 5 when a write changes it). Re-indexing 100k memories
#: took over ten minutes; opening records 5 instead, so an older memchat, which
#: cannot read layout 5's records, indexes again when it opens the collection.
#: Layout 6 adds the users' vector collections to layout 5's records: opening a
#: layout 4 or 5 collection builds them (and records 6; a memchat of layout 5
#: indexes again on open, leaving collections it does not keep, whose markers
#: then match no version: ``ChromaStore._ensure_keyword_index`` builds them again).
#: Layout 7 adds the times' term to layout 6's records: opening an older one writes
#: it for each user (a memchat of layout 6, which cannot read 7, indexes again).
READ_IN_PLACE = (4, 5, 6, LAYOUT)


def layout_of(version: str | None) -> int | None:
    """The layout of a collection whose index meta is ``version`` if it is searched
    as it is (``READ_IN_PLACE``), else None."""
    for layout in READ_IN_PLACE:
        if version == f"{INDEX_VERSION}.{layout}":
            return layout
    return None


def read_in_place(version: str | None) -> bool:
    """Whether a collection whose index meta is ``version`` is searched as it is."""
    return layout_of(version) is not None
