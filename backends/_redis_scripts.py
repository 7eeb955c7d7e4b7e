"""The Lua scripts of the Redis store's keyword index (redis_index.py).

A term's postings are one string of fixed 20-byte records, each five
little-endian unsigned 32-bit integers: the memory's *slot* (a small number
the index gives each indexed memory, ``kw:slot`` / ``kw:id``), its count of
the term in the content and in the topics, and its two field lengths. A
search reads a term with one GET and decodes it with ``struct.unpack``: no
Lua string per posting (a hash of 64-character IDs cost a string per ID and
per value, most of the time a search spent).
"""

from __future__ import annotations

#: One posting: slot, content tf, topic tf, content length, topic length.
RECORD_FORMAT = "<5I"
RECORD_SIZE = 20

#: The packed postings of the terms KEYS, as stored ("" for a term nobody holds),
#: read as one state (redis_index.py ranks them in the client).
POSTINGS_SCRIPT = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('GET', key) or ''
end
return out
"""

#: Change one memory's postings (queued inside the write section's MULTI).
#: KEYS: slot hash (ID → slot), ID hash (slot → ID), free-slot list, slot
#: counter, then the postings of the terms to drop and of the terms to write.
#: ARGV: memory ID, how many terms to drop, then four counts per term to write.
#: A memory gets a slot when it first holds a term (a freed one if any) and
#: gives it back when it holds none.
WRITE_SCRIPT = """
local id, dropped = ARGV[1], tonumber(ARGV[2])
local written = #KEYS - 4 - dropped
local slot = tonumber(redis.call('HGET', KEYS[1], id))
local fresh = slot == nil -- a new slot has no posting yet (a slot is freed only once it has none)
if fresh then
  if written == 0 then return 0 end
  slot = tonumber(redis.call('RPOP', KEYS[3])) or redis.call('INCR', KEYS[4])
  redis.call('HSET', KEYS[1], id, slot)
  redis.call('HSET', KEYS[2], slot, id)
end
local needle = struct.pack('<I4', slot)
local function find(s)
  local init = 1
  while true do
    local p = string.find(s, needle, init, true)
    if p == nil or (p - 1) % 20 == 0 then return p end
    init = p + 1
  end
end
for i = 5, 4 + dropped do
  local s = redis.call('GET', KEYS[i])
  local p = s and find(s)
  if p then
    local n = #s
    if n == 20 then redis.call('DEL', KEYS[i])
    elseif p == n - 19 then redis.call('SET', KEYS[i], string.sub(s, 1, n - 20))
    else -- the last record moves into the gap
      local last = string.sub(s, n - 19)
      redis.call('SET', KEYS[i], string.sub(s, 1, p - 1) .. last .. string.sub(s, p + 20, n - 20))
    end
  end
end
for i = 1, written do
  local key, a = KEYS[4 + dropped + i], 2 + 4 * (i - 1)
  local record = struct.pack('<I4I4I4I4I4', slot, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]))
  local p = not fresh and find(redis.call('GET', key) or '')
  if p then redis.call('SETRANGE', key, p - 1, record) else redis.call('APPEND', key, record) end
end
if written == 0 then
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], slot)
  redis.call('RPUSH', KEYS[3], slot)
end
return slot
"""

#: Every holder of the given terms' postings (KEYS: the postings, then the ID hash): their IDs.
HOLDERS_SCRIPT = """
local seen, slots = {}, {}
for i = 1, #KEYS - 1 do
  local s = redis.call('GET', KEYS[i])
  if s then
    for pos = 1, #s, 20 do
      local slot = struct.unpack('<I4', s, pos)
      if not seen[slot] then
        seen[slot] = true
        slots[#slots + 1] = slot
      end
    end
  end
end
local out = {}
for start = 1, #slots, 1000 do
  local ids = redis.call('HMGET', KEYS[#KEYS], unpack(slots, start, math.min(start + 999, #slots)))
  for t = 1, #ids do
    if ids[t] then out[#out + 1] = ids[t] end
  end
end
return out
"""

#: CandidatePlan.rank over every holder of the given terms, inside Redis (no
#: posting crosses the network). KEYS: the terms' postings, then the ID hash.
#: Returns [id, rank, floor, id, rank, floor, …] (the floor: the rank less the
#: ordered-phrase bonus) of the best ``limit`` (0: all) by rank, ties by ID, of
#: those ranked at least ``min_rank``, in no particular order. The sums run
#: over the terms in the order given, as the engine's do, so the ranks are the
#: same to the last bit.
RANK_SCRIPT = """
local limit = tonumber(ARGV[1])
local min_rank = tonumber(ARGV[2])
local k1, b, omb, k1p1 = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local topic_w, cov_w = tonumber(ARGV[7]), tonumber(ARGV[8])
local rar_w, str_w = tonumber(ARGV[9]), tonumber(ARGV[10])
local total, rarity_norm = tonumber(ARGV[11]), tonumber(ARGV[12])
local avg_c, avg_t, bonus = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local phrase_n = tonumber(ARGV[16])
local unpack_record, min, max = struct.unpack, math.min, math.max
local function ids_of(list)
  local ids = {}
  for start = 1, #list, 1000 do
    local part = redis.call('HMGET', KEYS[#KEYS], unpack(list, start, math.min(start + 999, #list)))
    for t = 1, #part do ids[start + t - 1] = part[t] end
  end
  return ids
end
-- Which of the terms a holder has is a bit set (50 terms a word): what depends
-- only on that (the matched weight and idf, the phrase terms held) is worked
-- out once per distinct set, summed in term order as before.
local terms = #KEYS - 1
local w, wi, ph, words, raw = {}, {}, {}, {}, {}
for i = 1, terms do
  local arg = 16 + 3 * (i - 1)
  w[i], wi[i], ph[i] = tonumber(ARGV[arg + 1]), tonumber(ARGV[arg + 2]), tonumber(ARGV[arg + 3])
  local word = math.floor((i - 1) / 50) + 1
  local held = words[word] or {}
  words[word] = held
  local bit, weight = 2 ^ ((i - 1) % 50), wi[i]
  local s = redis.call('GET', KEYS[i])
  if s then
    for pos = 1, #s, 20 do
      local slot, tc, tt, lc, lt = unpack_record('<I4I4I4I4I4', s, pos)
      local sat = tc * k1p1 / (tc + k1 * (omb + b * lc / avg_c))
        + topic_w * tt * k1p1 / (tt + k1 * (omb + b * lt / avg_t))
      held[slot] = (held[slot] or 0) + bit
      local sum = raw[slot]
      if sum == nil then raw[slot] = weight * sat else raw[slot] = sum + weight * sat end
    end
  end
end
local function sums(slot)
  local m, mi, p = 0, 0, 0
  for word = 1, #words do
    local x, i = words[word][slot] or 0, (word - 1) * 50
    while x > 0 do
      i = i + 1
      if x % 2 == 1 then
        m, mi, p = m + w[i], mi + wi[i], p + ph[i]
        x = x - 1
      end
      x = x / 2
    end
  end
  return m, mi, p
end
-- Per bit set: the rank less its strength part (false: no idf), the strength's
-- denominator, and whether the phrase bonus applies.
local first, set_base, set_denom, set_bonus = words[1], {}, {}, {}
local slots, ranks, floors, n = {}, {}, {}, 0
for slot, sum in pairs(raw) do
  local set = first[slot] or 0 -- a number below 2^50, exact; more words: their digits
  if #words > 1 then set = string.format('%.0f', set) end
  for word = 2, #words do set = set .. string.format(':%.0f', words[word][slot] or 0) end
  local base, denom, with_bonus = set_base[set], set_denom[set], set_bonus[set]
  if base == nil then
    local m, mi, p = sums(slot)
    base = false
    if mi > 0 then
      local cov
      if total <= 2 then cov = m / max(total, 1)
      elseif m <= 1 then cov = 0.5 * m
      else cov = 0.5 + 0.5 * (m - 1) / (total - 1) end
      base, denom = cov_w * cov + rar_w * mi / rarity_norm, mi * k1p1
    end
    with_bonus = phrase_n > 0 and p == phrase_n
    set_base[set], set_denom[set], set_bonus[set] = base, denom, with_bonus
  end
  if base then
    local r = base + str_w * min(sum / denom, 1)
    local floor = min(r, 1)
    if with_bonus then r = r + bonus end
    r = min(r, 1)
    if r >= min_rank then
      n = n + 1
      slots[n], ranks[n], floors[n] = slot, r, floor
    end
  end
end
local chosen = {}
if limit > 0 and n > limit then
  -- The limit-th best rank (quickselect on a copy, best first), then every
  -- holder above it and, by ID, as many of those tied with it as fit.
  local a = {}
  for i = 1, n do a[i] = ranks[i] end
  local lo, hi = 1, n
  while lo < hi do
    local pivot = a[math.floor((lo + hi) / 2)]
    local i, j = lo, hi
    while i <= j do
      while a[i] > pivot do i = i + 1 end
      while a[j] < pivot do j = j - 1 end
      if i <= j then
        a[i], a[j] = a[j], a[i]
        i, j = i + 1, j - 1
      end
    end
    if limit <= j then hi = j elseif limit >= i then lo = i else break end
  end
  local threshold, tied = a[limit], {}
  for i = 1, n do
    if ranks[i] > threshold then chosen[#chosen + 1] = i
    elseif ranks[i] == threshold then tied[#tied + 1] = i end
  end
  local room = limit - #chosen
  if #tied > room then
    local tied_slots = {}
    for t, i in ipairs(tied) do tied_slots[t] = slots[i] end
    local tied_ids, index_of, by_id = ids_of(tied_slots), {}, {}
    for t, i in ipairs(tied) do
      local id = tied_ids[t]
      if id then
        index_of[id] = i
        by_id[#by_id + 1] = id
      end
    end
    table.sort(by_id)
    for t = 1, math.min(room, #by_id) do chosen[#chosen + 1] = index_of[by_id[t]] end
  else
    for _, i in ipairs(tied) do chosen[#chosen + 1] = i end
  end
else
  for i = 1, n do chosen[i] = i end
end
local chosen_slots = {}
for c, i in ipairs(chosen) do chosen_slots[c] = slots[i] end
local ids, out = ids_of(chosen_slots), {}
for c, i in ipairs(chosen) do
  if ids[c] then
    out[#out + 1] = ids[c]
    out[#out + 1] = string.format('%.17g', ranks[i])
    out[#out + 1] = string.format('%.17g', floors[i])
  end
end
return out
"""
