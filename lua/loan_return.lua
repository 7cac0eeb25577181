-- loan_return.lua (borrower): returns early the loan held from `lender`: settles, stops using it
-- now and remembers its seq (r|lender) so that a late or duplicated copy is never used again
-- (trap 12). Refused, writing nothing, when the share left would not back the outstanding in-process
-- leases at some instant until they expire (leases pin share, DESIGN §3): they expire first, or
-- the loan lapses; and refused while recovering (DESIGN §4). The caller makes a return durable (WAIT) and only then tells the lender.
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 lender
-- Returns: {returnedSeq (0: nothing returned), nowUs, reason ('' | pinned | recovering)}
local now = now_us()
local marker, _, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local lender = ARGV[2]
local _, born = marker_parts(marker)
local kl = key_of(KEYS[3], 'l')
local book = read_book(kl)
local l = book.recv[lender]
if not l or l.s <= (book.ret[lender] or 0) then return { 0, now, '' } end
-- No early return while recovering: the wiped Redis no longer knows the leases its clients may
-- still hold on this borrowed share, so the pin check below would pass vacuously and the lender
-- would refill into share a client is still spending (found by the Spin model, model/). The loan
-- is not used in recovery anyway; it lapses at its deadline.
if now < rec_end(born, P) then return { 0, now, 'recovering' } end
if P.rate_alg then
  -- Leases pin share: refused (nothing written) when the share left would not back the outstanding
  -- in-process leases at some instant until they expire.
  local had = book.ret[lender]
  book.ret[lender] = l.s
  local backed = pins_hold(book, read_leases(key_of(KEYS[3], 'k')), P, rec_end(born, P), hold_end(born, P), now)
  book.ret[lender] = had
  if not backed then return { 0, now, 'pinned' } end
end
local B, R
if P.rate_alg then
  R = load_rec(KEYS[3], ARGV[1], marker, P, { 'v', 'x' })
  B = load_bucket(R, P, marker, born, now)
  B.book = B.book or book
  book = B.book
end
book.ret[lender] = l.s
if B then
  apply_share_change(B, P, now)
  store_bucket(B, P)
  touch(R, P)
  flush(R)
end
write_book(kl, book, P, now)
mark_dirty(KEYS[3], P)
return { l.s, now, '' }
