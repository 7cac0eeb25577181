-- lib/keep.lua: the key's record in P:b (incarnation tag, own CRDT counters, bookkeeping), the
-- other replicas' counters, the layout before issue 24 (read and converted), keep(), flush().
--
-- P:b is one small hash (docs/internals.md; a listpack while every value is ≤ 64 bytes):
--   c  msgpack T, p, n, d, bk, dg: T the incarnation tag (core.lua tag_of) the key's state and
--      own counters belong to; p, n, d this region's CRDT counters of replica <region>.<id of T>
--      (admitted, refunded/returned, denied cost); bk, dg the bookkeeping (keep()).
--   v, x  rate algorithms: the bucket and its share schedule (lib/bucket.lua)
--   w  fixed/sliding window: window index, count, previous count (lib/windows.lua)
--   q  sliding log: the member sequence (the log is P:z)
--   p|<replica>, n|<replica>, d|<replica>: every other replica's counters (other regions, this
--      region's earlier incarnations), merged by max (loan_merge.lua), values as received.
-- The state fields carry no tag of their own: they belong to T. A script that finds T is not the
-- current marker's moves the own counters to named fields (a finished replica's), starts the new
-- replica at 0, and drops v, x, w and P:z, which every loader would treat as missing anyway
-- (state of another incarnation is never used); the log's sequence q continues, as in the model.
-- A script reads the record once (load_rec), changes it in memory and writes it once (flush).

-- P:b's fields before issue 24 (one text field per number; counters in P:c).
local LEGACY_FIELDS = { 'tk', 'ta', 'ts', 'inc', 's', 'o', 'sx', 'pv', 'rf', 'w', 'n', 'pn', 'q', 'xe', 'dg', 'de' }

-- The counter field of this region's replica of incarnation tag T.
local function replica_field(kind, region, T)
  local id
  if type(T) == 'number' then
    id = string.format('%d', math.abs(T))
  else
    id = string.sub(T, 1, string.find(T, ':', 1, true) - 1)
  end
  return kind .. '|' .. region .. '.' .. id
end

local function csv_numbers(s)
  local out = {}
  if s and s ~= '' then
    for x in string.gmatch(s, '[^,]+') do out[#out + 1] = tonumber(x) end
  end
  return out
end

-- A key of the layout before issue 24 (P:b text fields, counters in P:c), converted exactly into
-- R (nothing written here: flush() writes the new fields, removes the old ones and P:c). A key of
-- neither layout is new: the current marker's, counters 0, no bookkeeping yet.
local function convert_legacy(R, marker, P)
  local old = {}
  local raw = redis.call('HGETALL', R.kb)
  for i = 1, #raw, 2 do old[raw[i]] = raw[i + 1] end
  local craw = redis.call('HGETALL', key_of(R.kb, 'c'))
  R.T = tag_of(old.inc or marker)
  R.p, R.n, R.d, R.bk, R.dg = 0, 0, 0, false, false
  R.cdirty = true
  if #raw == 0 and #craw == 0 then return end
  R.legacy = true
  for i = 1, #craw, 2 do
    local f, x = craw[i], craw[i + 1]
    local kind = string.sub(f, 1, 1)
    if (kind == 'p' or kind == 'n' or kind == 'd') and f == replica_field(kind, R.region, R.T) then R[kind] = tonumber(x) else R.named[f] = x end
  end
  local val = old.tk or old.ta
  if val and old.ts and old.pv and old.inc then
    local sx = csv_numbers(old.sx)
    local k = old.pv
    if old.pv == P.pv and P.k then k = P.k end
    -- The share relative to the base of the version it was stored under (old.pv: same base when k is P.k).
    -- (A fingerprint that does not parse is no policy's: the bucket restarts empty, as it did.)
    local base = tonumber(string.match(old.pv, '^[^:]+:[^:]+:[^:]+:[^:]+:([^:]+):')) or 0
    local v = { k, tonumber(val), tonumber(old.ts), tonumber(old.s) - base, tonumber(old.o), sx[1] or 0 }
    if old.rf then
      for _, x in ipairs(csv_numbers(old.rf)) do v[#v + 1] = x end
    else
      -- A bucket stored before `rf` existed: nothing known before ts, a barrier there.
      v[#v + 1], v[#v + 2] = 0, 0
    end
    R.put.v = cmsgpack.pack(unpack(v))
    if #sx > 0 then R.put.x = cmsgpack.pack(unpack(sx)) end
  end
  if old.w and old.n and old.inc then
    R.put.w = cmsgpack.pack(tonumber(old.w), tonumber(old.n), tonumber(old.pn) or 0)
  end
  if old.q then R.put.q = cmsgpack.pack(tonumber(old.q)) end
end

-- The own counters of a finished incarnation become named fields (max with a copy gossip may
-- have brought back); a named copy of the new replica's (none, but a converted key's) is folded
-- in; the state fields and the log of the finished incarnation are dropped.
local function retag(R, marker)
  local kinds = { 'p', 'n', 'd' }
  local T = tag_of(marker)
  local fields = {}
  for i = 1, 3 do
    fields[i] = replica_field(kinds[i], R.region, R.T)
    fields[i + 3] = replica_field(kinds[i], R.region, T)
  end
  local cur = redis.call('HMGET', R.kb, unpack(fields))
  for i = 1, 3 do
    local mine = R[kinds[i]]
    if mine > (tonumber(R.named[fields[i]] or cur[i]) or 0) then R.named[fields[i]] = fmt(mine) end
    local f = fields[i + 3]
    R[kinds[i]] = tonumber(R.named[f] or cur[i + 3]) or 0
    if R.named[f] or cur[i + 3] then
      R.named[f] = nil
      R.drop[f] = true
    end
  end
  R.T = T
  R.cdirty = true
  for _, f in ipairs({ 'v', 'x', 'w' }) do
    R.f[f] = false
    R.put[f] = nil
    R.drop[f] = true
  end
  R.drop_log = true
end

-- Reads P:b's record and the state fields named in `fields` (R.f[name]: the stored bytes, or
-- false), converting a key of the old layout on the way; starts a new incarnation's record when
-- the stored tag is not the marker's.
local function load_rec(kb, region, marker, P, fields)
  local h = redis.call('HMGET', kb, 'c', unpack(fields))
  local R = { kb = kb, region = region, f = {}, put = {}, drop = {}, named = {} }
  if h[1] then
    R.T, R.p, R.n, R.d, R.bk, R.dg = cmsgpack.unpack(h[1])
    for i = 1, #fields do R.f[fields[i]] = h[i + 1] or false end
  else
    convert_legacy(R, marker, P)
    for i = 1, #fields do R.f[fields[i]] = R.put[fields[i]] or false end
  end
  if not tag_is(R.T, marker) then retag(R, marker) end
  return R
end

-- Adds to an own CRDT counter (the model's addition of doubles).
local function count(R, kind, amount)
  R[kind] = R[kind] + amount
  R.cdirty = true
end

-- Hot-path bookkeeping after a script that wrote the key (not modelled: it never changes a
-- decision). bk is the second (floored) of the key's last TTL refresh, made together with a
-- change-feed SADD: P:b then got TTL 2·ttl and gq:dirty an expiry ≥ that SADD + ttl (PEXPIRE
-- NX, then GT). So while now < bk + ttl − 1 s (µs: bk·10^6 + (ttl − 1000)·1000; the second of
-- slack covers the ms clock of PEXPIRE) P:b has ≥ ttl left and the key is still in the change
-- feed unless a drain popped it, which moved gq:dg on: dg, the generation at the key's last
-- SADD, then differs. Due then: both, or the SADD alone; about once per ttl and once per drain
-- round per active key, not per decision. The TTL is set by flush(), after the write.
local function keep(R, P, now, gen)
  local g = tonumber(gen)
  local due = not R.bk or now >= R.bk * 1000000 + (P.ttl - 1000) * 1000
  if not due and R.dg == g then return end
  if due then
    R.expire = 2 * P.ttl
    R.bk = math.floor(now / 1000000)
  end
  local kd = shard_key(R.kb, 'dirty')
  redis.call('SADD', kd, member_of(R.kb))
  redis.call('PEXPIRE', kd, P.ttl, 'NX')
  redis.call('PEXPIRE', kd, P.ttl, 'GT')
  R.dg = g
  R.cdirty = true
end

-- Scripts off the hot path: the change feed always (the set gets a TTL when a member is new) and
-- P:b's TTL refreshed unconditionally (touch; 2·ttl, so no PEXPIRE ever shortens another's).
local function mark_dirty(kb, P)
  local kd = shard_key(kb, 'dirty')
  if redis.call('SADD', kd, member_of(kb)) == 1 then
    redis.call('PEXPIRE', kd, P.ttl, 'NX')
    redis.call('PEXPIRE', kd, P.ttl, 'GT')
  end
end

local function touch(R, P)
  R.expire = 2 * P.ttl
end

-- Writes what changed in one HSET (the record `c` whenever the key is written and it changed),
-- removes dropped fields (and a converted key's old fields and P:c), then sets the TTL.
local function flush(R)
  local a = {}
  if R.cdirty then
    a[1], a[2] = 'c', cmsgpack.pack(R.T, R.p, R.n, R.d, R.bk, R.dg)
  end
  for f, x in pairs(R.put) do
    a[#a + 1], a[#a + 2] = f, x
  end
  for f, x in pairs(R.named) do
    a[#a + 1], a[#a + 2] = f, x
  end
  if #a > 0 then redis.call('HSET', R.kb, unpack(a)) end
  local d = {}
  for f in pairs(R.drop) do
    if not R.put[f] then d[#d + 1] = f end
  end
  if R.legacy then
    for _, f in ipairs(LEGACY_FIELDS) do
      if not R.put[f] then d[#d + 1] = f end
    end
    redis.call('DEL', key_of(R.kb, 'c'))
  end
  if #d > 0 then redis.call('HDEL', R.kb, unpack(d)) end
  if R.drop_log then redis.call('DEL', key_of(R.kb, 'z')) end
  if R.expire then redis.call('PEXPIRE', R.kb, R.expire) end
end

-- The named counters held in P:b and the own ones (nonzero) as fields, for a reader (inspect).
local function counter_fields(R)
  local out = {}
  local raw = redis.call('HGETALL', R.kb)
  for i = 1, #raw, 2 do
    local f = raw[i]
    if string.sub(f, 2, 2) == '|' and not R.named[f] and not R.drop[f] then
      out[#out + 1], out[#out + 2] = f, raw[i + 1]
    end
  end
  for f, x in pairs(R.named) do
    out[#out + 1], out[#out + 2] = f, x
  end
  for _, kind in ipairs({ 'p', 'n', 'd' }) do
    if R[kind] ~= 0 then
      out[#out + 1], out[#out + 2] = replica_field(kind, R.region, R.T), fmt(R[kind])
    end
  end
  return out
end
