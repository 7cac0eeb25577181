-- lease_release.lua: `used` of a lease is consumed, the rest goes back to the bucket (not after
-- the lease expired: then all of it counts as used).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 leaseId, 14 used
-- Returns: {returned (string), nowUs}
local now = now_us()
local P = read_policy(ARGV, 1)
local lease_id, used = ARGV[13], tonumber(ARGV[14])
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
local leases = ctx_leases(B)
local l = leases[lease_id]
local back = 0
if l and now < l.e then
  local u = used
  if u < 0 then u = 0 elseif u > l.g then u = l.g end
  back = l.g - u
  B.tk = B.tk + back
  if back > 0 then count(KEYS[4], 'n', ARGV[1], id, fmt(back)) end
end
leases[lease_id] = nil
redis.call('HDEL', KEYS[6], lease_id)
for lid, x in pairs(leases) do
  if now >= x.e then
    leases[lid] = nil
    redis.call('HDEL', KEYS[6], lid)
  end
end
apply_share_change(B, P, now)
store_bucket(B, P)
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, true, back > 0)
return { fmt(back), now }
