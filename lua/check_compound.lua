-- check_compound.lua: several limits (distinct keys) admitted all-or-nothing.
-- KEYS: per item i (0-based) 4 keys at 1+4i: gq:inc, gq:dg, P:b, gq:pv
-- ARGV: 1 region, 2 itemCount, then per item i 1 value at 3+i: cost
-- Returns: {allowed 0|1, failedIndex (0-based, -1 when allowed), nowUs, then per item 6 values:
--           allowed 0|1, remaining (integer or %.17g string), share, leased, recovering 0|1, resetUs}
-- (capacity and rate are derived by the caller, as for check.lua)
-- Optional needs after the items: ARGV[3+n+i] is what item i's limit must still hold for it to
-- pass (default its cost); a check-only item (RLS hits_addend 0) has cost 0 and need 1.
-- Each item carries its own shard's marker, drain generation and policy (items of different
-- shards work on standalone Redis; Redis Cluster needs all items in one shard, i.e. one slot).
-- On denial every item's denied counter grows and nothing else is written (but keep()'s
-- bookkeeping, at most once per drain round or TTL period, and a bucket restarted by a policy
-- change, stored as it was found: it must refill).
local now = now_us()
local region = ARGV[1]
local n = tonumber(ARGV[2])
local items = {}
local failed = -1
for i = 0, n - 1 do
  local ko = 4 * i
  local kb = KEYS[ko + 3]
  local marker, gen, pe = ensure_marker(KEYS[ko + 1], KEYS[ko + 2], KEYS[ko + 4], now)
  local _, born = marker_parts(marker)
  local P = read_policy(KEYS[ko + 4], pe, kb)
  local cost_str = ARGV[3 + i]
  local cost = tonumber(cost_str)
  local need = tonumber(ARGV[3 + n + i] or cost_str)
  local it = { P = P, cost = cost, gen = gen }
  local rec = 0
  if now < rec_end(born, P) then rec = 1 end
  if P.rate_alg then
    local R = load_rec(kb, region, marker, P, { 'v', 'x' })
    local B = load_bucket(R, P, marker, born, now)
    it.R = R
    it.ok = B.tk >= need
    local rem = B.tk
    if it.ok then rem = B.tk - cost end
    it.out = { it.ok and 1 or 0, reply_num(rem), B.s, reply_num(B.o), rec, 0 }
    it.commit = function()
      B.tk = B.tk - cost
      store_bucket(B, P)
    end
    if B.restarted then it.deny = function() store_bucket(B, P) end end
  else
    local R = load_rec(kb, region, marker, P, { 'w', 'q' })
    local ok, rem, reset, commit = decide_window(R, P, born, now, cost, cost_str, need)
    local share = P.base
    if rec == 1 then share = 0 end
    it.R = R
    it.ok = ok
    it.commit = commit
    it.out = { ok and 1 or 0, reply_num(rem), share, 0, rec, reset }
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
    count(it.R, 'p', it.cost)
    it.commit()
  else
    count(it.R, 'd', it.cost)
    if it.deny then it.deny() end
  end
  keep(it.R, it.P, now, it.gen)
  flush(it.R)
  for j = 1, 6 do reply[#reply + 1] = it.out[j] end
end
return reply
