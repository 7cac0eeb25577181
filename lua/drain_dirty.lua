-- drain_dirty.lua: pops up to `max` members (`tenant|resource`) of the change feed and starts a new
-- drain generation: gq:dg = max(now, previous + 1), a value it never had, so every key that skips
-- its SADD because it already marked itself in the current generation (lib/keep.lua keep()) marks
-- itself again on its next change.
-- KEYS: 1 gq:dirty, 2 gq:dg
-- ARGV: 1 max
-- Returns: {nowUs, [member, …]}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local members = redis.call('SPOP', KEYS[1], tonumber(ARGV[1]))
local gen = now
local prev = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if gen <= prev then gen = prev + 1 end
redis.call('SET', KEYS[2], string.format('%d', gen))
return { now, members }
