-- check_compound.lua: several limits (distinct keys) admitted all-or-nothing.
-- KEYS: 1 gq:inc, 2 gq:dirty, then per item i (0-based) 5 keys at 3+5i: P:b, P:c, P:l, P:k, P:z
-- ARGV: 1 region, 2 itemCount, then per item i 12 values at 3+12i: algorithm, capacity,
--       refillPerSecond, windowUs, baseShare, floorShare, policyVersion, epsilonUs, loanDurationUs,
--       ttlMs, dirtyMember, cost
-- Returns: {allowed 0|1, failedIndex (0-based, -1 when allowed), nowUs, then per item 7 values:
--           allowed 0|1, remaining (string), share, capacity (string), ratePerSecond (string),
--           recovering 0|1, resetUs}
-- On denial every item's denied counter grows and nothing else is written.
local now = now_us()
local region = ARGV[1]
local n = tonumber(ARGV[2])
local marker = ensure_marker(KEYS[1], now)
local id, born = marker_parts(marker)
local items = {}
local failed = -1
for i = 0, n - 1 do
  local ko, ao = 3 + 5 * i, 2 + 12 * i
  local P = read_policy(ARGV, ao)
  local cost_str = ARGV[ao + 12]
  local cost = tonumber(cost_str)
  local it = { P = P, kc = KEYS[ko + 1], cost = cost, cost_str = cost_str }
  local rec = 0
  if now < rec_end(born, P) then rec = 1 end
  if P.rate_alg then
    local B = load_bucket(KEYS[ko], KEYS[ko + 2], KEYS[ko + 3], P, marker, born, now)
    it.ok = B.tk >= cost
    local rem = B.tk
    if it.ok then rem = B.tk - cost end
    it.out = { it.ok and 1 or 0, fmt(rem), B.s, fmt(P.C * B.s / U - B.o), fmt(P.R * B.s / U), rec, 0 }
    it.commit = function()
      B.tk = B.tk - cost
      store_bucket(B, P)
    end
  else
    local ok, rem, reset, commit = decide_window(KEYS[ko], KEYS[ko + 4], P, marker, born, now, cost, cost_str)
    local share = P.base
    if rec == 1 then share = 0 end
    it.ok = ok
    it.commit = commit
    it.out = { ok and 1 or 0, fmt(rem), share, fmt(P.C * P.base / U), '0', rec, reset }
  end
  if not it.ok and failed < 0 then failed = i end
  items[#items + 1] = it
end
local allowed = 0
if failed < 0 then allowed = 1 end
local reply = { allowed, failed, now }
for i = 1, #items do
  local it = items[i]
  if allowed == 1 then
    it.commit()
    count(it.kc, 'p', region, id, it.cost_str, it.P.ttl)
  else
    count(it.kc, 'd', region, id, it.cost_str, it.P.ttl)
  end
  mark_dirty(KEYS[2], it.P.member, it.P.ttl)
  for j = 1, 7 do reply[#reply + 1] = it.out[j] end
end
return reply
