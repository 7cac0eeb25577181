-- refund.lua: gives `cost` of one admission back, named by its refund receipt, at most once (DESIGN §7).
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 cost, 3 receiptId, 4 admittedUs, 5 expiresUs
-- Returns: {status, remaining (integer or %.17g string), share, leased, recovering 0|1, nowUs, resetUs}
-- status 1: refunded: the admission is erased (DESIGN §7). Rate algorithms get back only what it still
-- keeps out of the bucket (lib/refunds.lua); windows: its own window's count drops (≥ 0), a log loses
-- the entry made at admittedUs; a receipt of an earlier window changes nothing. The layout of check.lua.
-- Refused, nothing written but a missing marker: -1 the receipt was used already, -2 TIME ≥ expiresUs,
-- -3 admitted before this incarnation was born (the bucket it came from was lost).
-- The caller verified the receipt (HMAC, region, key) and cost ≤ its cost. P:f (named from P:b)
-- remembers used receipts (member id, score expiresUs) until they expire, so each is refunded once.
local now = now_us()
local cost_str = ARGV[2]
local cost = tonumber(cost_str)
local expires = tonumber(ARGV[5])
local marker, gen, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local _, born = marker_parts(marker)
if tonumber(ARGV[4]) < born then return { -3, 0, 0, 0, 0, now, 0 } end
if now >= expires then return { -2, 0, 0, 0, 0, now, 0 } end
local kf = key_of(KEYS[3], 'f')
redis.call('ZREMRANGEBYSCORE', kf, '-inf', now)
if redis.call('ZADD', kf, 'NX', ARGV[5], ARGV[3]) == 0 then return { -1, 0, 0, 0, 0, now, 0 } end
-- The set outlives its latest receipt: NX sets a first expiry, GT only extends it.
local ttl = math.floor((expires - now) / 1000) + 1
redis.call('PEXPIRE', kf, ttl, 'NX')
redis.call('PEXPIRE', kf, ttl, 'GT')
local P = read_policy(KEYS[4], pe, KEYS[3])
local rec = 0
if now < rec_end(born, P) then rec = 1 end
local admitted = tonumber(ARGV[4])
if P.rate_alg then
  local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
  count(R, 'n', cost)
  local B = load_bucket(R, P, marker, born, now)
  local cap = P.C * B.s / U - B.o
  local credit = math.min(cost, cap - B.tk, rf_floor(B.rf, admitted))
  if credit > 0 then B.tk = math.min(cap, B.tk + credit) end
  B.rf = rf_erase(B.rf, admitted, cost)
  store_bucket(B, P)
  keep(R, P, now, gen)
  flush(R)
  return { 1, reply_num(B.tk), B.s, reply_num(B.o), rec, now, 0 }
end
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'w', 'q' })
count(R, 'n', cost)
refund_window(R, P, now, cost, admitted)
local _, rem, reset = decide_window(R, P, born, now, 0, '0')
keep(R, P, now, gen)
flush(R)
local share = P.base
if rec == 1 then share = 0 end
return { 1, reply_num(rem), share, 0, rec, now, reset }
