-- loan_return_received.lua (lender): a borrower returned its loan up to `seq`: settles, then drops
-- the staircase entries with seq ≤ it, freeing the reservation now.
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember, 13 borrower, 14 seq
-- Returns: {droppedEntries, nowUs}
local now = now_us()
local P = read_policy(ARGV, 1)
local borrower, seq = ARGV[13], tonumber(ARGV[14])
local marker = ensure_marker(KEYS[1], KEYS[8], now)
local _, born = marker_parts(marker)
local book = read_book(KEYS[5])
local list = book.out[borrower] or {}
local kept = {}
for _, e in ipairs(list) do
  if e.s > seq then kept[#kept + 1] = e end
end
if #kept == #list then return { 0, now } end
local B
if P.rate_alg then
  B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
  B.book = B.book or book
  book = B.book
end
if #kept > 0 then book.out[borrower] = kept else book.out[borrower] = nil end
if B then
  apply_share_change(B, P, now)
  store_bucket(B, P)
  touch(KEYS[3], KEYS[4], P)
end
write_book(KEYS[5], book, P, now)
mark_dirty(KEYS[2], P.member, P.ttl)
return { #list - #kept, now }
