-- drain_dirty.lua: pops up to `max` members (`tenant|resource`) of the change feed.
-- KEYS: 1 gq:dirty
-- ARGV: 1 max
-- Returns: {nowUs, [member, …]}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return { now, redis.call('SPOP', KEYS[1], tonumber(ARGV[1])) }
