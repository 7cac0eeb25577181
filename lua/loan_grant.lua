-- loan_grant.lua (lender): lends `units` ppm of this region's own base to `borrower` until now + D.
-- Refused while recovering (it may have forgotten loans), for window algorithms, to itself, when
-- the region would fall below its floor (borrowed units never count: trap 3), and when the share
-- left would not back this region's outstanding in-process leases at some instant until they
-- expire (leases pin share, DESIGN §3). The duration is capped at D. seq =
-- max(now, last seq + 1), so it keeps increasing across a state loss. Settles first (trap 11).
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 borrower, 3 units, 4 durationUs
-- Returns: {ok 0|1, reason ('' | recovering | algorithm | units | floor | leased | self), units, deadlineUs,
--           seq, nowUs}
local now = now_us()
local marker, _, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local borrower, units, dur = ARGV[2], tonumber(ARGV[3]), math.min(tonumber(ARGV[4]), P.D)
local _, born = marker_parts(marker)
local kl = key_of(KEYS[3], 'l')
local function refuse(reason)
  return { 0, reason, 0, 0, 0, now }
end
if borrower == ARGV[1] then return refuse('self') end
if now < rec_end(born, P) then return refuse('recovering') end
if not P.rate_alg then return refuse('algorithm') end
if not units or units <= 0 or units ~= math.floor(units) then return refuse('units') end
local book = read_book(kl)
local current = reserved_at(book.out[borrower], now, P.eps)
local needed = units
if current > needed then needed = current end
local others = 0
for b, list in pairs(book.out) do
  if b ~= borrower then others = others + reserved_at(list, now, P.eps) end
end
if needed > P.base - others - P.floor then return refuse('floor') end
-- Leases pin share: the schedule with the new grant must back this region's outstanding leases at
-- every instant until they expire (tried on the staircase, nothing written on a refusal).
local function staircase(list, u, d)
  local stair = {}
  for _, e in ipairs(list or {}) do
    if e.u > u or e.d > d then stair[#stair + 1] = e end
  end
  return stair
end
local held = book.out[borrower]
local trial = staircase(held, units, now + dur)
trial[#trial + 1] = { u = units, d = now + dur, s = 0 }
book.out[borrower] = trial
local backed = pins_hold(book, read_leases(key_of(KEYS[3], 'k')), P, rec_end(born, P), hold_end(born, P), now)
book.out[borrower] = held
if not backed then return refuse('leased') end
local R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
local B = load_bucket(R, P, marker, born, now)
B.book = B.book or book
book = B.book
drop_lapsed(book, now, P.eps)
local seq = book.sq + 1
if now > book.sq then seq = now end
local loan = { u = units, d = now + dur, s = seq }
book.sq = seq
book.granted[borrower] = loan
local stair = staircase(book.out[borrower], loan.u, loan.d)
stair[#stair + 1] = loan
book.out[borrower] = stair
apply_share_change(B, P, now)
store_bucket(B, P)
touch(R, P)
flush(R)
write_book(kl, book, P, now)
mark_dirty(KEYS[3], P)
return { 1, '', units, loan.d, seq, now }
