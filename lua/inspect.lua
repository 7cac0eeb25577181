-- inspect.lua: read-only view of one key: the state settled to now (nothing is written; a missing
-- marker is reported as a new incarnation born now, without creating it).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember
-- Returns: {nowUs, marker, recovering 0|1, share, remaining (string), capacity (string),
--           ratePerSecond (string), bucketExists 0|1, resetUs, [P:c field, value, …],
--           [P:l field, value, …], [P:k field, value, …]}
local now = now_us()
local P = read_policy(ARGV, 1)
local marker = redis.call('GET', KEYS[1]) or string.format('%d:%d', now, now)
local _, born = marker_parts(marker)
local rec = 0
if now < rec_end(born, P) then rec = 1 end
local exists = redis.call('EXISTS', KEYS[3])
local share, rem, cap, rate, reset
if P.rate_alg then
  local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  share, rem, cap, rate, reset = B.s, B.tk, P.C * B.s / U - B.o, P.R * B.s / U, 0
else
  local _
  _, rem, reset = decide_window(KEYS[3], KEYS[7], P, marker, born, now, 0, '0')
  share, cap, rate = P.base, P.C * P.base / U, 0
  if rec == 1 then share = 0 end
end
return { now, marker, rec, share, fmt(rem), fmt(cap), fmt(rate), exists, reset,
  redis.call('HGETALL', KEYS[4]), redis.call('HGETALL', KEYS[5]), redis.call('HGETALL', KEYS[6]) }
