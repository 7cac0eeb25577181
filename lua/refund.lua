-- refund.lua: gives `cost` of one admission back, named by its refund receipt, at most once (DESIGN §7).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg, 9 P:f
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 cost,
--       14 receiptId, 15 admittedUs, 16 expiresUs
-- Returns: {status, remaining (integer or %.17g string), share, leased, recovering 0|1, nowUs, resetUs}
-- status 1: refunded: the admission is erased (DESIGN §7). Rate algorithms get back only what it still
-- keeps out of the bucket (lib/refunds.lua); windows: its own window's count drops (≥ 0), a log loses
-- the entry made at admittedUs; a receipt of an earlier window changes nothing. The layout of check.lua.
-- Refused, nothing written but a missing marker: -1 the receipt was used already, -2 TIME ≥ expiresUs,
-- -3 admitted before this incarnation was born (the bucket it came from was lost).
-- The caller verified the receipt (HMAC, region, key) and cost ≤ its cost. P:f remembers used
-- receipts (member id, score expiresUs) until they expire, so each is refunded once.
local now = now_us()
local P = read_policy(ARGV, 1)
local cost_str = ARGV[13]
local cost = tonumber(cost_str)
local expires = tonumber(ARGV[16])
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local id, born = marker_parts(marker)
if tonumber(ARGV[15]) < born then return { -3, 0, 0, 0, 0, now, 0 } end
if now >= expires then return { -2, 0, 0, 0, 0, now, 0 } end
redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now)
if redis.call('ZADD', KEYS[9], 'NX', ARGV[16], ARGV[14]) == 0 then return { -1, 0, 0, 0, 0, now, 0 } end
-- The set outlives its latest receipt: NX sets a first expiry, GT only extends it.
local ttl = math.floor((expires - now) / 1000) + 1
redis.call('PEXPIRE', KEYS[9], ttl, 'NX')
redis.call('PEXPIRE', KEYS[9], ttl, 'GT')
local rec = 0
if now < rec_end(born, P) then rec = 1 end
local admitted = tonumber(ARGV[15])
count(KEYS[4], 'n', ARGV[1], id, cost_str)
if P.rate_alg then
  local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  local cap = P.C * B.s / U - B.o
  local credit = math.min(cost, cap - B.tk, rf_floor(B.rf, admitted))
  if credit > 0 then B.tk = math.min(cap, B.tk + credit) end
  B.rf = rf_erase(B.rf, admitted, cost)
  store_bucket(B, P)
  keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, B.has, true)
  return { 1, reply_num(B.tk), B.s, reply_num(B.o), rec, now, 0 }
end
refund_window(KEYS[3], KEYS[7], P, marker, now, cost, admitted)
local _, rem, reset, _, bk = decide_window(KEYS[3], KEYS[7], P, marker, born, now, 0, '0')
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, bk[1], bk[2], bk[3], bk[4], true)
local share = P.base
if rec == 1 then share = 0 end
return { 1, reply_num(rem), share, 0, rec, now, reset }
