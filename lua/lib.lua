-- lib.lua: shared functions, prepended to every script by the loader
-- (packages/limiter/src/redis/scripts.ts); not a script on its own.
-- It mirrors @geoquota/lease operation for operation: same formulas, same
-- order of floating-point operations, so a script and the model fed the same
-- TIME produce the same doubles. Numbers are written with %.17g (exact round
-- trip); Lua's tostring would keep only 14 digits.
--
-- Per-key scripts share one layout:
--   KEYS[1] gq:inc  KEYS[2] gq:dirty  KEYS[3] P:b  KEYS[4] P:c  KEYS[5] P:l  KEYS[6] P:k  KEYS[7] P:z
--   ARGV[1] region  ARGV[2..12] policy (see read_policy)  ARGV[13..] script-specific

local U = 1000000

local function fmt(x)
  return string.format('%.17g', x)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Policy of one key, 11 values from ARGV[off+1]:
-- algorithm, C, r, window µs, base ppm, floor ppm, policy version, ε µs, D µs, ttl ms, dirty member.
local function read_policy(a, off)
  return {
    alg = a[off + 1], C = tonumber(a[off + 2]), R = tonumber(a[off + 3]), W = tonumber(a[off + 4]),
    base = tonumber(a[off + 5]), floor = tonumber(a[off + 6]), pv = a[off + 7],
    eps = tonumber(a[off + 8]), D = tonumber(a[off + 9]), ttl = tonumber(a[off + 10]), member = a[off + 11],
    rate_alg = (a[off + 1] == 'token_bucket' or a[off + 1] == 'gcra'),
  }
end

-- The incarnation marker `<id>:<bornUs>`; missing means state loss: a new
-- incarnation born now, in recovery until born + D + 2ε (DESIGN §4).
local function ensure_marker(kinc, now)
  local m = redis.call('GET', kinc)
  if not m then
    m = string.format('%d:%d', now, now)
    redis.call('SET', kinc, m)
  end
  return m
end

local function marker_parts(m)
  local c = string.find(m, ':', 1, true)
  return string.sub(m, 1, c - 1), tonumber(string.sub(m, c + 1))
end

local function rec_end(born, P)
  return born + P.D + 2 * P.eps
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

-- Change feed for the gossip daemon; the set gets a TTL when a member is new.
local function mark_dirty(kd, member, ttl)
  if redis.call('SADD', kd, member) == 1 then
    redis.call('PEXPIRE', kd, ttl, 'NX')
    redis.call('PEXPIRE', kd, ttl, 'GT')
  end
end

local function count(kc, kind, region, id, amount_str, ttl)
  redis.call('HINCRBYFLOAT', kc, kind .. '|' .. region .. '.' .. id, amount_str)
  redis.call('PEXPIRE', kc, ttl)
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
local function share_at(book, P, rend, t)
  if t < rend then return math.min(P.floor, P.base) end
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

-- Share and leased amount from `from` on, and every later change as a flat
-- array t1, s1, o1, t2, s2, o2, … (what P:b's `s`, `o`, `sx` hold).
local function build_schedule(book, leases, P, rend, from)
  local pts = { rend }
  for _, list in pairs(book.out) do
    for i = 1, #list do pts[#pts + 1] = list[i].d + P.eps end
  end
  for j, l in pairs(book.recv) do
    if l.s > (book.ret[j] or 0) then pts[#pts + 1] = l.d - P.eps end
  end
  for _, l in pairs(leases) do pts[#pts + 1] = l.e end
  local inside = {}
  for i = 1, #pts do
    if pts[i] > from then inside[#inside + 1] = pts[i] end
  end
  table.sort(inside)
  local s0, o0 = share_at(book, P, rend, from), outstanding_at(leases, from)
  local sx, ps, po, last = {}, s0, o0, nil
  for i = 1, #inside do
    local t = inside[i]
    if t ~= last then
      last = t
      local s, o = share_at(book, P, rend, t), outstanding_at(leases, t)
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

-- Loads P:b settled to now. A missing bucket or one of another incarnation
-- is created now: empty before recoveryEnd + C/r, full after (DESIGN §4); one
-- of another policy restarts empty.
local function load_bucket(kb, kl, kk, P, marker, born, now)
  local gcra = P.alg == 'gcra'
  local vf = gcra and 'ta' or 'tk'
  local rend = rec_end(born, P)
  local B = { kb = kb, kl = kl, kk = kk, vf = vf, marker = marker, rend = rend, recovering = now < rend, i = 1 }
  local h = redis.call('HMGET', kb, vf, 'ts', 'inc', 's', 'o', 'sx', 'pv')
  if h[3] == marker and h[7] == P.pv then
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
  B.s, B.o, B.sx = build_schedule(ctx_book(B), ctx_leases(B), P, rend, now)
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
  B.s, B.o, B.sx = build_schedule(ctx_book(B), ctx_leases(B), P, B.rend, now)
  B.i = 1
  B.rebuilt = true
  local cap = P.C * B.s / U - B.o
  if B.tk > cap then B.tk = cap end
end

local function store_bucket(B, P)
  local v = B.tk
  if B.vf == 'ta' then
    local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
    if rate > 0 then v = B.ts + (cap - B.tk) * 1000000 / rate else v = B.ts end
  end
  if B.rebuilt then
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt(B.ts), 's', fmt(B.s), 'o', fmt(B.o),
      'sx', encode_sx(B.sx, B.i), 'inc', B.marker, 'pv', P.pv)
  elseif B.sched_dirty then
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt(B.ts), 's', fmt(B.s), 'o', fmt(B.o), 'sx', encode_sx(B.sx, B.i))
  else
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt(B.ts))
  end
  redis.call('PEXPIRE', B.kb, P.ttl)
end

---------------------------------------------------------------- windows

local function overlaps_recovery(start, W, born, rend)
  return start < rend and start + W > born
end

local function log_cost(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

-- Window decision (static base slice). Returns allowed, remaining, reset µs,
-- and a commit function that records the admission.
local function decide_window(kb, kz, P, marker, born, now, cost, cost_str)
  local W = P.W
  local L = P.C * P.base / U
  local rend = rec_end(born, P)
  if P.alg == 'sliding_log' then
    local same = redis.call('HGET', kb, 'inc') == marker
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
      return false, 0, rend + W - now, nil
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
      redis.call('PEXPIRE', kb, P.ttl)
    end
    return allowed, rem, reset, commit
  end
  local k = math.floor(now / W)
  local h = redis.call('HMGET', kb, 'inc', 'w', 'n', 'pn')
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
    return false, 0, reset, nil
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
    redis.call('PEXPIRE', kb, P.ttl)
  end
  return allowed, rem, reset, commit
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
