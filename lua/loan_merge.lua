-- loan_merge.lua (borrower): merges what gossip brought for one key: loan records addressed to this
-- region (each lender's highest seq wins; seq ≤ the returned seq is ignored: trap 12) and remote
-- CRDT counter entries (max per field). A loan change settles the bucket first (trap 11).
-- KEYS: 1 gq:inc, 2 gq:dg, 3 P:b, 4 gq:pv
-- ARGV: 1 region, 2 loanCount L, then L × (lender, units, deadlineUs, seq),
--       3+4L counterCount N, then N × (field, value)
-- Returns: {loansChanged, countersChanged, nowUs}
-- The CRDT register's join: higher seq wins; an equal seq with different
-- content keeps the smaller (units, deadline) (packages/crdt, LoanRegister).
local function loan_beats(c, h)
  if not h then return c.s > 0 end
  if c.s ~= h.s then return c.s > h.s end
  if c.u ~= h.u then return c.u < h.u end
  return c.d < h.d
end
local now = now_us()
local marker, _, pe = ensure_marker(KEYS[1], KEYS[2], KEYS[4], now)
local P = read_policy(KEYS[4], pe, KEYS[3])
local self = ARGV[1]
local _, born = marker_parts(marker)
local nl = tonumber(ARGV[2])
local co = 3 + 4 * nl
local nc = tonumber(ARGV[co])
local counters_changed = 0
-- The counters live in P:b (lib/keep.lua): this region's own replica of the current incarnation in
-- the record (a copy gossip brought back is merged there by max), every other as a named field.
local R = load_rec(KEYS[3], self, marker, P, { 'v', 'x' })
if nc > 0 then
  local own = {}
  for _, kind in ipairs({ 'p', 'n', 'd' }) do own[replica_field(kind, self, R.T)] = kind end
  local fields = {}
  for i = 1, nc do fields[i] = ARGV[co + 2 * i - 1] end
  local cur = redis.call('HMGET', KEYS[3], unpack(fields))
  for i = 1, nc do
    local f, v = fields[i], ARGV[co + 2 * i]
    local kind = own[f]
    if kind then
      if tonumber(v) > R[kind] then
        R[kind] = tonumber(v)
        R.cdirty = true
        counters_changed = counters_changed + 1
      end
    elseif tonumber(v) > (tonumber(R.named[f] or cur[i]) or 0) then
      R.named[f] = v
      counters_changed = counters_changed + 1
    end
  end
  if counters_changed > 0 then touch(R, P) end
end
local changed = 0
local stored = false
if nl > 0 then
  local kl = key_of(KEYS[3], 'l')
  local book = read_book(kl)
  local fresh = {}
  for i = 0, nl - 1 do
    local o = 3 + 4 * i
    local lender = ARGV[o]
    local l = { u = tonumber(ARGV[o + 1]), d = tonumber(ARGV[o + 2]), s = tonumber(ARGV[o + 3]) }
    local held = book.recv[lender]
    if lender ~= self and l.s > (book.ret[lender] or 0) and loan_beats(l, held) then
      fresh[#fresh + 1] = { lender = lender, l = l }
    end
  end
  if #fresh > 0 then
    local B
    if P.rate_alg then
      B = load_bucket(R, P, marker, born, now)
      B.book = B.book or book
      book = B.book
    end
    for i = 1, #fresh do
      local f = fresh[i]
      local held = book.recv[f.lender]
      if loan_beats(f.l, held) then
        book.recv[f.lender] = f.l
        changed = changed + 1
      end
    end
    if B then
      drop_lapsed(book, now, P.eps)
      apply_share_change(B, P, now)
      store_bucket(B, P)
      touch(R, P)
      stored = true
    end
    write_book(kl, book, P, now)
  end
end
if counters_changed > 0 or stored then flush(R) end
if changed > 0 or counters_changed > 0 then mark_dirty(KEYS[3], P) end
return { changed, counters_changed, now }
