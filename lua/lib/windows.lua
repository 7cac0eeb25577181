-- lib/windows.lua: fixed/sliding window decisions and refunds.

---------------------------------------------------------------- windows

local function overlaps_recovery(start, W, born, rend)
  return start < rend and start + W > born
end

local function log_cost(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

-- Window decision (static base slice). Returns allowed, remaining, reset µs,
-- a commit function that records the admission (TTL of P:b: the caller's
-- keep()), and P:b's bookkeeping fields {xe, dg, de, has state}. `need` (default cost): what the
-- window must still hold for the decision to admit (a check-only decision: cost 0, need 1).
local function decide_window(kb, kz, P, marker, born, now, cost, cost_str, need)
  need = need or cost
  local W = P.W
  local L = P.C * P.base / U
  local rend = rec_end(born, P)
  if P.alg == 'sliding_log' then
    local hb = redis.call('HMGET', kb, 'inc', 'xe', 'dg', 'de')
    local bk = { hb[2], hb[3], hb[4], hb[1] ~= false }
    local same = hb[1] == marker
    local sum, first = 0, nil
    if same then
      local raw = redis.call('ZRANGEBYSCORE', kz, '(' .. fmt(now - W), '+inf', 'WITHSCORES')
      for i = 1, #raw, 2 do
        sum = sum + log_cost(raw[i])
        if not first then first = tonumber(raw[i + 1]) end
      end
    end
    local reset = 0
    if first then reset = first + W - now end
    if now < rend + W then
      return false, 0, rend + W - now, nil, bk
    end
    local allowed = sum + need <= L
    local after = sum
    if allowed then after = sum + cost end
    local rem = 0
    if after < L then rem = L - after end
    local commit = function()
      if not same then
        redis.call('DEL', kz)
        redis.call('HSET', kb, 'inc', marker)
      end
      local q = redis.call('HINCRBY', kb, 'q', 1)
      redis.call('ZADD', kz, now, q .. ':' .. cost_str)
      redis.call('ZREMRANGEBYSCORE', kz, '-inf', fmt(now - W))
      redis.call('PEXPIRE', kz, P.ttl)
      bk[4] = true
    end
    return allowed, rem, reset, commit, bk
  end
  local k = math.floor(now / W)
  local h = redis.call('HMGET', kb, 'inc', 'w', 'n', 'pn', 'xe', 'dg', 'de')
  local bk = { h[5], h[6], h[7], h[1] ~= false }
  local cur, prev = 0, 0
  if h[1] == marker then
    local w = tonumber(h[2])
    if w == k then
      cur, prev = tonumber(h[3]), tonumber(h[4]) or 0
    elseif w == k - 1 then
      prev = tonumber(h[3])
    end
  end
  local reset = (k + 1) * W - now
  if overlaps_recovery(k * W, W, born, rend) then
    return false, 0, reset, nil, bk
  end
  local used = cur
  if P.alg == 'sliding_window' then
    if overlaps_recovery((k - 1) * W, W, born, rend) then prev = L end
    used = prev * (W - (now - k * W)) / W + cur
  end
  local allowed = used + need <= L
  local after = used
  if allowed then after = used + cost end
  local rem = 0
  if after < L then rem = L - after end
  local commit = function()
    redis.call('HSET', kb, 'inc', marker, 'w', fmt(k), 'n', fmt(cur + cost), 'pn', fmt(prev))
    bk[4] = true
  end
  return allowed, rem, reset, commit, bk
end

-- Refund in a window (DESIGN §7: it erases the admission made at `admitted`): the count of the
-- admission's own window drops (≥ 0), a receipt of an earlier window changes nothing; the log
-- loses cost from the entries made at that instant, none once it left the window.
local function refund_window(kb, kz, P, marker, now, cost, admitted)
  local W = P.W
  if P.alg == 'sliding_log' then
    if admitted <= now - W then return end
    if redis.call('HGET', kb, 'inc') ~= marker then return end
    local raw = redis.call('ZRANGEBYSCORE', kz, fmt(admitted), fmt(admitted), 'WITHSCORES')
    local left = cost
    for i = 1, #raw, 2 do
      if left <= 0 then break end
      local c = log_cost(raw[i])
      redis.call('ZREM', kz, raw[i])
      if c <= left then
        left = left - c
      else
        local q = redis.call('HINCRBY', kb, 'q', 1)
        redis.call('ZADD', kz, raw[i + 1], q .. ':' .. fmt(c - left))
        left = 0
      end
    end
    return
  end
  local k = math.floor(now / W)
  if math.floor(admitted / W) ~= k then return end
  local h = redis.call('HMGET', kb, 'inc', 'w', 'n')
  if h[1] ~= marker or tonumber(h[2]) ~= k then return end
  local n = tonumber(h[3])
  if n > cost then n = n - cost else n = 0 end
  redis.call('HSET', kb, 'n', fmt(n))
end
