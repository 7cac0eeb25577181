-- assign_usage.lua: an RLQS proxy's usage report (DESIGN §11) counted in the key's CRDT counters: the
-- requests its local bucket allowed are admissions ('p'), the ones it denied are unmet demand ('d'),
-- exactly as check.lua counts a decision, so gossip's demand and the oracle see them. Nothing is taken
-- from the bucket: the assignment's burst and rate were reserved by assign_reserve.lua when it was sent.
-- The key goes on the change feed (gq:dirty) so the daemon reads the new counts.
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 allowed, 14 denied
-- Returns: {nowUs}
local now = now_us()
local P = read_policy(ARGV, 1)
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
local allowed, denied = ARGV[13], ARGV[14]
if tonumber(allowed) > 0 then count(KEYS[4], 'p', ARGV[1], id, allowed) end
if tonumber(denied) > 0 then count(KEYS[4], 'd', ARGV[1], id, denied) end
store_bucket(B, P)
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, true, true)
return { now }
