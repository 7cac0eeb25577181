-- lib/core.lua: numbers and formatting, key names, the policy registry, incarnation marker and
-- its tag, recovery, capacity and rate. First of the library files (lua/lib/*.lua) that the
-- loader (packages/redis/src/scripts.ts, LIB_FILES) concatenates in a fixed order and inserts
-- into every script; not a script on its own. Each file may use only what the files before it
-- (and itself, above) define.
--
-- The library mirrors @geoquota/core operation for operation: same formulas, same order of
-- floating-point operations, so a script and the model fed the same TIME produce the same
-- doubles. Stored numbers are msgpack (cmsgpack: an integral double as an integer, any other as
-- a float32 when that is exact, else a float64), an exact round trip that is neither formatted
-- nor parsed as text; replies still carry non-integers as %.17g (Lua's tostring keeps 14 digits).
--
-- Per-key scripts share one layout of 4 KEYS (gq:inc, gq:dg, gq:pv stand for the tenant's shard
-- keys gq:{s<k>}:inc, gq:{s<k>}:dg, gq:{s<k>}:pv:<version>; every key of a call shares the hash
-- tag {s<k>}, so each script touches one Redis Cluster slot):
--   KEYS[1] gq:inc  KEYS[2] gq:dg  KEYS[3] P:b  KEYS[4] gq:pv (the key's policy, read_policy)
--   ARGV[1] region  ARGV[2..] script-specific
-- The key's other keys (P:l, P:k, P:z, P:f, the legacy P:c) and the shard's change feed
-- gq:dirty and policy index gq:pvn are named from P:b in the script (key_of, shard_key): they
-- are in the same slot, read off the hot path, and a declared key costs every call ≈ 2,000
-- instructions (bench section 12).
--
-- Cost matters here: the hot scripts (check, compound, refund, leases) run once per decision and
-- Redis is single-threaded, so the common path avoids redis.call()s (TTL refresh and change feed
-- only when due, see keep()), text numbers, and tables it does not need.

local U = 1000000

local function fmt(x)
  return string.format('%.17g', x)
end

-- Integral µs times (TIME, deadlines, expiries; all < 2^53): %d is exact and
-- far cheaper than %.17g.
local function fmt_int(x)
  if x == math.floor(x) then return string.format('%d', x) end
  return fmt(x)
end

-- A reply number: integral values go back as Redis integers (exact below
-- 2^53, no formatting), the rest as %.17g strings (Redis would truncate).
local function reply_num(x)
  if x == math.floor(x) and x > -9e15 and x < 9e15 then return x end
  return fmt(x)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

---------------------------------------------------------------- key names

-- P:b is gq:{s<k>}:<tenant>:<resource>:b; the key's other keys differ in the last letter.
local function key_of(kb, letter)
  return string.sub(kb, 1, -2) .. letter
end

-- A shard key of P:b's shard: gq:{s<k>}:<name>.
local function shard_key(kb, name)
  return string.sub(kb, 1, string.find(kb, '}', 1, true) + 1) .. name
end

-- The key's change-feed member `tenant|resource` (names hold no ':' and no '|').
local function member_of(kb)
  return (string.gsub(string.sub(kb, string.find(kb, '}', 1, true) + 2, -3), ':', '|', 1))
end

---------------------------------------------------------------- policy

-- The key's policy, cached in the shard by version instead of a dozen arguments per call
-- (issue 24). KEYS[4] is gq:{s<k>}:pv:<version>, version = fingerprint|window µs|ε µs|D µs|ttl ms
-- (fingerprint: @geoquota/core bucketVersion, `alg:C:r:windowMs:base:floor`, plus `:L` when the
-- recovery lease hold applies: then recovery holds the share at 0 until born + D + ε, DESIGN §4);
-- its value is msgpack k, algorithm, C, r, window µs, base ppm, floor ppm, ε, D, ttl, fingerprint,
-- where k numbers the version in its shard: gq:pvn holds `#` (the last k) and k → the same entry,
-- so the policy a bucket was stored under (P:b keeps only k) can be read back. A missing entry is
-- created from the key's name (`readonly`: not created, k false). The numbers in the name are
-- JavaScript's shortest round-trip text, which tonumber reads back to the same doubles.
local function policy_from(e)
  local k, alg, C, R, W, base, floor, eps, D, ttl, pv = cmsgpack.unpack(e)
  return {
    k = k, alg = alg, C = C, R = R, W = W, base = base, floor = floor, eps = eps, D = D, ttl = ttl, pv = pv,
    lm = string.sub(pv, -2) == ':L', rate_alg = (alg == 'token_bucket' or alg == 'gcra'),
  }
end

local function read_policy(kpv, e, kb, readonly)
  if e then return policy_from(e) end
  local at = string.find(kpv, ':pv:', 1, true)
  local pv, w, eps, d, ttl
  if at then pv, w, eps, d, ttl = string.match(string.sub(kpv, at + 4), '^([^|]+)|([^|]+)|([^|]+)|([^|]+)|([^|]+)$') end
  local alg, c, r, base, floor
  if pv then alg, c, r, base, floor = string.match(pv, '^([^:]+):([^:]+):([^:]+):[^:]+:([^:]+):([^:]+)') end
  if not alg then error('GQ_ERR_BAD_ARGUMENT: policy key ' .. kpv) end
  local k = false
  local kpvn = shard_key(kb, 'pvn')
  if not readonly then k = redis.call('HINCRBY', kpvn, '#', 1) end
  e = cmsgpack.pack(k, alg, tonumber(c), tonumber(r), tonumber(w), tonumber(base), tonumber(floor),
    tonumber(eps), tonumber(d), tonumber(ttl), pv)
  if not readonly then
    redis.call('SET', kpv, e)
    redis.call('HSET', kpvn, k, e)
  end
  return policy_from(e)
end

-- The policy a bucket was stored under, by its number (nil when the index lost it).
local function policy_by_number(kb, k)
  local e = redis.call('HGET', shard_key(kb, 'pvn'), k)
  if e then return policy_from(e) end
  return nil
end

---------------------------------------------------------------- incarnation

-- The incarnation marker `<id>:<bornUs>`; missing means state loss: a new incarnation born now,
-- in recovery until born + D + 2ε (DESIGN §4). One MGET also returns the change feed's drain
-- generation gq:dg ('0' before the first drain) and the policy entry (nil: not yet created).
local function ensure_marker(kinc, kdg, kpv, now)
  local r = redis.call('MGET', kinc, kdg, kpv)
  local m = r[1]
  if not m then
    m = string.format('%d:%d', now, now)
    redis.call('SET', kinc, m)
  end
  return m, r[2] or '0', r[3]
end

local function marker_parts(m)
  local c = string.find(m, ':', 1, true)
  return string.sub(m, 1, c - 1), tonumber(string.sub(m, c + 1))
end

-- What P:b stores of a marker (its incarnation tag, lib/keep.lua): markers are `<id>:<id>`
-- (born at creation) or `<id>:0` (a fresh region), integers below 2^53 written with %d (every
-- script and initFreshRegion write them so): the id as a number, negated for the fresh form
-- (9 bytes of msgpack instead of the 33-byte string). Any other marker is kept as its string.
local function tag_of(m)
  local c = string.find(m, ':', 1, true)
  local a, b = string.sub(m, 1, c - 1), string.sub(m, c + 1)
  local id = tonumber(a)
  if id and id >= 0 and id < 9007199254740992 and string.format('%d', id) == a then
    if b == a then return id end
    if b == '0' and id > 0 then return -id end
  end
  return m
end

-- Whether tag T stands for marker m (exact: the marker text is rebuilt from the tag).
local function tag_is(T, m)
  if type(T) ~= 'number' then return T == m end
  if T >= 0 then return string.format('%d:%d', T, T) == m end
  return string.format('%d:0', -T) == m
end

local function rec_end(born, P)
  return born + P.D + 2 * P.eps
end

-- End of the recovery lease hold (share 0 before it); without leased mode, the birth (no effect).
local function hold_end(born, P)
  if P.lm then return born + P.D + P.eps end
  return born
end

local function full_refill_us(P)
  if P.R > 0 then return P.C * 1000000 / P.R end
  return math.huge
end

local function cap_of(P, s, o)
  return P.C * s / U - o
end

local function rate_of(P, s)
  return P.R * s / U
end
