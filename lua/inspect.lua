-- inspect.lua: read-only view of one key on the region's primary: the state settled to now (nothing
-- is written, but a replica refuses it, below; a missing
-- marker is reported as a new incarnation born now, without creating it; a missing policy entry
-- is read from its key's name, without creating it; a key of the layout before issue 24 is read
-- as converted, without converting it).
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region
-- Returns: {nowUs, marker, recovering 0|1, share, remaining (string), capacity (string),
--           ratePerSecond (string), bucketExists 0|1, resetUs, [counter field, value, …],
--           [P:l field, value, …], [P:k field, value, …]}
-- bucketExists: P:b exists. The counters are this region's own (lib/keep.lua, as `p|<region>.<id>`
-- fields, nonzero ones) and every other replica's, as gossip reads and ships them.
-- Refused by a replica: a write command that changes nothing (the key never exists) makes a
-- read-only replica answer READONLY. A view is the region's live share only on its primary: a
-- replica just after a diskless full sync serves its snapshot for up to ~1 s (until its first
-- REPLCONF ACK starts the stream), so an address moved to it before its promotion showed a loan
-- already returned, and shipped as returned, as still in use (the 3-minute soak, seed 26005, on
-- a failback behind one address). Nothing is admitted there (every admission writes), but the
-- view and the gossip daemon's reads (readKeyState runs this script) must not present it as now.
redis.call('DEL', shard_key(KEYS[3], 'ro'))
local now = now_us()
local g = redis.call('MGET', KEYS[1], KEYS[4])
local marker = g[1] or string.format('%d:%d', now, now)
local P = read_policy(KEYS[4], g[2], KEYS[3], true)
local _, born = marker_parts(marker)
local rec = 0
if now < rec_end(born, P) then rec = 1 end
local exists = redis.call('EXISTS', KEYS[3])
local share, rem, cap, rate, reset, R
if P.rate_alg then
  R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
  local B = load_bucket(R, P, marker, born, now)
  share, rem, cap, rate, reset = B.s, B.tk, P.C * B.s / U - B.o, P.R * B.s / U, 0
else
  R = load_rec(KEYS[3], ARGV[1], marker, P, { 'w', 'q' })
  local _
  _, rem, reset = decide_window(R, P, born, now, 0, '0')
  share, cap, rate = P.base, P.C * P.base / U, 0
  if rec == 1 then share = 0 end
end
return { now, marker, rec, share, fmt(rem), fmt(cap), fmt(rate), exists, reset,
  counter_fields(R), redis.call('HGETALL', key_of(KEYS[3], 'l')), redis.call('HGETALL', key_of(KEYS[3], 'k')) }
