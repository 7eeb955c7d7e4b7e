"""An in-process inverted index and statistics for keyword search (see
memchat/engine/search/index.py): what the in-memory store keeps per user."""

from __future__ import annotations

from collections.abc import Iterable

from memchat.engine.model import Entry
from memchat.engine.search.index import IndexRecord, KeywordStats, index_record


class UserKeywordIndex:
    """One user's postings (prefixed term → memory IDs), active count and length sums."""

    __slots__ = ("count", "lengths", "postings", "records")

    def __init__(self) -> None:
        self.postings: dict[str, set[str]] = {}
        self.records: dict[str, IndexRecord] = {}
        self.count = 0
        self.lengths = [0, 0, 0, 0]

    def replace(self, memory_id: str, entry: Entry | None) -> None:
        """The memory is now ``entry`` (None or a tombstone: not in the index)."""
        old = self.records.pop(memory_id, None)
        if old is not None:
            self.count -= 1
            for i, n in enumerate(old.lengths):
                self.lengths[i] -= n
            for term in old.terms:
                ids = self.postings.get(term)
                if ids is not None:
                    ids.discard(memory_id)
                    if not ids:
                        del self.postings[term]
        if entry is None or entry.is_deleted:
            return
        record = index_record(entry.memory)
        self.records[memory_id] = record
        self.count += 1
        for i, n in enumerate(record.lengths):
            self.lengths[i] += n
        for term in record.terms:
            self.postings.setdefault(term, set()).add(memory_id)

    def lookup(self, space: str, terms: Iterable[str]) -> tuple[set[str], KeywordStats]:
        """(IDs of the memories holding one of ``terms``, the space's statistics)."""
        ids: set[str] = set()
        for term in terms:
            ids.update(self.postings.get(term, ()))
        # Every holder of a term is a candidate: the scorer counts document frequencies itself.
        return ids, KeywordStats.of(space, self.count, self.lengths)
