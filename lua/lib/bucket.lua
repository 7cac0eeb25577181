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

-- P:b's `v` (rate algorithms): msgpack k, value, ts, s − base, o, sx1, then the refund record
-- `rf` as flat (ts − t_j, m_j) pairs (lib/refunds.lua). k: the number of the policy version the
-- bucket is stored under (core.lua read_policy; a fingerprint string for a bucket converted from
-- the layout before issue 24 under another version); value: tokens (token bucket) or the
-- theoretical arrival time µs (GCRA); ts: µs of the last settle; s, o: share and leased tokens in
-- force at ts, the share as its difference to that version's base share (shares are integers:
-- exact; 1 byte instead of 5 while nothing is lent); sx1: the first later change of the share
-- schedule (0: none), whose whole list t1, s1, o1, t2, s2, o2, … is the field `x` (absent when
-- empty). The fast path of check.lua writes the same encoding.
local function encode_v(k, value, ts, s, o, sx1, rf)
  local n = #rf
  if n == 2 then return cmsgpack.pack(k, value, ts, s, o, sx1, ts - rf[1], rf[2]) end
  local a = { k, value, ts, s, o, sx1 }
  for i = 1, n, 2 do
    a[6 + i], a[7 + i] = ts - rf[i], rf[i + 1]
  end
  return cmsgpack.pack(unpack(a))
end

-- The policy (algorithm, C, r, base, fingerprint) a stored bucket of version k was stored under;
-- nil when the index lost it.
local function stored_policy(kb, k)
  if type(k) == 'string' then
    local alg, c, r, base = string.match(k, '^([^:]+):([^:]+):([^:]+):[^:]+:([^:]+):')
    return { alg = alg, C = tonumber(c), R = tonumber(r), base = tonumber(base), pv = k }
  end
  return policy_by_number(kb, k)
end

-- The level a bucket of another policy of the same algorithm carries over (DESIGN §3 "a change
-- that keeps the algorithm carries the bucket's level over"): settled to now under its own policy
-- (C and r of the version it was stored under, its own share schedule), as if the change had not
-- happened; the caller clamps it to the new capacity. nil: another algorithm (restart empty), or
-- a version the index lost (restart empty: conservative).
local function carried_level(v, O, P, now, x)
  if not O or O.alg ~= P.alg then return nil end
  local T = { ts = v[3], s = v[4] + O.base, o = v[5], sx = {}, i = 1 }
  if v[6] ~= 0 then T.sx = decode_sx(x) end
  local val = v[2]
  if P.alg == 'gcra' then
    local cap, rate = O.C * T.s / U - T.o, O.R * T.s / U
    if val > T.ts then val = cap - rate * (val - T.ts) / 1000000 else val = cap end
  end
  T.tk = val
  settle(T, O, now)
  return T.tk
end

-- The bucket in record R (lib/keep.lua load_rec with fields v, x) settled to now. A missing
-- bucket (or one of another incarnation: load_rec dropped it) is created now: empty before
-- recoveryEnd + C/r, full after (DESIGN §4); one of another policy (B.restarted: callers store it
-- even on a denial, else it would be rebuilt at every check and never refill under the new
-- policy) keeps its level, clamped to the new capacity, when the algorithm is the same, and
-- restarts empty under another algorithm (its tokens were in other units).
local function load_bucket(R, P, marker, born, now)
  local gcra = P.alg == 'gcra'
  local kb = R.kb
  local rend = rec_end(born, P)
  local B = { R = R, kb = kb, kl = key_of(kb, 'l'), kk = key_of(kb, 'k'), gcra = gcra, marker = marker,
              rend = rend, hold = hold_end(born, P), recovering = now < rend, i = 1 }
  local v = R.f.v and { cmsgpack.unpack(R.f.v) }
  local O
  if v then
    local same = v[1] == P.k
    if not same then
      O = stored_policy(kb, v[1])
      same = O ~= nil and same_policy(O.pv, P.pv)
    end
    if same then
      B.k = v[1]
      B.ts, B.s, B.o = v[3], v[4] + P.base, v[5]
      if v[6] ~= 0 then B.sx = decode_sx(R.f.x) else B.sx = {} end
      B.rf = rf_decode(v, B.ts)
      local val = v[2]
      if gcra then
        local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
        if val > B.ts then val = cap - rate * (val - B.ts) / 1000000 else val = cap end
      end
      B.tk = val
      settle(B, P, now)
      rf_note(B.rf, B.ts - 1, P.C * B.s / U - B.o - B.tk)
      return B
    end
  end
  B.rebuilt = true
  B.k = P.k
  B.restarted = v ~= false and v ~= nil
  B.s, B.o, B.sx = build_schedule(ctx_book(B), ctx_leases(B), P, rend, B.hold, now)
  B.ts = now
  B.tk = 0
  -- Nothing admitted before is kept out of a rebuilt bucket: a barrier (at now itself when a
  -- policy change restarted it, which an admission of this very instant may precede).
  if B.restarted then B.rf = { now, 0 } else B.rf = { now - 1, 0 } end
  if not B.restarted and now >= rend + full_refill_us(P) then
    B.tk = P.C * B.s / U - B.o
  end
  if B.restarted then
    local lvl = carried_level(v, O, P, now, R.f.x)
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

-- Puts the bucket state into its record (written by flush); TTLs are keep()'s or touch()'s.
local function store_bucket(B, P)
  local v = B.tk
  if B.gcra then
    local cap, rate = P.C * B.s / U - B.o, P.R * B.s / U
    if rate > 0 then v = B.ts + (cap - B.tk) * 1000000 / rate else v = B.ts end
  end
  rf_note_low(B.rf, B.ts, P.C * B.s / U - B.o - B.tk)
  local sx1 = B.sx[B.i] or 0
  local R = B.R
  R.put.v = encode_v(B.k, v, B.ts, B.s - P.base, B.o, sx1, B.rf)
  if B.rebuilt or B.sched_dirty then
    if sx1 ~= 0 then
      R.put.x = encode_sx(B.sx, B.i)
      R.drop.x = nil
    else
      R.put.x = nil
      R.drop.x = true
    end
  end
end

---------------------------------------------------------------- in-process leases

-- One release (lease_release.lua, and each release lease_acquire.lua carries):
-- `used` is consumed, the rest goes back unless the lease has expired (then it
-- all counts as used); the lease and every expired one leave P:k; then the
-- schedule is rebuilt (the capacity the lease held returns), exactly as a
-- separate lease_release call at the same TIME would. Returns the amount back
-- and whether a counter was written.
local function release_lease(B, P, lease_id, used, now)
  local leases = ctx_leases(B)
  local l = leases[lease_id]
  local back = 0
  if l and l.q then return 0, false end -- an assignment is never released underneath (DESIGN §11)
  if l and now < l.e then
    local u = used
    if u < 0 then u = 0 elseif u > l.g then u = l.g end
    back = l.g - u
    B.tk = B.tk + back
    if back > 0 then count(B.R, 'n', back) end
  end
  leases[lease_id] = nil
  redis.call('HDEL', B.kk, lease_id)
  for lid, x in pairs(leases) do
    if now >= x.e then
      leases[lid] = nil
      redis.call('HDEL', B.kk, lid)
    end
  end
  apply_share_change(B, P, now)
  return back, back > 0
end
