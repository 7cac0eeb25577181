-- lease_release.lua: `used` of a lease is consumed, the rest goes back to the bucket (not after
-- the lease expired: then all of it counts as used). The leased client sends most releases inside
-- its next lease_acquire instead (same effect, one round-trip); this one is for the rest.
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 leaseId, 14 used
-- Returns: {returned (string), nowUs}
local now = now_us()
local P = read_policy(ARGV, 1)
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
local back, counted = release_lease(B, P, KEYS[6], KEYS[4], ARGV[1], id, ARGV[13], tonumber(ARGV[14]), now)
store_bucket(B, P)
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, true, counted)
return { fmt(back), now }
