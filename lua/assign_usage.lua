-- assign_usage.lua: an RLQS proxy's usage report (DESIGN §11) counted in the key's CRDT counters: the
-- requests its local bucket allowed are admissions ('p'), the ones it denied are unmet demand ('d'),
-- exactly as check.lua counts a decision, so gossip's demand and the oracle see them. Nothing is taken
-- from the bucket: the assignment's burst and rate were reserved by assign_reserve.lua when it was sent.
-- The key goes on the change feed (gq:dirty) so the daemon reads the new counts.
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 allowed, 3 denied
-- Returns: {nowUs}
local now = now_us()
local marker, gen, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local _, born = marker_parts(marker)
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
local B = load_bucket(R, P, marker, born, now)
local allowed, denied = tonumber(ARGV[2]), tonumber(ARGV[3])
if allowed > 0 then count(R, 'p', allowed) end
if denied > 0 then count(R, 'd', denied) end
store_bucket(B, P)
keep(R, P, now, gen)
flush(R)
return { now }
