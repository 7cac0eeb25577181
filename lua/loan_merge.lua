-- loan_merge.lua (borrower): merges what gossip brought for one key: loan records addressed to this
-- region (each lender's highest seq wins; seq ≤ the returned seq is ignored: trap 12) and remote
-- CRDT counter entries (max per field). A loan change settles the bucket first (trap 11).
-- KEYS: 1 gq:inc, 2 gq:dirty, 3 P:b, 4 P:c, 5 P:l, 6 P:k, 7 P:z, 8 gq:dg
-- ARGV: 1 region, 2 algorithm, 3 capacity, 4 refillPerSecond, 5 windowUs, 6 baseShare, 7 floorShare,
--       8 policyVersion, 9 epsilonUs, 10 loanDurationUs, 11 ttlMs, 12 dirtyMember,
--       13 loanCount L, then L × (lender, units, deadlineUs, seq),
--       14+4L counterCount N, then N × (field, value)
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
local P = read_policy(ARGV, 1)
local self = ARGV[1]
local marker = ensure_marker(KEYS[1], KEYS[8], now)
local _, born = marker_parts(marker)
local nl = tonumber(ARGV[13])
local co = 14 + 4 * nl
local nc = tonumber(ARGV[co])
local counters_changed = 0
if nc > 0 then
  local fields = {}
  for i = 1, nc do fields[i] = ARGV[co + 2 * i - 1] end
  local cur = redis.call('HMGET', KEYS[4], unpack(fields))
  local args = {}
  for i = 1, nc do
    local v = ARGV[co + 2 * i]
    if tonumber(v) > (tonumber(cur[i]) or 0) then
      args[#args + 1] = fields[i]
      args[#args + 1] = v
      cur[i] = v
      counters_changed = counters_changed + 1
    end
  end
  if #args > 0 then
    redis.call('HSET', KEYS[4], unpack(args))
    touch(KEYS[3], KEYS[4], P)
  end
end
local changed = 0
if nl > 0 then
  local book = read_book(KEYS[5])
  local fresh = {}
  for i = 0, nl - 1 do
    local o = 14 + 4 * i
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
      B = load_bucket(KEYS[3], KEYS[5], KEYS[6], P, marker, born, now)
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
      touch(KEYS[3], KEYS[4], P)
    end
    write_book(KEYS[5], book, P, now)
  end
end
if changed > 0 or counters_changed > 0 then mark_dirty(KEYS[2], P.member, P.ttl) end
return { changed, counters_changed, now }
