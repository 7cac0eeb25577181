-- lib/core.lua: numbers and formatting, policy, incarnation marker and
-- recovery, capacity and rate. First of the library files (lua/lib/*.lua) that
-- the loader (packages/redis/src/scripts.ts, LIB_FILES) concatenates
-- in a fixed order and inserts into every script; not a script on its own.
-- Each file may use only what the files before it (and itself, above) define.
--
-- The library mirrors @geoquota/core operation for operation: same formulas, same
-- order of floating-point operations, so a script and the model fed the same
-- TIME produce the same doubles. Numbers are written with %.17g (exact round
-- trip); Lua's tostring would keep only 14 digits.
--
-- Per-key scripts share one layout (gq:inc, gq:dirty, gq:dg, gq:rid stand for the
-- tenant's shard keys gq:{s<k>}:inc etc.; every key of a call shares the hash tag {s<k>},
-- so each script touches one Redis Cluster slot):
--   KEYS[1] gq:inc  KEYS[2] gq:dirty  KEYS[3] P:b  KEYS[4] P:c  KEYS[5] P:l  KEYS[6] P:k  KEYS[7] P:z
--   KEYS[8] gq:dg
--   ARGV[1] region  ARGV[2..12] policy (see read_policy)  ARGV[13..] script-specific
--
-- Cost matters here: the hot scripts (check, compound, refund, leases) run
-- once per decision and Redis is single-threaded, so the common path avoids
-- redis.call()s (TTL refresh and change feed only when due, see keep()),
-- %.17g formatting of integers, and tables it does not need.

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

-- Policy of one key, 11 values from ARGV[off+1]:
-- algorithm, C, r, window µs, base ppm, floor ppm, policy version, ε µs, D µs, ttl ms, dirty member.
-- The policy version (the bucket fingerprint `pv`) ends in ':L' when leased mode is configured for
-- this token bucket (@geoquota/core bucketVersion): then recovery holds the share at 0 until
-- born + D + ε (DESIGN §4).
local function read_policy(a, off)
  return {
    lm = string.sub(a[off + 7], -2) == ':L',
    alg = a[off + 1], C = tonumber(a[off + 2]), R = tonumber(a[off + 3]), W = tonumber(a[off + 4]),
    base = tonumber(a[off + 5]), floor = tonumber(a[off + 6]), pv = a[off + 7],
    eps = tonumber(a[off + 8]), D = tonumber(a[off + 9]), ttl = tonumber(a[off + 10]), member = a[off + 11],
    rate_alg = (a[off + 1] == 'token_bucket' or a[off + 1] == 'gcra'),
  }
end

-- The incarnation marker `<id>:<bornUs>`; missing means state loss: a new
-- incarnation born now, in recovery until born + D + 2ε (DESIGN §4). Also
-- returns the change feed's drain generation `gq:dg` (one MGET for both;
-- '0' before the first drain).
local function ensure_marker(kinc, kdg, now)
  local r = redis.call('MGET', kinc, kdg)
  local m = r[1]
  if not m then
    m = string.format('%d:%d', now, now)
    redis.call('SET', kinc, m)
  end
  return m, r[2] or '0'
end

local function marker_parts(m)
  local c = string.find(m, ':', 1, true)
  return string.sub(m, 1, c - 1), tonumber(string.sub(m, c + 1))
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
