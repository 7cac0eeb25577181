-- lib/bucket.lua: the bucket — piecewise refill (settle), load/store, share changes, lease release.

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
    local hcap = P.C * s / U - o -- this piece's capacity: its end's headroom for refunds
    tk = math.min(P.C * s / U - o, tk + P.R * s / U * dt / 1000000)
    if t > ts then ts = t end
    s, o = sx[i + 1], sx[i + 2]
    if B.rf then rf_note(B.rf, t, hcap - tk) end -- (carried_level's bucket keeps none)
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

-- The level a bucket of another policy of the same algorithm carries over (DESIGN §3 "a change
-- that keeps the algorithm carries the bucket's level over"): settled to now under its own policy
-- (C and r from its fingerprint `alg:C:r:…`, its own share schedule), as if the change had not
-- happened; the caller clamps it to the new capacity. nil: another algorithm (restart empty).
local function carried_level(h, P, now)
  local alg, c, r = string.match(h[7] or '', '^([^:]+):([^:]+):([^:]+):')
  if alg ~= P.alg or not h[1] or not h[2] then return nil end
  local O = { C = tonumber(c), R = tonumber(r) }
  local T = { ts = tonumber(h[2]), s = tonumber(h[4]), o = tonumber(h[5]), sx = decode_sx(h[6]), i = 1 }
  local v = tonumber(h[1])
  if P.alg == 'gcra' then
    local cap, rate = O.C * T.s / U - T.o, O.R * T.s / U
    if v > T.ts then v = cap - rate * (v - T.ts) / 1000000 else v = cap end
  end
  T.tk = v
  settle(T, O, now)
  return T.tk
end

-- Loads P:b settled to now. A missing bucket or one of another incarnation
-- is created now: empty before recoveryEnd + C/r, full after (DESIGN §4); one
-- of another policy (B.restarted: callers store it even on a denial, else it
-- would be rebuilt at every check and never refill under the new policy) keeps
-- its level, clamped to the new capacity, when the algorithm is the same, and
-- restarts empty under another algorithm (its tokens were in other units).
local function load_bucket(kb, kl, kk, P, marker, born, now)
  local gcra = P.alg == 'gcra'
  local vf = gcra and 'ta' or 'tk'
  local rend = rec_end(born, P)
  local B = { kb = kb, kl = kl, kk = kk, vf = vf, marker = marker, rend = rend, hold = hold_end(born, P),
              recovering = now < rend, i = 1 }
  local h = redis.call('HMGET', kb, vf, 'ts', 'inc', 's', 'o', 'sx', 'pv', 'xe', 'dg', 'de', 'rf')
  B.xe, B.dg, B.de, B.has = h[8], h[9], h[10], h[2] ~= false
  if h[3] == marker and same_policy(h[7], P.pv) then
    B.ts, B.s, B.o = tonumber(h[2]), tonumber(h[4]), tonumber(h[5])
    B.sx = decode_sx(h[6])
    B.rf = rf_decode(h[11], B.ts)
    local v = tonumber(h[1])
    if gcra then
      local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
      if v > B.ts then v = cap - rate * (v - B.ts) / 1000000 else v = cap end
    end
    B.tk = v
    settle(B, P, now)
    rf_note(B.rf, B.ts - 1, P.C * B.s / U - B.o - B.tk)
    return B
  end
  B.rebuilt = true
  B.restarted = h[3] == marker
  B.s, B.o, B.sx = build_schedule(ctx_book(B), ctx_leases(B), P, rend, B.hold, now)
  B.ts = now
  B.tk = 0
  -- Nothing admitted before is kept out of a rebuilt bucket: a barrier (at now itself when a
  -- policy change restarted it, which an admission of this very instant may precede).
  if B.restarted then B.rf = { now, 0 } else B.rf = { now - 1, 0 } end
  if (not h[3] or h[3] ~= marker) and now >= rend + full_refill_us(P) then
    B.tk = P.C * B.s / U - B.o
  end
  if B.restarted then
    local lvl = carried_level(h, P, now)
    if lvl then
      local cap = P.C * B.s / U - B.o
      if lvl > cap then lvl = cap end
      B.tk = lvl
    end
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
  rf_note_low(B.rf, B.ts, cap - B.tk)
end

-- Writes the bucket state; TTLs are the caller's (keep() or touch()).
local function store_bucket(B, P)
  local v = B.tk
  if B.vf == 'ta' then
    local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
    if rate > 0 then v = B.ts + (cap - B.tk) * 1000000 / rate else v = B.ts end
  end
  rf_note_low(B.rf, B.ts, P.C * B.s / U - B.o - B.tk)
  local rf = rf_encode(B.rf, B.ts)
  if B.rebuilt then
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt_int(B.ts), 's', fmt(B.s), 'o', fmt(B.o),
      'sx', encode_sx(B.sx, B.i), 'inc', B.marker, 'pv', P.pv, 'rf', rf)
  elseif B.sched_dirty then
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt_int(B.ts), 's', fmt(B.s), 'o', fmt(B.o), 'sx', encode_sx(B.sx, B.i),
      'rf', rf)
  else
    redis.call('HSET', B.kb, B.vf, fmt(v), 'ts', fmt_int(B.ts), 'rf', rf)
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
  if l and l.q then return 0, false end -- an assignment is never released underneath (DESIGN §11)
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
