"""An in-process inverted index and statistics for keyword search (see
memchat/engine/search/index.py): what the in-memory store keeps per user."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from memchat.engine.model import Entry
from memchat.engine.search.index import IndexRecord, KeywordStats, index_record

if TYPE_CHECKING:
    from memchat.engine.search.candidates import KeywordPlanner

#: (content tf, topic tf, content length, topic length) of one posting.
Posting = tuple[int, int, int, int]


class UserKeywordIndex:
    """One user's postings (prefixed term → memory ID → counts), active count and length sums."""

    __slots__ = ("count", "lengths", "postings", "records")

    def __init__(self) -> None:
        self.postings: dict[str, dict[str, Posting]] = {}
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
                    ids.pop(memory_id, None)
                    if not ids:
                        del self.postings[term]
        if entry is None or entry.is_deleted:
            return
        record = index_record(entry.memory)
        self.records[memory_id] = record
        self.count += 1
        for i, n in enumerate(record.lengths):
            self.lengths[i] += n
        for term, *counts in record.postings():
            self.postings.setdefault(term, {})[memory_id] = tuple(counts)  # type: ignore[assignment]

    def lookup(
        self, space: str, terms: Iterable[str], planner: KeywordPlanner | None = None
    ) -> tuple[set[str] | list[str], KeywordStats]:
        """(IDs of the memories holding one of ``terms``, the space's statistics);
        with a ``planner``, only its best-ranked holders (search/candidates.py)."""
        terms = list(dict.fromkeys(terms))
        stats = KeywordStats.of(space, self.count, self.lengths)
        if planner is None:
            # Every holder of a term is a candidate: the scorer counts document frequencies itself.
            ids: set[str] = set()
            for term in terms:
                ids.update(self.postings.get(term, ()))
            return ids, stats
        lists = {term: self.postings.get(term, {}) for term in terms}
        stats = KeywordStats.of(space, self.count, self.lengths, {t: len(p) for t, p in lists.items()})
        plan = planner.plan(stats)
        held: dict[str, list[tuple[str, int, int, int, int]]] = {}
        for term, holders in lists.items():
            for memory_id, counts in holders.items():
                held.setdefault(memory_id, []).append((term, *counts))
        best, cutoff = plan.best((memory_id, plan.rank(rows)) for memory_id, rows in held.items())
        return best, replace(stats, rank_cutoff=cutoff)
