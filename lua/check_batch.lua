-- check_batch.lua: a micro-batch of check decisions (store option `batch`), one call, in order.
-- KEYS: per item i (0-based) 4 keys at 1+4i: gq:inc, gq:dg, P:b, gq:pv
-- ARGV: 1 region, 2 itemCount, then per item i 1 value at 3+i: cost
-- Returns: packed doubles of per item i the 7 values check.lua returns: allowed 0|1, remaining,
--          share, leased, recovering 0|1, nowUs, resetUs (check.lua's replies, concatenated)
-- Each item is decided by check.lua itself (its text is placed at the `-- @check` line below, the
-- library inside it as in check.lua), after the item before it wrote: the same decisions as the
-- items' check calls one after the other, in ARGV order, all at this script's one TIME (as if they
-- came in the same microsecond), and the whole batch atomic like any script. The shard reads every
-- check makes first (marker, drain generation, policy entry) are one MGET for the batch, per shard
-- and policy version, read again after an item that took check.lua's general path (which may
-- create the marker or the entry; a drain generation changes only between scripts). Every key is
-- declared, so on Redis Cluster a batch is one hash slot (the store batches per shard there). An
-- error aborts the batch (writes of the items before it stay: tokens consumed, never admitted) and
-- the caller fails every item of it.
local function check_one(KEYS, ARGV)
-- @check
end
local n = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- The shard reads: each distinct policy entry key (it names its shard) once, with its shard's
-- marker and drain generation.
local at, keys = {}, {}
for i = 0, n - 1 do
  local kp = KEYS[4 * i + 4]
  if not at[kp] then
    at[kp] = #keys
    keys[#keys + 1], keys[#keys + 2], keys[#keys + 3] = KEYS[4 * i + 1], KEYS[4 * i + 2], kp
  end
end
local all = redis.call('MGET', unpack(keys))
local reads = {}
for kp, j in pairs(at) do reads[kp] = { all[j + 1], all[j + 2], all[j + 3] } end
-- One KEYS and one ARGV table for every item, refilled in place (check.lua keeps no reference).
local k, a = {}, { ARGV[1] }
a.now = now
local out = {}
for i = 0, n - 1 do
  local kb = 4 * i
  for j = 1, 4 do k[j] = KEYS[kb + j] end
  a[2] = ARGV[3 + i]
  a.g = reads[k[4]]
  out[i + 1] = check_one(k, a)
  if a.slow then
    a.slow = nil
    reads[k[4]] = redis.call('MGET', k[1], k[2], k[4])
  end
end
return table.concat(out)
