"""The Redis store's inverted index for keyword search (memchat/engine/search/index.py).

Beside each user's hashes (same hash tag, so one cluster slot)::

    <base>:kw:p:<term>    hash  memory ID → "tf_content tf_topics content_length topic_length"
                                for each active memory holding <term>
    <base>:kw:terms       hash  term → how many active memories hold it (the user's terms)
    <base>:kw:s2          hash  active, k_content, k_topics, s_content, s_topics
    <base>:recent         sorted set  active memory ID → updated_at (µs): "the newest N"

They change in the same MULTI/EXEC as the entries (``queue_replace``), under
the section's WATCH of the user's hashes, so a write and its postings land
together or not at all. A search reads the statistics and each term's
document frequency (HLEN) in one round trip; then a Lua script ranks the
holders by the engine's formula (search/candidates.py, ``CandidatePlan.rank``)
inside Redis and returns the best few hundred, whose entries are read by HMGET.

Self-healing instead of a migration: if the recorded active count differs from
the active hash's size (a store written before this index existed, or by a
memchat that does not keep it; likewise when the recent set's size differs
from it — version 1 kept plain sets under ``kw:t:`` and
its statistics under ``kw:stats``, which it still updates while ``kw:s2`` does
not move), that search scans as before and the user's index is rebuilt in a
write section (``rebuild``), losing nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memchat.engine.model import Entry
from memchat.engine.search.index import IndexRecord, KeywordStats, index_record

if TYPE_CHECKING:
    from memchat.engine.search.candidates import CandidatePlan, KeywordPlanner

__all__ = ["IndexKeys", "index_keys", "indexed_terms", "lookup", "queue_drop", "queue_replace", "record_of"]

_STATS_FIELDS = ("active", "k_content", "k_topics", "s_content", "s_topics")


class IndexKeys:
    __slots__ = ("df", "legacy", "recent", "stats", "term_prefix")

    def __init__(self, base: str) -> None:
        #: Sorted set: active memory ID → updated_at in microseconds (reading the
        #: newest N is a range of it, not a read of the whole hash).
        self.recent = f"{base}:recent"
        self.df = f"{base}:kw:terms"
        self.stats = f"{base}:kw:s2"
        self.term_prefix = f"{base}:kw:p:"
        #: Version 1's keys: its term list (df hash), statistics and set prefix.
        self.legacy = (f"{base}:kw:df", f"{base}:kw:stats", f"{base}:kw:t:")

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
    old = _packed(before)
    new = _packed(after)
    for term in old.keys() - new.keys():
        pipe.hdel(keys.term(term), memory_id)
        pipe.hincrby(keys.df, term, -1)
    for term, counts in new.items():
        if old.get(term) != counts:  # new, or its counts or the memory's lengths changed
            pipe.hset(keys.term(term), memory_id, counts)
        if term not in old:
            pipe.hincrby(keys.df, term, 1)
    for record, sign in ((before, -1), (after, 1)):
        if record is not None:
            pipe.hincrby(keys.stats, "active", sign)
            for name, n in zip(_STATS_FIELDS[1:], record.lengths, strict=True):
                if n:
                    pipe.hincrby(keys.stats, name, sign * n)


def _packed(record: IndexRecord | None) -> dict[str, str]:
    if record is None:
        return {}
    return {term: f"{a} {b} {c} {d}" for term, a, b, c, d in record.postings()}


async def indexed_terms(client: Any, keys: IndexKeys) -> list[str]:
    """Every key of the user's index, both versions' (what ``queue_drop`` deletes)."""
    legacy_df, legacy_stats, legacy_prefix = keys.legacy
    terms = await client.hkeys(keys.df)
    old = await client.hkeys(legacy_df)
    return [
        keys.recent,
        keys.df,
        keys.stats,
        legacy_df,
        legacy_stats,
        *(keys.term(t) for t in terms),
        *(legacy_prefix + t for t in old),
    ]


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
            if planner is None:
                pipe.hkeys(keys.term(term))
            else:
                pipe.hlen(keys.term(term))
        size, stats, *per_term = await pipe.execute()
    values = [int(v or 0) for v in stats]
    if values[0] != int(size):
        return None
    if planner is None:
        return sorted(set().union(*per_term)), KeywordStats.of(space, values[0], values[1:])
    df = {term: int(n) for term, n in zip(terms, per_term, strict=True)}
    stats = KeywordStats.of(space, values[0], values[1:], df)
    plan = planner.plan(stats)
    held = [term for term in terms if df[term]]
    if not held:
        return [], stats
    reply = await client.eval(
        _RANK_SCRIPT, len(held), *(keys.term(t) for t in held), *_script_args(plan, held)
    )
    ranked = [
        (i.decode() if isinstance(i, bytes) else str(i), float(rank), float(floor))
        for i, rank, floor in zip(reply[0::3], reply[1::3], reply[2::3], strict=True)
    ]
    cutoff = ranked[-1][1] if plan.limit is not None and len(ranked) >= plan.limit else None
    ids, cutoff = plan.settle(ranked, cutoff)
    return ids, replace(stats, rank_cutoff=cutoff)


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


#: CandidatePlan.rank over every holder of the given terms, inside Redis (no
#: posting crosses the network): returns [id, rank, floor, id, rank, floor, …] (the
#: floor: the rank less the ordered-phrase bonus), best first, at most ``limit``
#: (0: all) of those ranked at least ``min_rank``.
_RANK_SCRIPT = """
local limit = tonumber(ARGV[1])
local min_rank = tonumber(ARGV[2])
local k1, b, omb, k1p1 = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local topic_w, cov_w = tonumber(ARGV[7]), tonumber(ARGV[8])
local rar_w, str_w = tonumber(ARGV[9]), tonumber(ARGV[10])
local total, rarity_norm = tonumber(ARGV[11]), tonumber(ARGV[12])
local avg_c, avg_t, bonus = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local phrase_n = tonumber(ARGV[16])
local matched, matched_idf, raw, phrase = {}, {}, {}, {}
for i = 1, #KEYS do
  local base = 16 + 3 * (i - 1)
  local w, wi, ph = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local flat = redis.call('HGETALL', KEYS[i])
  for j = 1, #flat, 2 do
    local id = flat[j]
    local tc, tt, lc, lt = string.match(flat[j + 1], '(%d+) (%d+) (%d+) (%d+)')
    tc, tt, lc, lt = tonumber(tc), tonumber(tt), tonumber(lc), tonumber(lt)
    local sat = tc * k1p1 / (tc + k1 * (omb + b * lc / avg_c))
      + topic_w * tt * k1p1 / (tt + k1 * (omb + b * lt / avg_t))
    matched[id] = (matched[id] or 0) + w
    matched_idf[id] = (matched_idf[id] or 0) + wi
    raw[id] = (raw[id] or 0) + wi * sat
    phrase[id] = (phrase[id] or 0) + ph
  end
end
local ranked = {}
for id, m in pairs(matched) do
  local mi = matched_idf[id]
  if mi > 0 then
    local cov
    if total <= 2 then cov = m / math.max(total, 1)
    elseif m <= 1 then cov = 0.5 * m
    else cov = 0.5 + 0.5 * (m - 1) / (total - 1) end
    local strength = math.min(raw[id] / (mi * k1p1), 1)
    local r = cov_w * cov + rar_w * mi / rarity_norm + str_w * strength
    local floor = math.min(r, 1)
    if phrase_n > 0 and phrase[id] == phrase_n then r = r + bonus end
    r = math.min(r, 1)
    if r >= min_rank then ranked[#ranked + 1] = {r, id, floor} end
  end
end
table.sort(ranked, function(x, y)
  if x[1] ~= y[1] then return x[1] > y[1] end
  return x[2] < y[2]
end)
local n = #ranked
if limit > 0 and n > limit then n = limit end
local out = {}
for i = 1, n do
  out[#out + 1] = ranked[i][2]
  out[#out + 1] = string.format('%.17g', ranked[i][1])
  out[#out + 1] = string.format('%.17g', ranked[i][3])
end
return out
"""
