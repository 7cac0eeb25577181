-- token_bucket_min.lua: the bench's ceiling, the least a token bucket can do.
-- KEYS: 1 bucket hash
-- ARGV: 1 capacity, 2 refillPerSecond, 3 cost
-- Returns: {allowed 0|1, tokens (string)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1e6 + tonumber(t[2])
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tk', 'ts')
local tk = tonumber(b[1]) or cap
local ts = tonumber(b[2]) or now
tk = math.min(cap, tk + (now - ts) * rate / 1e6)
local allowed = 0
if tk >= cost then
  allowed = 1
  tk = tk - cost
end
redis.call('HSET', KEYS[1], 'tk', tostring(tk), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate * 1000) + 1000)
return { allowed, tostring(tk) }
