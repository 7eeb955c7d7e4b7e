"""The Chroma store's inverted index for keyword search (memchat/engine/search/index.py).

Chroma filters records but cannot rank or count them, so the index lives in a
second collection beside the memories, ``memchat-index-<the memories
collection's ID>`` (a memories collection deleted and made again starts a fresh
index), one record per (user, term) and one per user:

* a term record (``kind`` "term"): app, user, term and ``postings``, JSON
  {memory ID: [content tf, topic tf, content length, topic length]} for each of
  the user's active memories holding the term;
* a statistics record (``kind`` "stats"): the active count, the four length
  sums, ``records`` (all the user's records, tombstones too: opening compares
  their sum with the collection's count, one cheap request), ``version`` (a
  new random token with every write: what the store's entry cache is checked
  against) and an ``open_<token>`` key per write section under way.

Chroma has no transactions. A write section (``ChromaStore._apply``, under the
user's lock) marks the statistics with its own ``open_<token>`` key while it
reads the statistics and the terms it changes (a mark merges into the record,
so an earlier section's mark stays beside it), writes the memories, then the
changed term records and the statistics without its mark. A section that fails
half-way leaves its mark: that user's searches scan every memory, as before the
index existed, until the user's next write rebuilds the index (which removes
every mark). Each record's embedding is a placeholder ([1.0]: a collection
needs one).

A search reads the statistics and the query terms' records in one request and
ranks the holders in numpy with the in-memory store's code
(backends/_keyword_index.py), so the candidates are what every store returns.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memchat.engine.model import Entry, UserKey
from memchat.engine.search.index import INDEX_VERSION, IndexRecord, index_record

from ._chroma_records import chunks
from ._keyword_index import Posting, UserKeywordIndex

__all__ = [
    "EMPTY",
    "INDEX_META",
    "ChromaKeywordIndex",
    "IndexPlan",
    "UserStats",
    "index_collection_name",
    "index_version",
    "new_token",
    "ranker",
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


def new_token() -> str:
    """A write section's mark (and a version): random, so no two sections share one."""
    return uuid.uuid4().hex


def index_collection_name(collection_id: Any) -> str:
    return f"memchat-index-{collection_id}"


def record_of(entry: Entry | None) -> IndexRecord | None:
    """What an entry adds to the index: nothing unless it is active."""
    if entry is None or entry.is_deleted:
        return None
    return index_record(entry.memory)


def _id(key: UserKey, name: str) -> str:
    return hashlib.sha256(f"{key.app}\0{key.user}\0{name}".encode()).hexdigest()


def _stats_id(key: UserKey) -> str:
    # "\0" cannot start a term: the statistics never share an ID with one.
    return _id(key, "\0stats")


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

    @classmethod
    def of(cls, meta: dict[str, Any]) -> UserStats:
        return cls(
            active=int(meta.get("active") or 0),
            lengths=tuple(int(meta.get(name) or 0) for name in _LENGTHS),  # type: ignore[arg-type]
            version=str(meta.get("version") or ""),
            records=int(meta.get("records") or 0),
            marks=frozenset(k for k, v in meta.items() if k.startswith(_MARK) and v),
            complete="active" in meta,
        )

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
    #: The changed terms' postings after the section.
    postings: dict[str, dict[str, Posting]] = field(default_factory=dict)
    active: int = 0
    records: int = 0
    lengths: list[int] = field(default_factory=lambda: [0, 0, 0, 0])

    #: An earlier section did not finish: rebuild the index from the memories instead.
    rebuild: bool = False


class ChromaKeywordIndex:
    """The index collection's reads and writes (blocking: run them in a worker thread)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    # -- reads ---------------------------------------------------------------

    def read(
        self, key: UserKey, terms: Sequence[str]
    ) -> tuple[UserStats | None, dict[str, dict[str, Posting]]]:
        """The user's statistics (None: none recorded) and the postings of ``terms``."""
        ids = [_stats_id(key), *(_id(key, term) for term in terms)]
        found = self.collection.get(ids=ids, include=["metadatas"])
        by_id = dict(zip(found["ids"], found["metadatas"] or [], strict=True))
        meta = by_id.get(ids[0])
        stats = UserStats.of(meta) if meta is not None else None
        postings: dict[str, dict[str, Posting]] = {}
        for term, rid in zip(terms, ids[1:], strict=True):
            record = by_id.get(rid)
            if record is not None:
                # The counts stay JSON lists: the ranking reads them as rows of an array.
                held: dict[str, Posting] = json.loads(record.get("postings") or "{}")
                if held:
                    postings[term] = held
        return stats, postings

    def stats(self, key: UserKey) -> UserStats | None:
        return self.read(key, ())[0]

    def every_stats(self) -> dict[UserKey, UserStats]:
        """Every user's statistics record (what opening checks against the memories)."""
        found: dict[UserKey, UserStats] = {}
        offset = 0
        while True:
            page = self.collection.get(
                where={"kind": "stats"}, include=["metadatas"], limit=_BATCH, offset=offset
            )
            for meta in page["metadatas"] or []:
                found[UserKey(str(meta["app_name"]), str(meta["user_id"]))] = UserStats.of(meta)
            if len(page["ids"]) < _BATCH:
                return found
            offset += _BATCH

    # -- writes --------------------------------------------------------------

    def prepare(
        self,
        key: UserKey,
        changes: Iterable[tuple[str, IndexRecord | None, IndexRecord | None]],
        token: str,
        added: int,
    ) -> IndexPlan:
        """Read what ``changes`` (memory ID, its record before, after) touch and
        work out the index after them; nothing is written. ``token``: the
        section's mark, which may be written while this reads; ``added``: how
        many records the section adds (less those it removes)."""
        changes = [c for c in changes if c[1] != c[2]]
        terms = sorted({t for _, before, after in changes for r in (before, after) if r for t in r.terms})
        stats, postings = self.read(key, terms)
        if stats is not None and not stats.complete and not stats.dirty_besides(token):
            stats = None  # only this section's mark: a user without statistics yet
        plan = IndexPlan(key, stats)
        if stats is not None and stats.dirty_besides(token):
            plan.rebuild = True
            return plan
        current = stats or EMPTY
        plan.active, plan.lengths = current.active, list(current.lengths)
        plan.records = current.records + added
        plan.postings = {term: postings.get(term, {}) for term in terms}
        for memory_id, before, after in changes:
            if before is not None:
                plan.active -= 1
                plan.lengths = [a - b for a, b in zip(plan.lengths, before.lengths, strict=True)]
                for term in before.terms:
                    plan.postings[term].pop(memory_id, None)
            if after is not None:
                plan.active += 1
                plan.lengths = [a + b for a, b in zip(plan.lengths, after.lengths, strict=True)]
                for term, *counts in after.postings():
                    plan.postings[term][memory_id] = tuple(counts)  # type: ignore[assignment]
        return plan

    def mark(self, key: UserKey, token: str) -> None:
        """Before a section's writes: until its ``commit``, the index is not to be
        trusted. (Upsert merges metadata: the counts and other marks stay.)"""
        meta = {"kind": "stats", "app_name": key.app, "user_id": key.user, _MARK + token: True}
        self.collection.upsert(ids=[_stats_id(key)], embeddings=[_PLACEHOLDER], metadatas=[meta])

    def commit(self, plan: IndexPlan, token: str) -> str:
        """Write a prepared change (after the memories were written), removing the
        section's mark; the new version."""
        return self._write(plan.key, plan.postings, plan.active, plan.records, plan.lengths, {_MARK + token})

    def rebuild(self, key: UserKey, entries: Iterable[Entry], records: int) -> str:
        """Index the user's active ``entries`` afresh (its old records and every mark
        removed), the user holding ``records`` records; the new version."""
        token = new_token()
        self.mark(key, token)
        postings: dict[str, dict[str, Posting]] = {}
        active, lengths = 0, [0, 0, 0, 0]
        for entry in entries:
            record = record_of(entry)
            if record is None:
                continue
            active += 1
            lengths = [a + b for a, b in zip(lengths, record.lengths, strict=True)]
            for term, *counts in record.postings():
                postings.setdefault(term, {})[entry.id] = tuple(counts)  # type: ignore[assignment]
        found = self.collection.get(where=_user(key), include=["metadatas"])
        old = set(found["ids"])
        marks = {
            k
            for meta in found["metadatas"] or []
            if meta.get("kind") == "stats"
            for k in meta
            if k.startswith(_MARK)
        }
        stale = sorted(old - {_id(key, term) for term in postings} - {_stats_id(key)})
        for batch in chunks(stale, _BATCH):
            self.collection.delete(ids=list(batch))
        return self._write(key, postings, active, records, lengths, marks | {_MARK + token})

    @staticmethod
    def _term_meta(key: UserKey, term: str, held: dict[str, Posting]) -> dict[str, Any]:
        return {
            "kind": "term",
            "app_name": key.app,
            "user_id": key.user,
            "term": term,
            "postings": json.dumps(held, separators=(",", ":"), ensure_ascii=False),
        }

    def _write(
        self,
        key: UserKey,
        postings: dict[str, dict[str, Posting]],
        active: int,
        records: int,
        lengths: Sequence[int],
        unmark: Iterable[str],
    ) -> str:
        """Upsert the term records and then the statistics without the ``unmark``
        marks (in the last request with the last terms); the new version."""
        version = new_token()
        meta: dict[str, Any] = {
            "kind": "stats",
            "app_name": key.app,
            "user_id": key.user,
            "active": active,
            "records": records,
            **dict(zip(_LENGTHS, (int(n) for n in lengths), strict=True)),
            "version": version,
            **dict.fromkeys(unmark),  # None removes a key
        }
        ids = [*(_id(key, term) for term in postings), _stats_id(key)]
        metas = [*(self._term_meta(key, term, held) for term, held in postings.items()), meta]
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            self.collection.upsert(
                ids=batch, embeddings=[_PLACEHOLDER] * len(batch), metadatas=metas[start : start + _BATCH]
            )
        return version


def ranker(stats: UserStats | None, postings: dict[str, dict[str, Posting]]) -> UserKeywordIndex:
    """The in-memory index of one query's postings, to rank them as every store does."""
    index = UserKeywordIndex()
    current = stats or EMPTY
    index.count = current.active
    index.lengths = list(current.lengths)
    index.postings = postings
    for held in postings.values():
        for memory_id in held:
            if memory_id not in index.slots:
                index.slots[memory_id] = len(index.ids)
                index.ids.append(memory_id)
    return index


#: What else opening builds with the index: 1, the records' ``DENSE_KEY``;
#: 2, the statistics' ``records``.
LAYOUT = 2


def index_version() -> str:
    """The meta value of a collection indexed as this memchat does."""
    return f"{INDEX_VERSION}.{LAYOUT}"
