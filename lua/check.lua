-- check.lua: one admission decision for one key (every algorithm).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 cost
-- Returns: {allowed 0|1, remaining (string), share, capacity (string), ratePerSecond (string),
--           recovering 0|1, nowUs, resetUs}
-- A denial writes only the denied counter and the change feed. The token
-- bucket path reads P:l / P:k only when the bucket is (re)created.
local now = now_us()
local P = read_policy(ARGV, 1)
local cost_str = ARGV[13]
local cost = tonumber(cost_str)
local marker = ensure_marker(KEYS[1], now)
local id, born = marker_parts(marker)
local region = ARGV[1]
if P.rate_alg then
  local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  local allowed = 0
  if B.tk >= cost then
    allowed = 1
    B.tk = B.tk - cost
    store_bucket(B, P)
    count(KEYS[4], 'p', region, id, cost_str, P.ttl)
  else
    count(KEYS[4], 'd', region, id, cost_str, P.ttl)
  end
  mark_dirty(KEYS[2], P.member, P.ttl)
  local rec = 0
  if B.recovering then rec = 1 end
  return { allowed, fmt(B.tk), B.s, fmt(P.C * B.s / U - B.o), fmt(P.R * B.s / U), rec, now, 0 }
end
local ok, rem, reset, commit = decide_window(KEYS[3], KEYS[7], P, marker, born, now, cost, cost_str)
local allowed = 0
if ok then
  allowed = 1
  commit()
  count(KEYS[4], 'p', region, id, cost_str, P.ttl)
else
  count(KEYS[4], 'd', region, id, cost_str, P.ttl)
end
mark_dirty(KEYS[2], P.member, P.ttl)
local rec, share = 0, P.base
if now < rec_end(born, P) then rec, share = 1, 0 end
return { allowed, fmt(rem), share, fmt(P.C * P.base / U), '0', rec, now, reset }
