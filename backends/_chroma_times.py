"""Each memory's times in the Chroma keyword index (layout 7, backends/_chroma_index.py):
the postings of one more term, ``TIMES_TERM``, that every active memory holds.

Why: a keyword search past ``ENTRIES_KEPT_UP_TO`` memories (backends/_chroma_search.py)
keeps no records in the process, so a tie at the candidates' limit (hundreds of
holders of "my" with the same counts) was cut by ID, and the engine, not told
where results' order ("newest first": updated_at, created_at, ID) left off, asked
the store a second time for every tied holder (search/candidates.py). At 100k
memories one hybrid search in five did, at 126–172 ms p95 against 87–97 for
those asking once (benchmarks/README.md, twenty-sixth session). With the
times beside the counts, the tie is cut as results cut it, and the second ask
goes.

Stored as the other terms' postings are (a list of IDs and four unsigned 32-bit
numbers each, split into shards by a hash of the memory ID), so a write keeps
them in the same section and request as the rest of the index, and a search
reads only the shards of the tied holders. Each time (µs since the epoch,
shifted by ``_SHIFT`` so earlier dates stay positive) is two 31-bit halves: the
shard cache holds counts as signed 32-bit numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memchat.engine.model import Entry, to_micros
from memchat.engine.search.index import IndexRecord, NewestFirst

#: The term every active memory holds. "\0" cannot start a term (nor a query's token).
TIMES_TERM = "\0times"

_HALF = 31
_MASK = (1 << _HALF) - 1
_SHIFT = 1 << (2 * _HALF - 1)  # ±73,000 years around 1970 fit in the two halves

Times = tuple[int, int, int, int]


def times_of(entry: Entry) -> Times:
    """(updated hi, updated lo, created hi, created lo) of the entry."""
    updated = to_micros(entry.updated_at) + _SHIFT
    created = to_micros(entry.created_at) + _SHIFT
    return (updated >> _HALF, updated & _MASK, created >> _HALF, created & _MASK)


def newest_first(ids: Sequence[str], times: Any) -> dict[str, NewestFirst]:
    """``Entry.newest_first`` of the memories ``ids`` whose times postings are the
    rows of ``times`` (an array of four columns), in numpy: hundreds at a time."""
    rows = np.asarray(times, dtype=np.int64).reshape(len(ids), 4)
    updated = ((rows[:, 0] << _HALF) | rows[:, 1]) - _SHIFT
    created = ((rows[:, 2] << _HALF) | rows[:, 3]) - _SHIFT
    return {mid: (-u, -c, mid) for mid, u, c in zip(ids, updated.tolist(), created.tolist(), strict=True)}


@dataclass(frozen=True, slots=True)
class TimedRecord:
    """What an active memory adds to the Chroma index: its keyword record and, as
    the posting of ``TIMES_TERM``, its times. Equal only when both are, so a write
    that changes no word but a time (every update) rewrites the times' shard."""

    record: IndexRecord
    times: Times

    @property
    def terms(self) -> tuple[str, ...]:
        return (*self.record.terms, TIMES_TERM)

    @property
    def lengths(self) -> tuple[int, int, int, int]:
        return self.record.lengths

    def postings(self) -> list[tuple[str, int, int, int, int]]:
        return [*self.record.postings(), (TIMES_TERM, *self.times)]
