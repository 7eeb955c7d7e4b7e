"""The Redis store's inverted index for keyword search (memchat/engine/search/index.py).

Beside each user's hashes (same hash tag, so one cluster slot)::

    <base>:kw:q:<term>    string  the term's postings: 20-byte records (slot, tf_content,
                                  tf_topics, content_length, topic_length), one per
                                  active memory holding <term> (_redis_scripts.py)
    <base>:kw:slot        hash  memory ID → slot (a small number per indexed memory)
    <base>:kw:id          hash  slot → memory ID
    <base>:kw:free        list  slots given back, used again first; <base>:kw:next: the last slot made
    <base>:kw:q           hash  term → how many active memories hold it (the user's terms)
    <base>:kw:s3          hash  active, k_content, k_topics, s_content, s_topics
    <base>:recent         sorted set  active memory ID → updated_at (µs): "the newest N"
    <base>:when           sorted set  active dated memory ID → event_time (µs): a period's memories

They change in the same MULTI/EXEC as the entries (``queue_replace``: a Lua
script per changed memory, run at EXEC), under the section's WATCH of the
user's hashes, so a write and its postings land together or not at all. A
search reads the statistics and each term's document frequency (its length
÷ 20) in one round trip; then a Lua script ranks the holders by the engine's
formula (search/candidates.py, ``CandidatePlan.rank``) inside Redis and
returns the best few hundred, whose entries are read by HMGET.

Versions: 1 kept plain sets under ``kw:t:`` (statistics ``kw:stats``, terms
``kw:df``); 2 a hash per term under ``kw:p:`` (``kw:s2``, ``kw:terms``); 3 the
packed strings above; 4, this one, those and the ``when`` set. A store of an
older version is rebuilt user by user when it is opened (``INDEX_META`` in the store's meta hash
records the version built), losing nothing. Besides, a search whose recorded
active count differs from the active hash's size (a memchat that does not
keep this version wrote the user; likewise when the recent set's size differs
from it) scans as before and the user's index is rebuilt in a write section
(``rebuild``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from redis.client import NEVER_DECODE

from memchat.engine.model import Entry, UserKey
from memchat.engine.search.candidates import Chosen
from memchat.engine.search.index import INDEX_VERSION as TOKENS_VERSION
from memchat.engine.search.index import IndexRecord, KeywordStats, index_record
from memchat.engine.vectors import IndexingProgress, report_progress

from ._redis_layout import user_bases, user_of_base
from ._redis_scripts import (
    HOLDERS_SCRIPT,
    POSTINGS_SCRIPT,
    RANK_SCRIPT,
    RECORD_FORMAT,
    RECORD_SIZE,
    WRITE_SCRIPT,
)

if TYPE_CHECKING:
    from memchat.engine.search.candidates import CandidatePlan, KeywordPlanner

__all__ = [
    "INDEX_META",
    "INDEX_VERSION",
    "IndexKeys",
    "build_every_user",
    "index_keys",
    "indexed_terms",
    "lookup",
    "queue_build",
    "queue_drop",
    "queue_replace",
    "record_of",
]

#: The store's meta record of the index version its users' indexes were built with:
#: this layout's number, then the engine's tokenisation (a store written with other
#: tokens is indexed again on open, as the SQL and Chroma stores are).
INDEX_META = "keyword_index"
INDEX_VERSION = f"4.{TOKENS_VERSION}"

#: From this many postings of the query's terms a search ranks their holders in
#: this process (numpy over the packed records) rather than in a Lua script: a
#: script over a common term's 40k postings at 100k memories holds Redis, which
#: runs one command at a time, for every other client too.
RANK_HERE_FROM = 2_000

_STATS_FIELDS = ("active", "k_content", "k_topics", "s_content", "s_topics")


class IndexKeys:
    __slots__ = ("df", "free", "ids", "legacy", "next", "recent", "slots", "stats", "term_prefix", "when")

    def __init__(self, base: str) -> None:
        #: Sorted set: active memory ID → updated_at in microseconds (reading the
        #: newest N is a range of it, not a read of the whole hash).
        self.recent = f"{base}:recent"
        #: Sorted set: active memory ID → event_time in microseconds, for the memories
        #: that have one (the memories of a period are a range of it).
        self.when = f"{base}:when"
        self.df = f"{base}:kw:q"
        self.stats = f"{base}:kw:s3"
        self.term_prefix = f"{base}:kw:q:"
        self.slots = f"{base}:kw:slot"
        self.ids = f"{base}:kw:id"
        self.free = f"{base}:kw:free"
        self.next = f"{base}:kw:next"
        #: Older versions' keys: (term list, statistics, term prefix) of version 1, then 2.
        self.legacy = (
            (f"{base}:kw:df", f"{base}:kw:stats", f"{base}:kw:t:"),
            (f"{base}:kw:terms", f"{base}:kw:s2", f"{base}:kw:p:"),
        )

    def term(self, term: str) -> str:
        return self.term_prefix + term


def index_keys(base: str) -> IndexKeys:
    return IndexKeys(base)


def record_of(entry: Entry | None) -> IndexRecord | None:
    """The index record of an entry that counts (active), else None."""
    if entry is None or entry.is_deleted:
        return None
    return index_record(entry.memory)


def queue_replace(
    pipe: Any, keys: IndexKeys, memory_id: str, before: IndexRecord | None, after: IndexRecord | None
) -> None:
    """Queue (inside MULTI) the change of one memory's postings and the statistics."""
    if before == after:
        return
    old = _counts(before)
    new = _counts(after)
    dropped = sorted(old.keys() - new.keys())
    written = [(term, counts) for term, counts in new.items() if old.get(term) != counts]
    if dropped or written:
        pipe.eval(
            WRITE_SCRIPT,
            4 + len(dropped) + len(written),
            keys.slots,
            keys.ids,
            keys.free,
            keys.next,
            *(keys.term(t) for t in dropped),
            *(keys.term(t) for t, _ in written),
            memory_id,
            len(dropped),
            *(n for _, counts in written for n in counts),
        )
    for term in dropped:
        pipe.hincrby(keys.df, term, -1)
    for term in new.keys() - old.keys():
        pipe.hincrby(keys.df, term, 1)
    _queue_stats(pipe, keys, before, -1)
    _queue_stats(pipe, keys, after, 1)


def _queue_stats(pipe: Any, keys: IndexKeys, record: IndexRecord | None, sign: int) -> None:
    if record is not None:
        pipe.hincrby(keys.stats, "active", sign)
        for name, n in zip(_STATS_FIELDS[1:], record.lengths, strict=True):
            if n:
                pipe.hincrby(keys.stats, name, sign * n)


def _counts(record: IndexRecord | None) -> dict[str, tuple[int, int, int, int]]:
    if record is None:
        return {}
    return {term: (a, b, c, d) for term, a, b, c, d in record.postings()}


def queue_build(pipe: Any, keys: IndexKeys, entries: Sequence[Entry]) -> None:
    """Queue (inside MULTI, after ``queue_drop``) the whole index of these active
    entries at once: slots 1…n, each term's postings one SET."""
    postings: dict[str, list[bytes]] = {}
    totals = [0] * len(_STATS_FIELDS)
    for slot, entry in enumerate(entries, 1):
        record = index_record(entry.memory)
        totals[0] += 1
        for i, n in enumerate(record.lengths, 1):
            totals[i] += n
        for term, tf_content, tf_topics, content_length, topic_length in record.postings():
            packed = struct.pack(RECORD_FORMAT, slot, tf_content, tf_topics, content_length, topic_length)
            postings.setdefault(term, []).append(packed)
    ids = [entry.id for entry in entries]
    for start in range(0, len(ids), 1000):
        slots = range(start + 1, min(start + 1000, len(ids)) + 1)
        pipe.hset(keys.slots, mapping={ids[s - 1]: s for s in slots})
        pipe.hset(keys.ids, mapping={s: ids[s - 1] for s in slots})
    if ids:
        pipe.set(keys.next, len(ids))
    terms = list(postings)
    for start in range(0, len(terms), 1000):
        chunk = terms[start : start + 1000]
        pipe.mset({keys.term(t): b"".join(postings[t]) for t in chunk})
        pipe.hset(keys.df, mapping={t: len(postings[t]) for t in chunk})
    pipe.hset(keys.stats, mapping=dict(zip(_STATS_FIELDS, totals, strict=True)))


async def indexed_terms(client: Any, keys: IndexKeys) -> list[str]:
    """Every key of the user's index, every version's (what ``queue_drop`` deletes)."""
    names = [keys.recent, keys.when, keys.df, keys.stats, keys.slots, keys.ids, keys.free, keys.next]
    names += [keys.term(t) for t in await client.hkeys(keys.df)]
    for term_list, stats, prefix in keys.legacy:
        names += [term_list, stats, *(prefix + t for t in await client.hkeys(term_list))]
    return names


def queue_drop(pipe: Any, names: Sequence[str]) -> None:
    """Queue the deletion of a user's whole index (the keys ``indexed_terms`` listed)."""
    for start in range(0, len(names), 500):
        pipe.delete(*names[start : start + 500])


async def lookup(
    client: Any,
    keys: IndexKeys,
    active_key: str,
    space: str,
    terms: Sequence[str],
    planner: KeywordPlanner | None = None,
) -> tuple[list[str], KeywordStats] | None:
    """(IDs of the candidates, the statistics), or None when the index does not
    match the active hash (it needs a rebuild). Without a ``planner`` every holder
    of a term (the scorer counts document frequencies itself); with one, the
    best-ranked holders and the statistics with the frequencies and the cutoff."""
    terms = list(dict.fromkeys(terms))
    async with client.pipeline(transaction=True) as pipe:
        pipe.hlen(active_key)
        pipe.hmget(keys.stats, list(_STATS_FIELDS))
        for term in terms:
            pipe.strlen(keys.term(term))
        size, stats, *lengths = await pipe.execute()
    values = [int(v or 0) for v in stats]
    if values[0] != int(size):
        return None
    df = {term: int(n) // RECORD_SIZE for term, n in zip(terms, lengths, strict=True)}
    held = [term for term in terms if df[term]]
    postings = [keys.term(t) for t in held]
    if planner is None:
        ids = await client.eval(HOLDERS_SCRIPT, len(held) + 1, *postings, keys.ids) if held else []
        return sorted(ids), KeywordStats.of(space, values[0], values[1:])
    stats = KeywordStats.of(space, values[0], values[1:], df)
    plan = planner.plan(stats)
    if not held:
        return [], stats
    if sum(df[term] for term in held) >= RANK_HERE_FROM:
        chosen = await _rank_here(client, keys, plan, held)
        if chosen is not None:
            return chosen.ids, chosen.stats(stats)
    reply = await client.eval(RANK_SCRIPT, len(held) + 1, *postings, keys.ids, *_script_args(plan, held))
    # The script returns its best in no order: best first here, ties by ID.
    rows = zip(reply[0::3], reply[1::3], reply[2::3], strict=True)
    ranked = sorted(((str(i), float(r), float(f)) for i, r, f in rows), key=lambda row: (-row[1], row[0]))
    limited = plan.limit is not None and len(ranked) >= plan.limit
    # The script cut any tie at the limit by ID: the engine is told nothing of it.
    chosen = plan.settle(ranked, ranked[-1][1] if limited else None)
    return chosen.ids, chosen.stats(stats)


async def _rank_here(
    client: Any, keys: IndexKeys, plan: CandidatePlan, terms: Sequence[str]
) -> Chosen | None:
    """The best-ranked holders of ``terms``, as the rank script chooses them (ties
    by ID), ranked in numpy in this process: the packed postings cross as they are
    stored (20 bytes a holder) and only the IDs of the holders that can reach the
    limit are read. None when the index moved between the two reads (a write
    freed one of those slots): the caller ranks in Redis."""
    # One script, so the terms are read as one state; its reply undecoded (bytes).
    blobs = await client.execute_command(
        "EVAL", POSTINGS_SCRIPT, len(terms), *(keys.term(t) for t in terms), **{NEVER_DECODE: []}
    )
    parts = [np.frombuffer(blob or b"", dtype="<u4").reshape(-1, 5) for blob in blobs]
    records = np.concatenate(parts)
    holders = records[:, 0].astype(np.int64)
    which = np.repeat(np.arange(len(parts)), [len(part) for part in parts])
    size = int(holders.max()) + 1 if len(holders) else 0
    counts = records[:, 1:].astype(np.float64)
    ranks = plan.rank_holders(holders, which, terms, counts, size)
    # Ties are cut by memory ID, as the script cuts them (the times of the tied
    # holders are in their records, not here): the holders that can reach the
    # limit are named first.
    contenders = plan.contenders(ranks)[0].tolist()
    if not contenders:
        return Chosen([], None)
    names = await client.hmget(keys.ids, [str(slot) for slot in contenders])
    if any(memory_id is None for memory_id in names):
        return None
    named = dict(zip(contenders, names, strict=True))
    return plan.choose(named, holders, which, terms, counts, ranks=ranks)


async def build_every_user(store: Any) -> None:
    """Index, user by user (each in a write section of ``store``, a RedisStore),
    a store whose keyword index is of an older version or missing, telling
    ``store.progress`` how far it got; then record the version."""

    async def active_counts(client: Any) -> dict[UserKey, int]:
        bases = await user_bases(client, store.key_prefix)
        async with client.pipeline(transaction=False) as pipe:
            for base in bases:
                pipe.hlen(base)
            sizes = await pipe.execute()
        return {user_of_base(base): int(n) for base, n in zip(bases, sizes, strict=True)}

    counts = await store.run("reading the users to index", active_counts)
    total, done = sum(counts.values()), 0
    await report_progress(store.progress, IndexingProgress(done, total))
    for key, n in counts.items():
        await store.rebuild_index(key)
        done += n
        await report_progress(store.progress, IndexingProgress(done, total))
    await store.write_meta(INDEX_META, INDEX_VERSION)


def _script_args(plan: CandidatePlan, terms: Sequence[str]) -> list[Any]:
    args: list[Any] = [
        plan.limit or 0,
        repr(plan.min_rank),
        *(
            repr(float(v))
            for v in (
                plan.k1,
                plan.b,
                plan.one_minus_b,
                plan.k1_plus_1,
                plan.topic_weight,
                plan.coverage_weight,
                plan.rarity_weight,
                plan.strength_weight,
                plan.total_weight,
                plan.rarity_norm,
                plan.avg_content,
                plan.avg_topics,
                plan.phrase_bonus,
            )
        ),
        len(plan.phrase_terms),
    ]
    for term in terms:
        weight, weighted_idf = plan.weights[term]
        args += [repr(weight), repr(weighted_idf), 1 if term in plan.phrase_terms else 0]
    return args
