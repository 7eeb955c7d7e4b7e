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

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

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


def decode(meta: dict[str, Any] | None) -> dict[str, Posting]:
    # The counts stay JSON lists: the ranking reads them as rows of an array.
    held: dict[str, Posting] = json.loads((meta or {}).get("postings") or "{}")
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
        "postings": json.dumps(held, separators=(",", ":"), ensure_ascii=False),
    }
    if level is not None:  # a root: its term and level (a shard is read by ID only,
        meta["term"], meta["level"] = term, level  # and Chroma reads a record key by key)
    return meta
