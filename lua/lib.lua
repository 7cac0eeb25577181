-- lib.lua: shared functions, prepended to every script by the loader
-- (packages/limiter/src/redis/scripts.ts); not a script on its own.
-- It mirrors @geoquota/lease operation for operation: same formulas, same
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
-- this token bucket (@geoquota/lease bucketVersion): then recovery holds the share at 0 until
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

-- Change feed for the gossip daemon (scripts off the hot path: always SADD);
-- the set gets a TTL when a member is new.
local function mark_dirty(kd, member, ttl)
  if redis.call('SADD', kd, member) == 1 then
    redis.call('PEXPIRE', kd, ttl, 'NX')
    redis.call('PEXPIRE', kd, ttl, 'GT')
  end
end

-- P:b and P:c always get TTL 2·ttl (never P.ttl alone): every PEXPIRE of
-- either key then sets an expiry at least as late as any earlier one, so the
-- record keep() trusts (`xe`) can never be shortened by another script.
local function ttl2(P)
  return 2 * P.ttl
end

-- Scripts off the hot path: refresh both TTLs unconditionally.
local function touch(kb, kc, P)
  redis.call('PEXPIRE', kb, ttl2(P))
  redis.call('PEXPIRE', kc, ttl2(P))
end

-- Adds to an own CRDT counter. HINCRBY for a plain integer amount (cheaper:
-- no long-double parse/format, replicated as is); HINCRBYFLOAT when the
-- amount is fractional or the stored value is not an integer (a fractional
-- cost happened, or a merge wrote e.g. 1e+21). Same sums as the model while
-- they stay integers below 2^53. TTLs: keep() / touch().
local function count(kc, kind, region, id, amount_str)
  local f = kind .. '|' .. region .. '.' .. id
  if #amount_str < 16 and not string.find(amount_str, '[^0-9]') then
    if type(redis.pcall('HINCRBY', kc, f, amount_str)) == 'number' then return end
  end
  redis.call('HINCRBYFLOAT', kc, f, amount_str)
end

-- Hot-path bookkeeping of one key after a decision (TTLs and change feed;
-- not modelled, it never changes a decision). P:b keeps three fields:
--   xe: a lower bound (minus 1 s of slack for PEXPIRE's ms clock) of the
--       expiry last set on BOTH P:b and P:c, recorded only by a script that
--       wrote P:c (so both existed). While xe − now ≥ ttl, both keys still
--       outlive this write by ≥ ttl = C/r + D + 3ε + 1 s (DESIGN §4) and the
--       two PEXPIREs are skipped; otherwise both are set to 2·ttl, i.e. about
--       once per ttl per active key instead of on every decision.
--   dg, de: the drain generation `gq:dg` at this key's last SADD to
--       gq:dirty, and a lower bound of gq:dirty's expiry then. While gq:dg is
--       unchanged (no drain popped members since) and now < de (the set has
--       not expired), the key is still a member, so the SADD is skipped: the
--       change feed costs one SADD per key per drain round, not per decision.
-- has_b: P:b holds state (written by this script or before), so the fields
-- can be kept there; a denial on a missing bucket writes no P:b (it SADDs and
-- refreshes every time, as before). counted: this script wrote P:c.
local function keep(kb, kc, kd, P, now, gen, xe, dg, de, has_b, counted)
  local nt = not counted or not xe or tonumber(xe) - now < P.ttl * 1000
  local nd = dg ~= gen or not de or now >= tonumber(de)
  if not nt and not nd then return end
  if nt then
    redis.call('PEXPIRE', kb, ttl2(P))
    redis.call('PEXPIRE', kc, ttl2(P))
  end
  if nd then
    redis.call('SADD', kd, P.member)
    redis.call('PEXPIRE', kd, P.ttl, 'NX')
    redis.call('PEXPIRE', kd, P.ttl, 'GT')
  end
  if not has_b then return end
  local xe_new = fmt_int(now + (ttl2(P) - 1000) * 1000)
  local de_new = fmt_int(now + (P.ttl - 1000) * 1000)
  if nt and counted then
    if nd then
      redis.call('HSET', kb, 'xe', xe_new, 'dg', gen, 'de', de_new)
    else
      redis.call('HSET', kb, 'xe', xe_new)
    end
  elseif nd then
    redis.call('HSET', kb, 'dg', gen, 'de', de_new)
  end
end

---------------------------------------------------------------- loan records

local function parse_loan(s)
  local a, b, c = string.match(s, '^([^:]+):([^:]+):([^:]+)$')
  return { u = tonumber(a), d = tonumber(b), s = tonumber(c) }
end

local function loan_str(l)
  return fmt(l.u) .. ':' .. fmt(l.d) .. ':' .. fmt(l.s)
end

-- P:l as tables: out[borrower] = staircase, granted[borrower], recv[lender], ret[lender], sq.
local function read_book(kl)
  local book = { out = {}, granted = {}, recv = {}, ret = {}, sq = 0 }
  local raw = redis.call('HGETALL', kl)
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local kind, who = string.sub(f, 1, 1), string.sub(f, 3)
    if kind == 'o' then
      local list = {}
      for e in string.gmatch(v, '[^,]+') do list[#list + 1] = parse_loan(e) end
      book.out[who] = list
    elseif kind == 'g' then
      book.granted[who] = parse_loan(v)
    elseif kind == 'i' then
      book.recv[who] = parse_loan(v)
    elseif kind == 'r' then
      book.ret[who] = tonumber(v)
    elseif f == 'sq' then
      book.sq = tonumber(v)
    end
  end
  return book
end

-- Rewrites P:l from the tables (small: one field per peer) with a TTL that
-- outlives every record: a key holding a loan never expires before it lapses.
local function write_book(kl, book, P, now)
  redis.call('DEL', kl)
  local args = { 'sq', fmt(book.sq) }
  local maxd = 0
  local function seen(l)
    if l.d > maxd then maxd = l.d end
  end
  for b, list in pairs(book.out) do
    local parts = {}
    for i = 1, #list do
      parts[i] = loan_str(list[i])
      seen(list[i])
    end
    if #parts > 0 then
      args[#args + 1] = 'o|' .. b
      args[#args + 1] = table.concat(parts, ',')
    end
  end
  for b, l in pairs(book.granted) do
    args[#args + 1] = 'g|' .. b
    args[#args + 1] = loan_str(l)
    seen(l)
  end
  for j, l in pairs(book.recv) do
    args[#args + 1] = 'i|' .. j
    args[#args + 1] = loan_str(l)
    seen(l)
  end
  for j, s in pairs(book.ret) do
    args[#args + 1] = 'r|' .. j
    args[#args + 1] = fmt(s)
  end
  redis.call('HSET', kl, unpack(args))
  local ttl = P.ttl
  local need = math.ceil((maxd + 2 * P.eps - now) / 1000) + 1000
  if need > ttl then ttl = need end
  redis.call('PEXPIRE', kl, ttl)
end

local function reserved_at(list, t, eps)
  local m = 0
  if list then
    for i = 1, #list do
      local e = list[i]
      if t < e.d + eps and e.u > m then m = e.u end
    end
  end
  return m
end

-- Drops what can no longer change the share (callers settle first).
local function drop_lapsed(book, now, eps)
  for b, list in pairs(book.out) do
    local kept = {}
    for i = 1, #list do
      if now < list[i].d + eps then kept[#kept + 1] = list[i] end
    end
    if #kept > 0 then book.out[b] = kept else book.out[b] = nil end
  end
  for j, l in pairs(book.recv) do
    if now >= l.d - eps and l.s > (book.ret[j] or 0) then book.recv[j] = nil end
  end
end

---------------------------------------------------------------- leases (P:k)

local function read_leases(kk)
  local leases = {}
  local raw = redis.call('HGETALL', kk)
  for i = 1, #raw, 2 do
    local g, e = string.match(raw[i + 1], '^([^:]+):([^:]+)$')
    leases[raw[i]] = { g = tonumber(g), e = tonumber(e) }
  end
  return leases
end

---------------------------------------------------------------- share schedule

-- s(t) of docs/internals.md, clamped to [0, U].
local function share_at(book, P, rend, hold, t)
  if t < rend then
    if t < hold then return 0 end
    return math.min(P.floor, P.base)
  end
  local s = P.base
  for _, list in pairs(book.out) do s = s - reserved_at(list, t, P.eps) end
  for j, l in pairs(book.recv) do
    if l.s > (book.ret[j] or 0) and t < l.d - P.eps then s = s + l.u end
  end
  if s < 0 then s = 0 end
  if s > U then s = U end
  return s
end

local function outstanding_at(leases, t)
  local o = 0
  for _, l in pairs(leases) do
    if t < l.e then o = o + l.g end
  end
  return o
end

-- Every instant where s(t) or the leased amount may change without a script (unsorted).
local function schedule_points(book, leases, P, rend, hold)
  local pts = { rend, hold }
  for _, list in pairs(book.out) do
    for i = 1, #list do pts[#pts + 1] = list[i].d + P.eps end
  end
  for j, l in pairs(book.recv) do
    if l.s > (book.ret[j] or 0) then pts[#pts + 1] = l.d - P.eps end
  end
  for _, l in pairs(leases) do pts[#pts + 1] = l.e end
  return pts
end

-- Process leases pin share (DESIGN §3, @geoquota/lease pins.ts): with the records as they stand,
-- at now and at every change point before the last lease expiry, outstanding(t) ≤ C·s(t)/U.
local function pins_hold(book, leases, P, rend, hold, now)
  local maxe = nil
  for _, l in pairs(leases) do
    if l.e > now and (not maxe or l.e > maxe) then maxe = l.e end
  end
  if not maxe then return true end
  local function backed(t)
    return P.C * share_at(book, P, rend, hold, t) / U - outstanding_at(leases, t) >= 0
  end
  if not backed(now) then return false end
  local pts = schedule_points(book, leases, P, rend, hold)
  for i = 1, #pts do
    local t = pts[i]
    if t > now and t < maxe and not backed(t) then return false end
  end
  return true
end

-- Share and leased amount from `from` on, and every later change as a flat
-- array t1, s1, o1, t2, s2, o2, … (what P:b's `s`, `o`, `sx` hold).
local function build_schedule(book, leases, P, rend, hold, from)
  local pts = schedule_points(book, leases, P, rend, hold)
  local inside = {}
  for i = 1, #pts do
    if pts[i] > from then inside[#inside + 1] = pts[i] end
  end
  table.sort(inside)
  local s0, o0 = share_at(book, P, rend, hold, from), outstanding_at(leases, from)
  local sx, ps, po, last = {}, s0, o0, nil
  for i = 1, #inside do
    local t = inside[i]
    if t ~= last then
      last = t
      local s, o = share_at(book, P, rend, hold, t), outstanding_at(leases, t)
      if s ~= ps or o ~= po then
        sx[#sx + 1] = t
        sx[#sx + 1] = s
        sx[#sx + 1] = o
        ps, po = s, o
      end
    end
  end
  return s0, o0, sx
end

local function encode_sx(sx, from)
  local parts = {}
  for i = from, #sx do parts[#parts + 1] = fmt(sx[i]) end
  return table.concat(parts, ',')
end

local function decode_sx(str)
  local sx = {}
  if str and str ~= '' then
    for n in string.gmatch(str, '[^,]+') do sx[#sx + 1] = tonumber(n) end
  end
  return sx
end

---------------------------------------------------------------- the bucket

-- Piecewise lazy refill (DESIGN §3, traps 1/10/11): each piece at its own
-- rate, clamped to its own capacity; elapsed time never negative.
local function settle(B, P, now)
  local tk, ts, s, o, sx = B.tk, B.ts, B.s, B.o, B.sx
  local i = B.i
  while i <= #sx and sx[i] <= now do
    local t = sx[i]
    local dt = 0
    if t > ts then dt = t - ts end
    tk = math.min(P.C * s / U - o, tk + P.R * s / U * dt / 1000000)
    if t > ts then ts = t end
    s, o = sx[i + 1], sx[i + 2]
    i = i + 3
  end
  local dt = 0
  if now > ts then dt = now - ts end
  tk = math.min(P.C * s / U - o, tk + P.R * s / U * dt / 1000000)
  if now > ts then ts = now end
  B.tk, B.ts, B.s, B.o = tk, ts, s, o
  if i ~= B.i then
    B.i = i
    B.sched_dirty = true
  end
end

-- B.ctx memoizes the loan book and leases of the key (read at most once).
local function ctx_book(B)
  if not B.book then B.book = read_book(B.kl) end
  return B.book
end

local function ctx_leases(B)
  if not B.leases then B.leases = read_leases(B.kk) end
  return B.leases
end

-- The stored fingerprint is this policy's, with or without the leased-mode flag: a limiter and a
-- daemon that disagree about leased mode (misconfiguration) must not empty the bucket at every
-- call. The flag only shapes the recovery part of the schedule: turning leased mode on cannot
-- leave forgotten leases behind (there were none), turning it off keeps a conservative schedule.
local function same_policy(stored, pv)
  return stored == pv or (stored ~= false and (stored .. ':L' == pv or stored == pv .. ':L'))
end

-- Loads P:b settled to now. A missing bucket or one of another incarnation
-- is created now: empty before recoveryEnd + C/r, full after (DESIGN §4); one
-- of another policy restarts empty (B.restarted: callers store it even on a
-- denial, else it would be rebuilt empty at every check and never refill).
local function load_bucket(kb, kl, kk, P, marker, born, now)
  local gcra = P.alg == 'gcra'
  local vf = gcra and 'ta' or 'tk'
  local rend = rec_end(born, P)
  local B = { kb = kb, kl = kl, kk = kk, vf = vf, marker = marker, rend = rend, hold = hold_end(born, P),
              recovering = now < rend, i = 1 }
  local h = redis.call('HMGET', kb, vf, 'ts', 'inc', 's', 'o', 'sx', 'pv', 'xe', 'dg', 'de')
  B.xe, B.dg, B.de, B.has = h[8], h[9], h[10], h[2] ~= false
  if h[3] == marker and same_policy(h[7], P.pv) then
    B.ts, B.s, B.o = tonumber(h[2]), tonumber(h[4]), tonumber(h[5])
    B.sx = decode_sx(h[6])
    local v = tonumber(h[1])
    if gcra then
      local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
      if v > B.ts then v = cap - rate * (v - B.ts) / 1000000 else v = cap end
    end
    B.tk = v
    settle(B, P, now)
    return B
  end
  B.rebuilt = true
  B.restarted = h[3] == marker
  B.s, B.o, B.sx = build_schedule(ctx_book(B), ctx_leases(B), P, rend, B.hold, now)
  B.ts = now
  B.tk = 0
  if (not h[3] or h[3] ~= marker) and now >= rend + full_refill_us(P) then
    B.tk = P.C * B.s / U - B.o
  end
  return B
end

-- After a share or lease change (bucket already settled to now): rebuild the
-- schedule from the records and clamp the tokens; they never jump up.
local function apply_share_change(B, P, now)
  B.s, B.o, B.sx = build_schedule(ctx_book(B), ctx_leases(B), P, B.rend, B.hold, now)
  B.i = 1
  B.rebuilt = true
  local cap = P.C * B.s / U - B.o
  if B.tk > cap then B.tk = cap end
end

-- Writes the bucket state; TTLs are the caller's (keep() or touch()).
local function store_bucket(B, P)
  local v = B.tk
  if B.vf == 'ta' then
    local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
    if rate > 0 then v = B.ts + (cap - B.tk) * 1000000 / rate else v = B.ts end
  end
  if B.rebuilt then
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt_int(B.ts), 's', fmt(B.s), 'o', fmt(B.o),
      'sx', encode_sx(B.sx, B.i), 'inc', B.marker, 'pv', P.pv)
  elseif B.sched_dirty then
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt_int(B.ts), 's', fmt(B.s), 'o', fmt(B.o), 'sx', encode_sx(B.sx, B.i))
  else
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt_int(B.ts))
  end
  B.has = true
end

---------------------------------------------------------------- in-process leases

-- One release (lease_release.lua, and each release lease_acquire.lua carries):
-- `used` is consumed, the rest goes back unless the lease has expired (then it
-- all counts as used); the lease and every expired one leave P:k; then the
-- schedule is rebuilt (the capacity the lease held returns), exactly as a
-- separate lease_release call at the same TIME would. Returns the amount back
-- and whether a counter was written.
local function release_lease(B, P, kk, kc, region, id, lease_id, used, now)
  local leases = ctx_leases(B)
  local l = leases[lease_id]
  local back = 0
  if l and now < l.e then
    local u = used
    if u < 0 then u = 0 elseif u > l.g then u = l.g end
    back = l.g - u
    B.tk = B.tk + back
    if back > 0 then count(kc, 'n', region, id, fmt(back)) end
  end
  leases[lease_id] = nil
  redis.call('HDEL', kk, lease_id)
  for lid, x in pairs(leases) do
    if now >= x.e then
      leases[lid] = nil
      redis.call('HDEL', kk, lid)
    end
  end
  apply_share_change(B, P, now)
  return back, back > 0
end

---------------------------------------------------------------- windows

local function overlaps_recovery(start, W, born, rend)
  return start < rend and start + W > born
end

local function log_cost(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

-- Window decision (static base slice). Returns allowed, remaining, reset µs,
-- a commit function that records the admission (TTL of P:b: the caller's
-- keep()), and P:b's bookkeeping fields {xe, dg, de, has state}.
local function decide_window(kb, kz, P, marker, born, now, cost, cost_str)
  local W = P.W
  local L = P.C * P.base / U
  local rend = rec_end(born, P)
  if P.alg == 'sliding_log' then
    local hb = redis.call('HMGET', kb, 'inc', 'xe', 'dg', 'de')
    local bk = { hb[2], hb[3], hb[4], hb[1] ~= false }
    local same = hb[1] == marker
    local sum, first = 0, nil
    if same then
      local raw = redis.call('ZRANGEBYSCORE', kz, '(' .. fmt(now - W), '+inf', 'WITHSCORES')
      for i = 1, #raw, 2 do
        sum = sum + log_cost(raw[i])
        if not first then first = tonumber(raw[i + 1]) end
      end
    end
    local reset = 0
    if first then reset = first + W - now end
    if now < rend + W then
      return false, 0, rend + W - now, nil, bk
    end
    local allowed = sum + cost <= L
    local after = sum
    if allowed then after = sum + cost end
    local rem = 0
    if after < L then rem = L - after end
    local commit = function()
      if not same then
        redis.call('DEL', kz)
        redis.call('HSET', kb, 'inc', marker)
      end
      local q = redis.call('HINCRBY', kb, 'q', 1)
      redis.call('ZADD', kz, now, q .. ':' .. cost_str)
      redis.call('ZREMRANGEBYSCORE', kz, '-inf', fmt(now - W))
      redis.call('PEXPIRE', kz, P.ttl)
      bk[4] = true
    end
    return allowed, rem, reset, commit, bk
  end
  local k = math.floor(now / W)
  local h = redis.call('HMGET', kb, 'inc', 'w', 'n', 'pn', 'xe', 'dg', 'de')
  local bk = { h[5], h[6], h[7], h[1] ~= false }
  local cur, prev = 0, 0
  if h[1] == marker then
    local w = tonumber(h[2])
    if w == k then
      cur, prev = tonumber(h[3]), tonumber(h[4]) or 0
    elseif w == k - 1 then
      prev = tonumber(h[3])
    end
  end
  local reset = (k + 1) * W - now
  if overlaps_recovery(k * W, W, born, rend) then
    return false, 0, reset, nil, bk
  end
  local used = cur
  if P.alg == 'sliding_window' then
    if overlaps_recovery((k - 1) * W, W, born, rend) then prev = L end
    used = prev * (W - (now - k * W)) / W + cur
  end
  local allowed = used + cost <= L
  local after = used
  if allowed then after = used + cost end
  local rem = 0
  if after < L then rem = L - after end
  local commit = function()
    redis.call('HSET', kb, 'inc', marker, 'w', fmt(k), 'n', fmt(cur + cost), 'pn', fmt(prev))
    bk[4] = true
  end
  return allowed, rem, reset, commit, bk
end

-- Refund in a window: the count drops (≥ 0); the log loses cost from its
-- oldest entries first (never frees capacity later than the true entry would).
local function refund_window(kb, kz, P, marker, now, cost)
  local W = P.W
  if P.alg == 'sliding_log' then
    if redis.call('HGET', kb, 'inc') ~= marker then return end
    local raw = redis.call('ZRANGEBYSCORE', kz, '(' .. fmt(now - W), '+inf', 'WITHSCORES')
    local left = cost
    for i = 1, #raw, 2 do
      if left <= 0 then break end
      local c = log_cost(raw[i])
      redis.call('ZREM', kz, raw[i])
      if c <= left then
        left = left - c
      else
        local q = redis.call('HINCRBY', kb, 'q', 1)
        redis.call('ZADD', kz, raw[i + 1], q .. ':' .. fmt(c - left))
        left = 0
      end
    end
    return
  end
  local k = math.floor(now / W)
  local h = redis.call('HMGET', kb, 'inc', 'w', 'n')
  if h[1] ~= marker or tonumber(h[2]) ~= k then return end
  local n = tonumber(h[3])
  if n > cost then n = n - cost else n = 0 end
  redis.call('HSET', kb, 'n', fmt(n))
end
