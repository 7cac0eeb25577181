-- check.lua: one admission decision for one key (every algorithm).
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 cost
-- Returns: packed doubles of allowed 0|1, remaining, share, leased, recovering 0|1, nowUs, resetUs
-- (struct.pack '<d' each: exact, and a table reply costs Redis more than the decision's arithmetic;
-- packages/redis/src/packed.ts). The caller derives capacity (C·share/U − leased; windows C·base/U)
-- and rate (R·share/U; windows 0) with the same double operations.
-- A denial writes only the denied counter (plus, at most once per drain round or TTL period,
-- keep()'s bookkeeping) and a bucket restarted by a policy change. The token bucket path reads
-- P:l / P:k only when the bucket is (re)created.
--
-- Fast path (above the library: a decision that takes it builds none of the library's closures):
-- a token bucket whose policy entry exists, stored under this policy version and the marker's
-- incarnation, with no share-schedule change due by now (sx1 later or none). Then settle() is one
-- piece; the arithmetic below is settle()'s, store_bucket()'s and the refund record's
-- (lib/refunds.lua rf_note), operation for operation, and the bookkeeping keep()'s, inlined (the
-- model replay test covers both paths). Commands: TIME, MGET (marker, drain generation, policy),
-- HMGET (v, c), HSET (v and c; a denial: c), plus keep()'s PEXPIRE / SADD when due (about once per
-- ttl, and once per drain round, per active key). Anything else falls through to the general path
-- with the same TIME and reads. In a micro-batch (check_batch.lua) ARGV's fields `now` and `g` carry
-- the batch's one TIME and this item's shard reads (marker, drain generation, policy), read once
-- per shard and policy version for the batch; `slow` tells the batch that the general path ran
-- (it may have created the marker or the policy entry: read them again).
local now, g_ = ARGV.now, ARGV.g
if not now then
  local t_ = redis.call('TIME')
  now = tonumber(t_[1]) * 1000000 + tonumber(t_[2])
end
if not g_ then g_ = redis.call('MGET', KEYS[1], KEYS[2], KEYS[4]) end
local h_ = false
if g_[1] and g_[3] then
  local pk, alg, C, R, _, base, _, eps, D, ttl = cmsgpack.unpack(g_[3])
  if alg == 'token_bucket' then
    h_ = redis.call('HMGET', KEYS[3], 'v', 'c')
    local m = g_[1]
    if h_[1] and h_[2] then
      local T, p, n, d, bk, dg = cmsgpack.unpack(h_[2])
      local v = { cmsgpack.unpack(h_[1]) }
      local born = T
      if type(T) == 'number' and T < 0 then born = 0 end
      local mine
      if type(T) == 'number' then
        if T >= 0 then mine = string.format('%d:%d', T, T) else mine = string.format('%d:0', -T) end
      end
      if v[1] == pk and mine == m and (v[6] == 0 or v[6] > now) then
        local tk, ts, s, o = v[2], v[3], v[4] + base, v[5]
        local ts0 = ts
        local dt = 0
        if now > ts then dt = now - ts end
        tk = math.min(C * s / 1000000 - o, tk + R * s / 1000000 * dt / 1000000)
        if now > ts then ts = now end
        local cost = tonumber(ARGV[2])
        local allowed = 0
        local hd = C * s / 1000000 - o - tk
        if tk >= cost then
          allowed = 1
          tk = tk - cost
          p = p + cost
          -- lib/refunds.lua inlined, in place on v's pairs (d_j = ts0 − t_j, m_j): rf_note(ts − 1,
          -- headroom before the admission), then every d_j re-based on the new ts (an admission
          -- raises the headroom: store_bucket's rf_note_low would note nothing). Integral µs: the
          -- same numbers as decoding to t_j, noting, and encoding at the new ts.
          local q = 0
          if hd > 0 then
            q = math.floor(hd * 1000)
            if q / 1000 > hd then q = q - 1 end
          end
          local nr, at = #v, ts - 1
          if not (nr > 6 and ts0 - v[nr - 1] >= at and v[nr] <= q) then
            while nr > 6 and v[nr] >= q do
              if ts0 - v[nr - 1] > at then at = ts0 - v[nr - 1] end
              v[nr], v[nr - 1] = nil, nil
              nr = nr - 2
            end
            v[nr + 1], v[nr + 2] = ts0 - at, q
            if nr + 2 > 14 then -- 6 + 2 · RF_MAX
              v[10] = v[8]
              table.remove(v, 7)
              table.remove(v, 7)
            end
          end
          local shift = ts - ts0
          if shift ~= 0 then
            for j = 7, #v, 2 do v[j] = v[j] + shift end
          end
          v[2], v[3] = tk, ts
        else
          d = d + cost
        end
        -- lib/keep.lua keep() inlined, so a key whose TTL or change-feed entry is due stays on
        -- this path too.
        local gen = tonumber(g_[2] or '0')
        local due = not bk or now >= bk * 1000000 + (ttl - 1000) * 1000
        local sadd = due or dg ~= gen
        if sadd then
          if due then bk = math.floor(now / 1000000) end
          dg = gen
          local kb = KEYS[3]
          local pre = string.sub(kb, 1, string.find(kb, '}', 1, true) + 1)
          local kd = pre .. 'dirty'
          redis.call('SADD', kd, (string.gsub(string.sub(kb, #pre + 1, -3), ':', '|', 1)))
          redis.call('PEXPIRE', kd, ttl, 'NX')
          redis.call('PEXPIRE', kd, ttl, 'GT')
        end
        if allowed == 1 then
          redis.call('HSET', KEYS[3], 'v', cmsgpack.pack(unpack(v)), 'c', cmsgpack.pack(T, p, n, d, bk, dg))
        else
          redis.call('HSET', KEYS[3], 'c', cmsgpack.pack(T, p, n, d, bk, dg))
        end
        if due then redis.call('PEXPIRE', KEYS[3], 2 * ttl) end
        local rec = 0
        if now < born + D + 2 * eps then rec = 1 end
        return struct.pack('<ddddddd', allowed, tk, s, o, rec, now, 0)
      end
    end
  end
end
ARGV.slow = true
-- @lib
local marker, gen = g_[1], g_[2] or '0'
if not marker then marker = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now) end
local P = read_policy(KEYS[4], g_[3], KEYS[3])
local cost_str = ARGV[2]
local cost = tonumber(cost_str)
local _, born = marker_parts(marker)
local region = ARGV[1]
if P.rate_alg then
  local R = load_rec(KEYS[3], region, marker, P, { 'v', 'x' })
  local B = load_bucket(R, P, marker, born, now)
  local allowed = 0
  if B.tk >= cost then
    allowed = 1
    B.tk = B.tk - cost
    count(R, 'p', cost)
    store_bucket(B, P)
  else
    count(R, 'd', cost)
    -- A bucket restarted by a policy change is stored even on a denial, so it refills.
    if B.restarted then store_bucket(B, P) end
  end
  keep(R, P, now, gen)
  flush(R)
  local rec = 0
  if B.recovering then rec = 1 end
  return struct.pack('<ddddddd', allowed, B.tk, B.s, B.o, rec, now, 0)
end
local R = load_rec(KEYS[3], region, marker, P, { 'w', 'q' })
local ok, rem, reset, commit = decide_window(R, P, born, now, cost, cost_str)
local allowed = 0
if ok then
  allowed = 1
  count(R, 'p', cost)
  commit()
else
  count(R, 'd', cost)
end
keep(R, P, now, gen)
flush(R)
local rec, share = 0, P.base
if now < rec_end(born, P) then rec, share = 1, 0 end
return struct.pack('<ddddddd', allowed, rem, share, 0, rec, now, reset)
