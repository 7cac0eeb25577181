-- lease_acquire.lua: hands up to `tokens` whole tokens of a token bucket to an in-process client,
-- after releasing the leases it lists (the client's finished leases ride along with its next
-- acquire: one round-trip instead of two). The effect is exactly lease_release.lua for each listed
-- lease, in order, then the acquire, all at one TIME (packages/core renewLease). `tokens` may be 0
-- (release only). The leased tokens stay counted against the capacity (tokens + outstanding ≤
-- capacity) until released or expired; an expired lease counts as used (DESIGN §7, trap 5).
-- The granted duration is capped at D and at the first instant where the share schedule would no
-- longer back the lease (leases pin share, DESIGN §3): expiryUs says what was granted.
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 leaseId, 3 tokens, 4 durationUs, 5 releaseCount N, then N × (leaseId, used)
-- Returns: {granted, expiryUs, nowUs, [returned (string) per released lease, in order]}
local now = now_us()
local marker, gen, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local lease_id, want, dur = ARGV[2], tonumber(ARGV[3]), math.min(tonumber(ARGV[4]), P.D)
local nrel = tonumber(ARGV[5])
local _, born = marker_parts(marker)
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
local B = load_bucket(R, P, marker, born, now)
local reply = { 0, 0, now }
for r = 1, nrel do
  reply[3 + r] = fmt(release_lease(B, P, ARGV[4 + 2 * r], tonumber(ARGV[5 + 2 * r]), now))
end
local leases = ctx_leases(B)
local granted = math.min(want, math.floor(B.tk))
if granted < 0 or leases[lease_id] then granted = 0 end
local expiry = now + dur
if granted > 0 then
  -- Leases pin share (DESIGN §3): the lease ends at the first later change of the schedule where
  -- the share would no longer back it (e.g. a loan passing deadline − ε), so a lapse never strands
  -- leased tokens. B.sx from B.i holds exactly the changes after now.
  local sx = B.sx
  for i = B.i, #sx, 3 do
    local t = sx[i]
    if t >= expiry then break end
    if t > now and P.C * sx[i + 1] / U - sx[i + 2] - granted < 0 then
      expiry = t
      break
    end
  end
  B.tk = B.tk - granted
  leases[lease_id] = { g = granted, e = expiry }
  redis.call('HSET', B.kk, lease_id, fmt(granted) .. ':' .. fmt(expiry))
  count(R, 'p', granted)
end
-- The part of the request that could not be granted is unmet demand, counted
-- like a denial so that re-weighting sees a region whose clients all lease.
if want > granted then
  count(R, 'd', want - granted)
end
local maxe = 0
for lid, l in pairs(leases) do
  if now >= l.e then
    leases[lid] = nil
    redis.call('HDEL', B.kk, lid)
  elseif l.e > maxe then
    maxe = l.e
  end
end
if maxe > 0 then
  redis.call('PEXPIRE', B.kk, math.max(P.ttl, math.ceil((maxe - now) / 1000) + 1000))
end
apply_share_change(B, P, now)
store_bucket(B, P)
keep(R, P, now, gen)
flush(R)
reply[1], reply[2] = granted, expiry
return reply
