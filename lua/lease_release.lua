-- lease_release.lua: `used` of a lease is consumed, the rest goes back to the bucket (not after
-- the lease expired: then all of it counts as used). The leased client sends most releases inside
-- its next lease_acquire instead (same effect, one round-trip); this one is for the rest.
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 leaseId, 3 used
-- Returns: {returned (string), nowUs}
local now = now_us()
local marker, gen, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local _, born = marker_parts(marker)
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
local B = load_bucket(R, P, marker, born, now)
local back = release_lease(B, P, ARGV[2], tonumber(ARGV[3]), now)
store_bucket(B, P)
keep(R, P, now, gen)
flush(R)
return { fmt(back), now }
