-- lease_acquire.lua: hands up to `tokens` whole tokens of a token bucket to an in-process client,
-- after releasing the leases it lists (the client's finished leases ride along with its next
-- acquire: one round-trip instead of two). The effect is exactly lease_release.lua for each listed
-- lease, in order, then the acquire, all at one TIME (packages/core renewLease). `tokens` may be 0
-- (release only). The leased tokens stay counted against the capacity (tokens + outstanding ≤
-- capacity) until released or expired; an expired lease counts as used (DESIGN §7, trap 5).
-- The granted duration is capped at D and at the first instant where the share schedule would no
-- longer back the lease (leases pin share, DESIGN §3): expiryUs says what was granted.
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 leaseId,
--       14 tokens, 15 durationUs, 16 releaseCount N, then N × (leaseId, used)
-- Returns: {granted, expiryUs, nowUs, [returned (string) per released lease, in order]}
local now = now_us()
local P = read_policy(ARGV, 1)
local lease_id, want, dur = ARGV[13], tonumber(ARGV[14]), math.min(tonumber(ARGV[15]), P.D)
local nrel = tonumber(ARGV[16])
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
local reply = { 0, 0, now }
local counted = false
for r = 1, nrel do
  local back, c = release_lease(B, P, KEYS[6], KEYS[4], ARGV[1], id, ARGV[15 + 2 * r], tonumber(ARGV[16 + 2 * r]), now)
  reply[3 + r] = fmt(back)
  counted = counted or c
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
  redis.call('HSET', KEYS[6], lease_id, fmt(granted) .. ':' .. fmt(expiry))
  count(KEYS[4], 'p', ARGV[1], id, fmt(granted))
  counted = true
end
-- The part of the request that could not be granted is unmet demand, counted
-- like a denial so that re-weighting sees a region whose clients all lease.
if want > granted then
  count(KEYS[4], 'd', ARGV[1], id, fmt(want - granted))
  counted = true
end
local maxe = 0
for lid, l in pairs(leases) do
  if now >= l.e then
    leases[lid] = nil
    redis.call('HDEL', KEYS[6], lid)
  elseif l.e > maxe then
    maxe = l.e
  end
end
if maxe > 0 then
  redis.call('PEXPIRE', KEYS[6], math.max(P.ttl, math.ceil((maxe - now) / 1000) + 1000))
end
apply_share_change(B, P, now)
store_bucket(B, P)
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, true, counted)
reply[1], reply[2] = granted, expiry
return reply
