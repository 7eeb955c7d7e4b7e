"""An in-process inverted index and statistics for keyword search (see
memchat/engine/search/index.py): what the in-memory store keeps per user."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memchat.engine.model import Entry
from memchat.engine.search.index import IndexRecord, KeywordStats, NewestFirst, index_record

if TYPE_CHECKING:
    from memchat.engine.search.candidates import KeywordPlanner

#: (content tf, topic tf, content length, topic length) of one posting.
Posting = tuple[int, int, int, int]


class UserKeywordIndex:
    """One user's postings (prefixed term → memory ID → counts), active count and
    length sums. Each memory has a slot number, and each term's postings are
    kept as arrays of slots and counts too (rebuilt on the first search after
    the term changes), so ranking a common term's holders is a few numpy passes."""

    __slots__ = ("_arrays", "count", "free", "ids", "lengths", "postings", "records", "slots")

    def __init__(self) -> None:
        self.postings: dict[str, dict[str, Posting]] = {}
        self.records: dict[str, IndexRecord] = {}
        self.count = 0
        self.lengths = [0, 0, 0, 0]
        self.slots: dict[str, int] = {}
        self.ids: list[str | None] = []
        self.free: list[int] = []
        self._arrays: dict[str, tuple[Any, Any]] = {}

    @classmethod
    def of_slots(
        cls, count: int, lengths: Sequence[int], names: Sequence[str], postings: Mapping[str, tuple[Any, Any]]
    ) -> UserKeywordIndex:
        """The index of one query's postings read from a store: term → its holders'
        places in ``names`` (the user's memory IDs) and an array of their counts.
        Ranked as this index ranks, without a per-posting object (Chroma reads a
        common term's 40k postings this way). ``names`` is read, never changed."""
        index = cls()
        index.count = count
        index.lengths = list(lengths)
        index.ids = names  # type: ignore[assignment]
        for term, (places, counts) in postings.items():
            index._arrays[term] = (np.asarray(places, dtype=np.int64), np.asarray(counts, dtype=np.float64))
        return index

    def replace(self, memory_id: str, entry: Entry | None) -> None:
        """The memory is now ``entry`` (None or a tombstone: not in the index)."""
        old = self.records.pop(memory_id, None)
        if old is not None:
            self.count -= 1
            for i, n in enumerate(old.lengths):
                self.lengths[i] -= n
            for term in old.terms:
                self._arrays.pop(term, None)
                ids = self.postings.get(term)
                if ids is not None:
                    ids.pop(memory_id, None)
                    if not ids:
                        del self.postings[term]
            slot = self.slots.pop(memory_id)
            self.ids[slot] = None
            self.free.append(slot)
        if entry is None or entry.is_deleted:
            return
        record = index_record(entry.memory)
        self.records[memory_id] = record
        self.count += 1
        for i, n in enumerate(record.lengths):
            self.lengths[i] += n
        if self.free:
            slot = self.free.pop()
            self.ids[slot] = memory_id
        else:
            slot = len(self.ids)
            self.ids.append(memory_id)
        self.slots[memory_id] = slot
        for term, *counts in record.postings():
            self._arrays.pop(term, None)
            self.postings.setdefault(term, {})[memory_id] = tuple(counts)  # type: ignore[assignment]

    def _holders(self, term: str) -> Iterable[str]:
        held = self.postings.get(term)
        if held is not None:
            return held
        # An index of slots (``of_slots``): the term's holders by their places.
        return [name for slot in self._columns(term)[0].tolist() if (name := self.ids[slot]) is not None]

    def _columns(self, term: str) -> tuple[Any, Any]:
        """(slots, counts) of the term's holders as arrays."""
        cached = self._arrays.get(term)
        if cached is None:
            holders = self.postings.get(term, {})
            slots = np.fromiter((self.slots[m] for m in holders), dtype=np.int64, count=len(holders))
            counts = np.array(list(holders.values()), dtype=np.float64).reshape(len(holders), 4)
            cached = self._arrays[term] = (slots, counts)
        return cached

    def lookup(
        self,
        space: str,
        terms: Iterable[str],
        planner: KeywordPlanner | None = None,
        newest_first: Callable[[list[str]], Mapping[str, NewestFirst] | None] | None = None,
    ) -> tuple[set[str] | list[str], KeywordStats]:
        """(IDs of the memories holding one of ``terms``, the space's statistics);
        with a ``planner``, only its best-ranked holders (search/candidates.py).
        ``newest_first`` gives ``Entry.newest_first`` of the memory IDs it is given
        (None: not known): then a tie at the planner's limit is cut in the order
        results give equal scores, and the engine reads none of those left out."""
        terms = list(dict.fromkeys(terms))
        if planner is None:
            # Every holder of a term is a candidate: the scorer counts document frequencies itself.
            ids: set[str] = set()
            for term in terms:
                ids.update(self._holders(term))
            return ids, KeywordStats.of(space, self.count, self.lengths)
        df = {term: len(self._columns(term)[0]) for term in terms}
        stats = KeywordStats.of(space, self.count, self.lengths, df)
        plan = planner.plan(stats)
        held = [term for term in terms if df[term]]
        if not held:
            return [], stats
        columns = [self._columns(term) for term in held]
        holders = np.concatenate([slots for slots, _ in columns])
        counts = np.concatenate([c for _, c in columns])
        which = np.repeat(np.arange(len(held)), [len(slots) for slots, _ in columns])
        ranks = plan.rank_holders(holders, which, held, counts, len(self.ids))
        times = None
        if newest_first is not None and len(tied := plan.tied(ranks)):
            times = newest_first([name for slot in tied.tolist() if (name := self.ids[slot]) is not None])
        chosen = plan.choose(self.ids, holders, which, held, counts, ranks=ranks, newest_first=times)
        return chosen.ids, chosen.stats(stats)
