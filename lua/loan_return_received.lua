-- loan_return_received.lua (lender): a borrower returned its loan up to `seq`: settles, then drops
-- the staircase entries with seq ≤ it, freeing the reservation now.
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 borrower, 3 seq
-- Returns: {droppedEntries, nowUs}
local now = now_us()
local marker, _, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local borrower, seq = ARGV[2], tonumber(ARGV[3])
local _, born = marker_parts(marker)
local kl = key_of(KEYS[3], 'l')
local book = read_book(kl)
local list = book.out[borrower] or {}
local kept = {}
for _, e in ipairs(list) do
  if e.s > seq then kept[#kept + 1] = e end
end
if #kept == #list then return { 0, now } end
local B, R
if P.rate_alg then
  R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
  B = load_bucket(R, P, marker, born, now)
  B.book = B.book or book
  book = B.book
end
if #kept > 0 then book.out[borrower] = kept else book.out[borrower] = nil end
if B then
  apply_share_change(B, P, now)
  store_bucket(B, P)
  touch(R, P)
  flush(R)
end
write_book(kl, book, P, now)
mark_dirty(KEYS[3], P)
return { #list - #kept, now }
