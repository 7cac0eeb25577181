-- drain_dirty.lua: pops up to `max` members (`tenant|resource`) of the change feeds of the shards
-- it is given, sharing the budget over them starting at item `start` (so a budget smaller than the
-- backlog serves every shard in turn). A shard it pops members of starts a new drain generation:
-- gq:dg = max(now, previous + 1), a value it never had, so every key that skips its SADD because it
-- already marked itself in the current generation (lib/keep.lua keep()) marks itself again on its
-- next change. A shard whose feed is empty, or that the budget does not reach, is left alone: no
-- key of it can have skipped a SADD in this generation without being a member still (a popped
-- member moved its shard's generation on; an expired feed is caught by the key's `de`), so an idle
-- shard costs one SCARD inside this call and no write.
-- KEYS: per item i (0-based) 2 keys at 1+2i: gq:dirty, gq:dg
-- ARGV: 1 max, 2 start
-- Returns: {nowUs, [member, …]}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS / 2
local budget = tonumber(ARGV[1])
local start = tonumber(ARGV[2]) % n
local out = {}
for j = 0, n - 1 do
  if budget <= 0 then break end
  local i = (start + j) % n
  local kd, kg = KEYS[2 * i + 1], KEYS[2 * i + 2]
  local size = redis.call('SCARD', kd)
  if size > 0 then
    local take = math.min(size, budget)
    budget = budget - take
    for _, m in ipairs(redis.call('SPOP', kd, take)) do out[#out + 1] = m end
    local gen = now
    local prev = tonumber(redis.call('GET', kg) or '0') or 0
    if gen <= prev then gen = prev + 1 end
    redis.call('SET', kg, string.format('%d', gen))
  end
end
return { now, out }
