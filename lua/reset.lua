-- reset.lua: restarts one key's state in this region EMPTY, never full (docs/design.md §3.4,
-- "Resetting a key"): what the key may still admit here drops to 0 now and refills from now at
-- the region's rate. It is an admission, by nobody, of everything the bucket (or window) holds:
-- it can only lower what the key admits, so the global bound holds; a reset to full would mint
-- a burst. Refunds of admissions made before it give nothing back (the bucket's refund list,
-- P:b field `rf`, restarts with a barrier at now: headroom 0 for every earlier admission).
-- Untouched: the CRDT counters (they only grow; peers would restore them), loans, leases
-- (in-process leases stay spendable until they end; the bucket keeps counting them).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember
-- Returns: {before (string), after (string), share, nowUs}: what the key could admit here just
--          before and just after the reset
local now = now_us()
local P = read_policy(ARGV, 1)
local marker, gen = ensure_marker(KEYS[1], KEYS[8], now)
local _, born = marker_parts(marker)
if P.rate_alg then
  local B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  local before = B.tk
  if B.tk > 0 then B.tk = 0 end
  -- Nothing admitted up to now is kept out of the bucket any more: a barrier (lib/refunds.lua).
  B.rf = { now, 0 }
  store_bucket(B, P)
  keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, B.xe, B.dg, B.de, true, false)
  return { fmt(before), fmt(B.tk), B.s, now }
end
-- Windows: what is left of the current window is admitted now (the log gets one entry).
local _, rem, _, commit, bk = decide_window(KEYS[3], KEYS[7], P, marker, born, now, 0, '0')
if commit and rem > 0 then
  local _, _, _, fill = decide_window(KEYS[3], KEYS[7], P, marker, born, now, rem, fmt(rem))
  if fill then fill() end
  bk[4] = true
end
local _, after = decide_window(KEYS[3], KEYS[7], P, marker, born, now, 0, '0')
keep(KEYS[3], KEYS[4], KEYS[2], P, now, gen, bk[1], bk[2], bk[3], bk[4], false)
return { fmt(rem), fmt(after), P.base, now }
