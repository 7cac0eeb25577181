-- refund.lua: gives `cost` back to one key (rate: clamped to the capacity; windows: count ≥ 0).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 cost
-- Returns: {1, remaining (string), share, capacity (string), ratePerSecond (string), recovering 0|1,
--           nowUs, resetUs}
local now = now_us()
local P = read_policy(ARGV, 1)
local cost_str = ARGV[13]
local cost = tonumber(cost_str)
local marker = ensure_marker(KEYS[1], now)
local id, born = marker_parts(marker)
local rec = 0
if now < rec_end(born, P) then rec = 1 end
count(KEYS[4], 'n', ARGV[1], id, cost_str, P.ttl)
mark_dirty(KEYS[2], P.member, P.ttl)
if P.rate_alg then
  local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  local cap = P.C * B.s / U - B.o
  B.tk = math.min(cap, B.tk + cost)
  store_bucket(B, P)
  return { 1, fmt(B.tk), B.s, fmt(cap), fmt(P.R * B.s / U), rec, now, 0 }
end
refund_window(KEYS[3], KEYS[7], P, marker, now, cost)
local _, rem, reset = decide_window(KEYS[3], KEYS[7], P, marker, born, now, 0, '0')
local share = P.base
if rec == 1 then share = 0 end
return { 1, fmt(rem), share, fmt(P.C * P.base / U), '0', rec, now, reset }
