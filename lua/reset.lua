-- reset.lua: restarts one key's state in this region EMPTY, never full (docs/design.md §3.4,
-- "Resetting a key"): what the key may still admit here drops to 0 now and refills from now at
-- the region's rate. It is an admission, by nobody, of everything the bucket (or window) holds:
-- it can only lower what the key admits, so the global bound holds; a reset to full would mint
-- a burst. Refunds of admissions made before it give nothing back (the bucket's refund record,
-- `rf` in P:b's `v`, restarts with a barrier at now: headroom 0 for every earlier admission).
-- Untouched: the CRDT counters (they only grow; peers would restore them), loans, leases
-- (in-process leases stay spendable until they end; the bucket keeps counting them).
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region
-- Returns: {before (string), after (string), share, nowUs}: what the key could admit here just
--          before and just after the reset
local now = now_us()
local marker, gen, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local _, born = marker_parts(marker)
if P.rate_alg then
  local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
  local B = load_bucket(R, P, marker, born, now)
  local before = B.tk
  if B.tk > 0 then B.tk = 0 end
  -- Nothing admitted up to now is kept out of the bucket any more: a barrier (lib/refunds.lua).
  B.rf = { now, 0 }
  store_bucket(B, P)
  keep(R, P, now, gen)
  flush(R)
  return { fmt(before), fmt(B.tk), B.s, now }
end
-- Windows: what is left of the current window is admitted now (the log gets one entry).
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'w', 'q' })
local _, rem, _, commit = decide_window(R, P, born, now, 0, '0')
if commit and rem > 0 then
  local _, _, _, fill = decide_window(R, P, born, now, rem, fmt(rem))
  if fill then fill() end
end
local _, after = decide_window(R, P, born, now, 0, '0')
keep(R, P, now, gen)
flush(R)
return { fmt(rem), fmt(after), P.base, now }
