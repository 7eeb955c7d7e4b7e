"""How the Chroma keyword index (backends/_chroma_index.py) lays a term's postings
over records: the record IDs, and the split of a common term into shards.

A term's postings live in its root record while it has at most ``SPLIT_AT``
holders. Past that the root holds only ``level``, and the postings are split
over 2 ** level shard records by a hash of the memory ID, so an add rewrites
one shard of each of its terms (about ``SPLIT_AT`` / 2 postings at most, on
average), whatever the user's size, and a search reads every shard of its
terms. When a write leaves a shard with more than ``SPLIT_AT`` holders, the
term is split again over enough shards for half that (the term's shards are
read and written once: a cost that doubling makes rare).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memchat.engine.model import UserKey

from ._keyword_index import Posting

#: Most holders a term's record holds before the term is split (again).
SPLIT_AT = 64


def record_id(key: UserKey, name: str) -> str:
    return hashlib.sha256(f"{key.app}\0{key.user}\0{name}".encode()).hexdigest()


def shard_id(key: UserKey, term: str, level: int, shard: int) -> str:
    # The level is part of the ID: a term split again writes new records and
    # drops the old ones, which can never be mistaken for the new.
    return record_id(key, f"{term}\0{level}\0{shard}")


def level_for(holders: int, at_least: int = 0) -> int:
    """The level of a term of ``holders`` holders (0: its root holds them),
    at least ``at_least``: shards of about ``SPLIT_AT`` / 2 holders."""
    if holders <= SPLIT_AT and not at_least:
        return 0
    level = max(at_least, 1)
    while holders > (SPLIT_AT // 2) << level:
        level += 1
    return level


def shard_of(memory_id: str, level: int) -> int:
    return _hash(memory_id) & ((1 << level) - 1) if level else 0


@functools.lru_cache(maxsize=65536)
def _hash(memory_id: str) -> int:
    # Cached: a section of many memories asks for each memory's shard once per term.
    return int.from_bytes(hashlib.blake2b(memory_id.encode(), digest_size=8).digest(), "little")


def columns(meta: dict[str, Any] | None) -> tuple[list[str], Any]:
    """A record's postings as read by a search: the holders' memory IDs and their
    counts, an array of one row (content tf, topic tf, content length, topic
    length) per holder. Made into the ranking's arrays, a common term's 40k
    postings took 62–80 ms as one JSON object and take 23–37 ms as a list of IDs
    and an array of counts."""
    meta = meta or {}
    if _is_legacy(meta):
        held = _legacy(meta)
        return list(held), np.array(list(held.values()), dtype=_COUNTS).reshape(len(held), 4)
    ids: list[str] = json.loads(meta.get("ids") or "[]")
    counts = np.frombuffer(base64.b64decode(meta.get("counts") or ""), dtype=_COUNTS)
    return ids, counts.reshape(len(ids), 4)


def decode(meta: dict[str, Any] | None) -> dict[str, Posting]:
    """A record's postings as a write changes them: memory ID → counts."""
    meta = meta or {}
    if _is_legacy(meta):
        return _legacy(meta)
    ids, counts = columns(meta)
    return dict(zip(ids, map(tuple, counts.tolist()), strict=True))


def encode(held: dict[str, Posting]) -> dict[str, str]:
    """The metadata keys holding ``held``: its IDs (a JSON list) and its counts
    (little-endian 32-bit integers, four per holder, in base 64)."""
    counts = np.array(list(held.values()), dtype=_COUNTS).reshape(len(held), 4)
    return {
        "ids": json.dumps(list(held), separators=(",", ":"), ensure_ascii=False),
        "counts": base64.b64encode(counts.tobytes()).decode("ascii"),
    }


#: How a record's counts are stored.
_COUNTS = np.dtype("<u4")


def _is_legacy(meta: dict[str, Any]) -> bool:
    # Written by layouts up to 4, whose key is "postings". A write of layout 5
    # removes that key, and one of an older memchat sets it but leaves the "ids"
    # and "counts" it does not know (Chroma merges metadata): where "postings" is
    # set, it is the newer.
    return isinstance(meta.get("postings"), str)


def _legacy(meta: dict[str, Any]) -> dict[str, Posting]:
    # Layouts up to 4: one JSON object {memory ID: [the four counts]}.
    held: dict[str, Posting] = json.loads(meta.get("postings") or "{}")
    return held


@dataclass(slots=True)
class TermPostings:
    """One term's postings as read: its level and the shards read so far (level 0:
    shard 0 is the root's postings)."""

    level: int = 0
    shards: dict[int, dict[str, Posting]] = field(default_factory=dict)

    @classmethod
    def of_root(cls, meta: dict[str, Any] | None) -> TermPostings:
        level = int((meta or {}).get("level") or 0)
        return cls(level, {} if level else {0: decode(meta)})

    @classmethod
    def split(cls, held: dict[str, Posting], level: int) -> TermPostings:
        """Every holder ``held`` laid out at ``level``, every shard present."""
        shards: dict[int, dict[str, Posting]] = {s: {} for s in range(1 << level)}
        for memory_id, posting in held.items():
            shards[shard_of(memory_id, level)][memory_id] = posting
        return cls(level, shards)

    def shard(self, memory_id: str) -> dict[str, Posting]:
        """The (read) shard holding ``memory_id``."""
        return self.shards[shard_of(memory_id, self.level)]

    def overflows(self, shards: Iterable[int]) -> bool:
        """One of ``shards`` holds more than a record should: split the term (again)."""
        return any(len(self.shards[s]) > SPLIT_AT for s in shards)

    def missing(self) -> Iterator[int]:
        """The shards not read yet."""
        return (s for s in range(1 << self.level) if s not in self.shards)

    def merged(self) -> dict[str, Posting]:
        if len(self.shards) == 1:
            return next(iter(self.shards.values()))
        return {memory_id: p for held in self.shards.values() for memory_id, p in held.items()}

    def records(self, key: UserKey, term: str, shards: Any = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """(record ID, metadata) of the root, when it holds postings or the level is
        new (``shards`` None), and of ``shards`` (None: every shard holding any)."""
        if not self.level:
            yield record_id(key, term), _meta(key, term, self.shards.get(0, {}), 0)
            return
        if shards is None:
            yield record_id(key, term), _meta(key, term, {}, self.level)
            shards = [s for s, held in self.shards.items() if held]
        for shard in shards:
            yield shard_id(key, term, self.level, shard), _meta(key, term, self.shards[shard], None)


def _meta(key: UserKey, term: str, held: dict[str, Posting], level: int | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "kind": "term",
        "app_name": key.app,
        "user_id": key.user,
        **encode(held),
        "postings": None,  # layout 4's key (None removes it where the record had one)
    }
    if level is not None:  # a root: its term and level (a shard is read by ID only,
        meta["term"], meta["level"] = term, level  # and Chroma reads a record key by key)
    return meta
