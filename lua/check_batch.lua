-- check_batch.lua: a micro-batch of check decisions (store option `batch`), one call, in order.
-- KEYS: per item i (0-based) 4 keys at 1+4i: gq:inc, gq:dg, P:b, gq:pv
-- ARGV: 1 region, 2 itemCount, then per item i 1 value at 3+i: cost
-- Returns: per item i the 7 values check.lua returns, at 1+7i: allowed 0|1, remaining, share,
--          leased, recovering 0|1, nowUs, resetUs
-- Each item is decided by check.lua itself (its text is placed at the `-- @check` line below, the
-- library inside it as in check.lua), with its own TIME and its own reads, after the item before it
-- wrote: the same decisions as the items' check calls one after the other, in ARGV order, and the
-- whole batch atomic like any script. Every key is declared, so on Redis Cluster a batch is one hash
-- slot (the store batches per shard there). An error aborts the batch (writes of the items before
-- it stay: tokens consumed, never admitted) and the caller fails every item of it.
local function check_one(KEYS, ARGV)
-- @check
end
local n = tonumber(ARGV[2])
-- One KEYS and one ARGV table for every item, refilled in place (check.lua keeps no reference).
local k, a = {}, { ARGV[1] }
local out = {}
for i = 0, n - 1 do
  local kb, ob = 4 * i, 7 * i
  for j = 1, 4 do k[j] = KEYS[kb + j] end
  a[2] = ARGV[3 + i]
  local r = check_one(k, a)
  for j = 1, 7 do out[ob + j] = r[j] end
end
return out
