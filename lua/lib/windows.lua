-- lib/windows.lua: fixed/sliding window decisions and refunds.

---------------------------------------------------------------- windows

local function overlaps_recovery(start, W, born, rend)
  return start < rend and start + W > born
end

local function log_cost(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

-- Window decision (static base slice) on record R (lib/keep.lua load_rec with fields w, q). P:b's
-- `w` (fixed/sliding window): msgpack window index, count, previous window's count; `q` (sliding
-- log): msgpack member sequence; the log itself is P:z (score: admission µs, member <q>:<cost>).
-- Both belong to R's incarnation (load_rec drops w, and P:z of another one is dropped: R.drop_log). Returns allowed,
-- remaining, reset µs, and a commit function that records the admission in R (written by flush;
-- P:z at once, with its TTL). `need` (default cost): what the window must still hold for the
-- decision to admit (a check-only decision: cost 0, need 1).
local function decide_window(R, P, born, now, cost, cost_str, need)
  need = need or cost
  local W = P.W
  local L = P.C * P.base / U
  local rend = rec_end(born, P)
  if P.alg == 'sliding_log' then
    local kz = key_of(R.kb, 'z')
    local sum, first = 0, nil
    -- A log of another incarnation (R.drop_log: flush deletes it) counts nothing.
    local raw = {}
    if not R.drop_log then raw = redis.call('ZRANGEBYSCORE', kz, '(' .. fmt(now - W), '+inf', 'WITHSCORES') end
    for i = 1, #raw, 2 do
      sum = sum + log_cost(raw[i])
      if not first then first = tonumber(raw[i + 1]) end
    end
    local reset = 0
    if first then reset = first + W - now end
    if now < rend + W then
      return false, 0, rend + W - now, nil
    end
    local allowed = sum + need <= L
    local after = sum
    if allowed then after = sum + cost end
    local rem = 0
    if after < L then rem = L - after end
    local commit = function()
      local q = 1
      if R.f.q then q = cmsgpack.unpack(R.f.q) + 1 end
      R.f.q = cmsgpack.pack(q)
      R.put.q = R.f.q
      if R.drop_log then
        redis.call('DEL', kz)
        R.drop_log = false
      end
      redis.call('ZADD', kz, now, q .. ':' .. cost_str)
      redis.call('ZREMRANGEBYSCORE', kz, '-inf', fmt(now - W))
      redis.call('PEXPIRE', kz, P.ttl)
    end
    return allowed, rem, reset, commit
  end
  local k = math.floor(now / W)
  local cur, prev = 0, 0
  if R.f.w then
    local w, n, pn = cmsgpack.unpack(R.f.w)
    if w == k then
      cur, prev = n, pn
    elseif w == k - 1 then
      prev = n
    end
  end
  local reset = (k + 1) * W - now
  if overlaps_recovery(k * W, W, born, rend) then
    return false, 0, reset, nil
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
    R.f.w = cmsgpack.pack(k, cur + cost, prev)
    R.put.w = R.f.w
  end
  return allowed, rem, reset, commit
end

-- Refund in a window (DESIGN §7: it erases the admission made at `admitted`): the count of the
-- admission's own window drops (≥ 0), a receipt of an earlier window changes nothing; the log
-- loses cost from the entries made at that instant, none once it left the window.
local function refund_window(R, P, now, cost, admitted)
  local W = P.W
  if P.alg == 'sliding_log' then
    if admitted <= now - W or R.drop_log then return end
    local kz = key_of(R.kb, 'z')
    local raw = redis.call('ZRANGEBYSCORE', kz, fmt(admitted), fmt(admitted), 'WITHSCORES')
    local left = cost
    for i = 1, #raw, 2 do
      if left <= 0 then break end
      local c = log_cost(raw[i])
      redis.call('ZREM', kz, raw[i])
      if c <= left then
        left = left - c
      else
        local q = cmsgpack.unpack(R.f.q) + 1
        R.f.q = cmsgpack.pack(q)
        R.put.q = R.f.q
        redis.call('ZADD', kz, raw[i + 1], q .. ':' .. fmt(c - left))
        left = 0
      end
    end
    return
  end
  local k = math.floor(now / W)
  if math.floor(admitted / W) ~= k or not R.f.w then return end
  local w, n, pn = cmsgpack.unpack(R.f.w)
  if w ~= k then return end
  if n > cost then n = n - cost else n = 0 end
  R.f.w = cmsgpack.pack(w, n, pn)
  R.put.w = R.f.w
end
