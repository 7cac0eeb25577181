-- assign_reserve.lua: reserves a quota assignment (RLQS, DESIGN §11) from the region's slice of a
-- token bucket: a proxy will enforce `burst` tokens refilled at `rate` tokens/s for `ttlUs`, timed
-- from its receipt. The reservation starts now (the send) and lasts ttl + the delivery margin, capped
-- at D and cut to the share schedule (like a process lease, lua/lease_acquire.lua): at every instant
-- until it ends, Σ live assignments' burst + bucket ≤ the slice's capacity and Σ their rates + the
-- bucket's rate ≤ the slice's rate. The rate is held as q ppm of share (q = ⌈rate·U/R⌉, which also
-- takes C·q/U of capacity); the burst beyond C·q/U is held as leased tokens g (rounded up). The record
-- is `q|<id>` = g:e:q:b in P:k (b the burst granted). The burst leaves the bucket now (the proxy
-- starts full). The record stays in P:k until it expires and is never released, lent or returned
-- underneath (pins_hold counts it). Nothing is counted here: the proxy's usage reports are the
-- admissions.
--
-- Fit: what is reserved is the largest assignment that fits, not all or nothing. The rate first (it
-- is what sustains a busy proxy): q is the largest share ≤ the wanted one that fits with no leased
-- tokens; then b is the largest burst ≤ the wanted one (and ≤ the bucket's tokens) that fits beside
-- it. Both by binary search over integers on one monotone test (fits: the headroom
-- C·(s − q)/U − o − g ≥ 0 and s ≥ q at now and at each schedule point it is sized to), so
-- O(log U · |schedule|). At a schedule drop the expiry is cut (first instant the schedule stops
-- backing it, as before), not the size shrunk: the proxy keeps the rate while the slice backs it, and
-- the renewal after the drop is sized to what is left. Only where a cut would leave no TTL (points
-- up to now + margin) or would end a renewal before the record it supersedes (below) is the size
-- fitted to the point instead. Refused (0, 0, 0) only when nothing fits (q = 0 and b = 0).
--
-- Supersede: ARGV 7 names the assignment this one renews (same stream, same bucket; '' for none).
-- When that record is a live assignment that ends no later than this one may (e_old ≤ now + min(ttl +
-- margin, D)), the proxy enforces one bucket at a time (a new assignment replaces the old one's
-- bucket): rates do not add while both are live, bursts may (the old bucket's tokens are spent before
-- the switch, the new one starts full). So m = min(q_old, q) of the old record's share moves to the
-- new one, and the old record keeps what backs its own burst: its leased tokens become
-- ⌈max(0, b_old − C·(q_old − m)/U)⌉ (never fewer than it had; a record without b, written before
-- bursts were stored, is taken at its most, b_old = C·q_old/U + g_old: g_old + ⌈C·m/U⌉). The new
-- one is sized with the share moved (it may use the old one's share for its rate) and is never cut
-- before e_old (the size is fitted to every point before e_old). Invariant (DESIGN §11), each record
-- on its own: C·q/U + g ≥ its burst, at creation and after a supersede (that is how g is set), so
-- Σ bursts ≤ Σ capacity held, which the fit keeps ≤ the slice's capacity less the bucket's. Rates:
-- a supersede adds q − min(q_old_now, q) ≥ 0 to the chain's share, so at every instant the live
-- records of a chain (a suffix of it: each one ends no earlier than the one it superseded) hold at
-- least the rate of any of them, whichever bucket the proxy runs (even if the new one never
-- arrived, the old one is backed until it ends). The bucket's share and capacity only go down.
-- A supersede naming an unknown, expired, non-assignment or longer-lived record is a fresh assignment.
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 assignmentId, 3 burst, 4 rate, 5 ttlUs, 6 marginUs, 7 supersedes
-- Returns: {burst, rate (string), ttlUs, expiryUs, nowUs, share}; burst 0, rate 0, ttl 0: nothing
-- reserved. `share`: the region's share of the key at now before this reservation (the bucket's own
-- plus what live assignments hold), so the caller can divide it among its proxies by demand.
-- A reservation without a token is refused: a token bucket of max_tokens 0 admits nothing, whatever
-- its rate (Envoy's filter starts it full, with max_tokens), so its share would be held for nothing.
local now = now_us()
local marker, gen, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local aid = 'q|' .. ARGV[2]
local want_b, want_r = tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl, margin = tonumber(ARGV[5]), tonumber(ARGV[6])
local _, born = marker_parts(marker)
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
local B = load_bucket(R, P, marker, born, now)
local leases = ctx_leases(B)
local region_share = B.s + assigned_at(leases, now)
local expiry = now + math.min(ttl + margin, P.D)
local oid = 'q|' .. ARGV[7]
local old = nil
if ARGV[7] ~= '' and oid ~= aid then
  local l = leases[oid]
  if l and l.q and l.e > now and l.e <= expiry then old = l end
end
-- The share moved from the old record for a new share q, and the leased tokens it gains.
local function moved(q)
  local m = math.min(old.q, q)
  local og
  if old.b then og = math.ceil(math.max(0, old.b - P.C * (old.q - m) / U)) else og = old.g + math.ceil(P.C * m / U) end
  if og < old.g then og = old.g end
  return m, og - old.g
end
-- Whether (q, g) fits at a point of the schedule (t: its instant; s, o: the bucket's share and
-- leased tokens there).
local function fits(t, s, o, q, g)
  local m, dg = 0, 0
  if old and t < old.e then m, dg = moved(q) end
  return s + m - q >= 0 and P.C * (s + m - q) / U - o - dg - g >= 0
end
local sx = B.sx
local function fits_sized(q, g)
  if not fits(now, B.s, B.o, q, g) then return false end
  for i = B.i, #sx, 3 do
    local t = sx[i]
    if t >= expiry then break end
    if t > now and (t <= now + margin or (old and t < old.e)) and not fits(t, sx[i + 1], sx[i + 2], q, g) then
      return false
    end
  end
  return true
end
-- Largest n in [0, hi] with ok(n) (ok monotone: true up to some n); -1 when not even 0.
local function largest(hi, ok)
  if not ok(0) then return -1 end
  local lo = 0
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if ok(mid) then lo = mid else hi = mid - 1 end
  end
  return lo
end
local wq = 0
if want_r > 0 and P.R > 0 then wq = math.min(math.ceil(want_r * U / P.R), U) end
local q = largest(wq, function(x) return fits_sized(x, 0) end)
local b, g = 0, 0
if q >= 0 then
  local bmax = math.min(want_b, math.floor(B.tk))
  if bmax < 0 then bmax = 0 end
  -- Whole tokens: leased amounts are integers (check.lua's fast path replies `o` as a Redis integer).
  local function g_of(x) return math.ceil(math.max(0, x - P.C * q / U)) end
  b = largest(bmax, function(x) return fits_sized(q, g_of(x)) end)
  g = g_of(b)
end
local ok = not leases[aid] and b > 0
if ok then
  for i = B.i, #sx, 3 do
    local t = sx[i]
    if t >= expiry then break end
    if t > now and not fits(t, sx[i + 1], sx[i + 2], q, g) then
      expiry = t
      break
    end
  end
  ok = expiry - margin > now
end
if not ok then
  store_bucket(B, P)
  keep(R, P, now, gen)
  flush(R)
  return { 0, '0', 0, now, now, fmt(region_share) }
end
local rate = math.min(want_r, P.R * q / U)
B.tk = B.tk - b
if old then
  local m, dg = moved(q)
  old.q, old.g = old.q - m, old.g + dg
  redis.call('HSET', B.kk, oid, fmt_assignment(old))
end
leases[aid] = { g = g, e = expiry, q = q, b = b }
redis.call('HSET', B.kk, aid, fmt_assignment(leases[aid]))
-- Every record in P:k ends by now + D: the key outlives them all. (Expired ones are pruned by the
-- lease scripts; until then they count for nothing.)
redis.call('PEXPIRE', B.kk, math.max(P.ttl, math.ceil(P.D / 1000) + 1000))
apply_share_change(B, P, now)
store_bucket(B, P)
keep(R, P, now, gen)
flush(R)
return { b, fmt(rate), expiry - margin - now, expiry, now, fmt(region_share) }
