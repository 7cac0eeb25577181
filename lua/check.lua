-- check.lua: one admission decision for one key (every algorithm).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 cost
-- Returns: {allowed 0|1, remaining (integer or %.17g string), share, leased, recovering 0|1, nowUs,
--           resetUs}
-- The caller derives capacity (C·share/U − leased; windows C·base/U) and rate (R·share/U; windows 0)
-- with the same double operations, so the script formats no more than it must.
-- A denial writes only the denied counter and the change feed (plus, at most once per drain round
-- or TTL period, keep()'s bookkeeping fields), and a bucket restarted by a policy change. The token bucket
-- path reads P:l / P:k only when the bucket is (re)created.
--
-- Fast path (above the library: a decision that takes it builds none of the library's closures): an
-- existing token bucket of this marker and policy whose keep() fields (xe, de) were recorded, and no
-- share-schedule change due by now (the first `sx` time is later). Then settle() is one piece; the
-- arithmetic below is settle()'s and store_bucket()'s, operation for operation, and the bookkeeping
-- keep()'s, inlined (the model replay test covers both paths). Commands: TIME, MGET, HMGET, HSET,
-- HINCRBY (a denial: no HSET), plus keep()'s PEXPIREs / SADD / HSET when due (about once per ttl per
-- active key). Anything else falls through to the general path with the same TIME.
local t_ = redis.call('TIME')
local now = tonumber(t_[1]) * 1000000 + tonumber(t_[2])
if ARGV[2] == 'token_bucket' then
  local g = redis.call('MGET', KEYS[1], KEYS[8])
  local m = g[1]
  local h = redis.call('HMGET', KEYS[3], 'tk', 'ts', 'inc', 's', 'o', 'sx', 'pv', 'xe', 'dg', 'de', 'rf')
  local first = false
  if h[6] and h[6] ~= '' then first = tonumber(string.match(h[6], '^[^,]+')) end
  if m and h[3] == m and h[7] == ARGV[8] and h[8] and h[10] and (not first or first > now) then
    local C, R, s, o = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(h[4]), tonumber(h[5])
    local tk, ts = tonumber(h[1]), tonumber(h[2])
    local dt = 0
    if now > ts then dt = now - ts end
    tk = math.min(C * s / 1000000 - o, tk + R * s / 1000000 * dt / 1000000)
    if now > ts then ts = now end
    local c = string.find(m, ':', 1, true)
    local cost_str = ARGV[13]
    local cost = tonumber(cost_str)
    local allowed, kind = 0, 'd|'
    local hd = C * s / 1000000 - o - tk
    if tk >= cost then
      allowed, kind = 1, 'p|'
      tk = tk - cost
    end
    local f = kind .. ARGV[1] .. '.' .. string.sub(m, 1, c - 1)
    if #cost_str >= 16 or string.find(cost_str, '[^0-9]')
      or type(redis.pcall('HINCRBY', KEYS[4], f, cost_str)) ~= 'number' then
      redis.call('HINCRBYFLOAT', KEYS[4], f, cost_str)
    end
    if allowed == 1 then
      -- lib/refunds.lua inlined (the library is not built here): rf_decode at the stored ts,
      -- rf_note(ts − 1, headroom before the admission), rf_encode at the new ts (an admission
      -- raises the headroom: store_bucket's rf_note_low would note nothing).
      local ts0 = tonumber(h[2])
      local rf = { ts0, 0 }
      if h[11] then
        -- rf_decode, a pair (d, m) per match: rf_encode writes whole pairs.
        rf = {}
        local k = 0
        for d, x in string.gmatch(h[11], '([^,]+),([^,]+)') do
          rf[k + 1], rf[k + 2] = ts0 - tonumber(d), tonumber(x)
          k = k + 2
        end
      end
      local q = 0
      if hd > 0 then
        q = math.floor(hd * 1000)
        if q / 1000 > hd then q = q - 1 end
      end
      local n, at = #rf, ts - 1
      if not (n > 0 and rf[n - 1] >= at and rf[n] <= q) then
        while n > 0 and rf[n] >= q do
          if rf[n - 1] > at then at = rf[n - 1] end
          rf[n], rf[n - 1] = nil, nil
          n = n - 2
        end
        rf[n + 1], rf[n + 2] = at, q
        if n + 2 > 8 then -- 2 · RF_MAX
          rf[4] = rf[2]
          table.remove(rf, 1)
          table.remove(rf, 1)
        end
      end
      local parts = {}
      for j = 1, #rf, 2 do
        parts[#parts + 1] = string.format('%d,%d', ts - rf[j], rf[j + 1])
      end
      local tsf = '%d'
      if ts ~= math.floor(ts) then tsf = '%.17g' end
      redis.call('HSET', KEYS[3], 'tk', string.format('%.17g', tk), 'ts', string.format(tsf, ts),
        'rf', table.concat(parts, ','))
    end
    -- lib/keep.lua keep() inlined (counted, P:b holds state: its xe/de are set), so a key whose
    -- TTLs or change-feed entry are due (once per ttl per active key) stays on this path too.
    local gen, ttl = g[2] or '0', tonumber(ARGV[11])
    local nt = tonumber(h[8]) - now < ttl * 1000
    local nd = h[9] ~= gen or now >= tonumber(h[10])
    if nt or nd then
      if nt then
        redis.call('PEXPIRE', KEYS[3], 2 * ttl)
        redis.call('PEXPIRE', KEYS[4], 2 * ttl)
      end
      if nd then
        redis.call('SADD', KEYS[2], ARGV[12])
        redis.call('PEXPIRE', KEYS[2], ttl, 'NX')
        redis.call('PEXPIRE', KEYS[2], ttl, 'GT')
      end
      local function fi(x)
        if x == math.floor(x) then return string.format('%d', x) end
        return string.format('%.17g', x)
      end
      local xe_new = fi(now + (2 * ttl - 1000) * 1000)
      local de_new = fi(now + (ttl - 1000) * 1000)
      if nt then
        if nd then
          redis.call('HSET', KEYS[3], 'xe', xe_new, 'dg', gen, 'de', de_new)
        else
          redis.call('HSET', KEYS[3], 'xe', xe_new)
        end
      else
        redis.call('HSET', KEYS[3], 'dg', gen, 'de', de_new)
      end
    end
    local rec = 0
    if now < tonumber(string.sub(m, c + 1)) + tonumber(ARGV[10]) + 2 * tonumber(ARGV[9]) then rec = 1 end
    local rtk = tk
    if not (tk == math.floor(tk) and tk > -9e15 and tk < 9e15) then rtk = string.format('%.17g', tk) end
    return { allowed, rtk, s, o, rec, now, 0 }
  end
end
-- @lib
local P = read_policy(ARGV, 1)
local cost_str = ARGV[13]
local cost = tonumber(cost_str)
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
local region = ARGV[1]
if P.rate_alg then
  local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  local allowed = 0
  if B.tk >= cost then
    allowed = 1
    B.tk = B.tk - cost
    count(KEYS[4], 'p', region, id, cost_str)
    store_bucket(B, P)
  else
    count(KEYS[4], 'd', region, id, cost_str)
    -- A bucket restarted by a policy change is stored even on a denial, so it refills.
    if B.restarted then store_bucket(B, P) end
  end
  keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, B.has, true)
  local rec = 0
  if B.recovering then rec = 1 end
  return { allowed, reply_num(B.tk), B.s, reply_num(B.o), rec, now, 0 }
end
local ok, rem, reset, commit, bk = decide_window(KEYS[3], KEYS[7], P, marker, born, now, cost, cost_str)
local allowed = 0
if ok then
  allowed = 1
  count(KEYS[4], 'p', region, id, cost_str)
  commit()
else
  count(KEYS[4], 'd', region, id, cost_str)
end
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, bk[1], bk[2], bk[3], bk[4], true)
local rec, share = 0, P.base
if now < rec_end(born, P) then rec, share = 1, 0 end
return { allowed, reply_num(rem), share, 0, rec, now, reset }
