-- lease_acquire.lua: hands up to `tokens` whole tokens of a token bucket to an in-process client.
-- The leased tokens stay counted against the capacity (tokens + outstanding ≤ capacity) until
-- released or expired; an expired lease counts as used (DESIGN §7, trap 5).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 leaseId,
--       14 tokens, 15 durationUs
-- Returns: {granted, expiryUs, nowUs}
local now = now_us()
local P = read_policy(ARGV, 1)
local lease_id, want, dur = ARGV[13], tonumber(ARGV[14]), tonumber(ARGV[15])
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
local leases = ctx_leases(B)
local granted = math.min(want, math.floor(B.tk))
if granted < 0 or leases[lease_id] then granted = 0 end
local expiry = now + dur
if granted > 0 then
  B.tk = B.tk - granted
  leases[lease_id] = { g = granted, e = expiry }
  redis.call('HSET', KEYS[6], lease_id, fmt(granted) .. ':' .. fmt(expiry))
  count(KEYS[4], 'p', ARGV[1], id, fmt(granted))
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
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, true, granted > 0)
return { granted, expiry, now }
