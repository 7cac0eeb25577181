-- check_compound.lua: several limits (distinct keys) admitted all-or-nothing.
-- KEYS: per item i (0-based) 8 keys at 1+8i: gq:inc, gq:dirty, P:b, P:c, P:l, P:k, P:z, gq:dg
-- ARGV: 1 region, 2 itemCount, then per item i 12 values at 3+12i: algorithm, capacity,
--       refillPerSecond, windowUs, baseShare, floorShare, policyVersion, epsilonUs, loanDurationUs,
--       ttlMs, dirtyMember, cost
-- Returns: {allowed 0|1, failedIndex (0-based, -1 when allowed), nowUs, then per item 6 values:
--           allowed 0|1, remaining (integer or %.17g string), share, leased, recovering 0|1, resetUs}
-- (capacity and rate are derived by the caller, as for check.lua)
-- Optional needs after the items: ARGV[3+12n+i] is what item i's limit must still hold for it to
-- pass (default its cost); a check-only item (RLS hits_addend 0) has cost 0 and need 1.
-- Each item carries its own shard's marker, change feed and drain generation (items of different
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
  local kbase, ao = 8 * i, 2 + 12 * i
  local ko = kbase + 3
  local marker, gen = ensure_marker(KEYS[kbase + 1], KEYS[kbase + 8], now)
  local id, born = marker_parts(marker)
  local P = read_policy(ARGV, ao)
  local cost_str = ARGV[ao + 12]
  local cost = tonumber(cost_str)
  local need = tonumber(ARGV[3 + 12 * n + i] or cost_str)
  local it = { P = P, kb = KEYS[ko], kc = KEYS[ko + 1], kd = KEYS[kbase + 2], cost = cost, cost_str = cost_str,
               id = id, gen = gen }
  local rec = 0
  if now < rec_end(born, P) then rec = 1 end
  if P.rate_alg then
    local B = load_bucket(KEYS[ko], KEYS[ko + 2], KEYS[ko + 3], P, marker, born, now)
    it.ok = B.tk >= need
    local rem = B.tk
    if it.ok then rem = B.tk - cost end
    it.out = { it.ok and 1 or 0, reply_num(rem), B.s, reply_num(B.o), rec, 0 }
    it.bk = B
    it.commit = function()
      B.tk = B.tk - cost
      store_bucket(B, P)
    end
    if B.restarted then it.deny = function() store_bucket(B, P) end end
  else
    local ok, rem, reset, commit, bk = decide_window(KEYS[ko], KEYS[ko + 4], P, marker, born, now, cost, cost_str, need)
    local share = P.base
    if rec == 1 then share = 0 end
    it.ok = ok
    it.commit = commit
    it.wbk = bk
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
    count(it.kc, 'p', region, it.id, it.cost_str)
    it.commit()
  else
    count(it.kc, 'd', region, it.id, it.cost_str)
    if it.deny then it.deny() end
  end
  if it.bk then
    local B = it.bk
    keep(it.kb, it.kc, it.kd, it.P, now, it.gen, B.xe, B.dg, B.de, B.has, true)
  else
    local bk = it.wbk
    keep(it.kb, it.kc, it.kd, it.P, now, it.gen, bk[1], bk[2], bk[3], bk[4], true)
  end
  for j = 1, 6 do reply[#reply + 1] = it.out[j] end
end
return reply
