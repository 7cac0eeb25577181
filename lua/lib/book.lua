-- lib/book.lua: loan records (P:l, the book) and process lease records (P:k).

---------------------------------------------------------------- loan records

local function parse_loan(s)
  local a, b, c = string.match(s, '^([^:]+):([^:]+):([^:]+)$')
  return { u = tonumber(a), d = tonumber(b), s = tonumber(c) }
end

local function loan_str(l)
  return fmt(l.u) .. ':' .. fmt(l.d) .. ':' .. fmt(l.s)
end

-- P:l as tables: out[borrower] = staircase, granted[borrower], recv[lender], ret[lender], sq.
local function read_book(kl)
  local book = { out = {}, granted = {}, recv = {}, ret = {}, sq = 0 }
  local raw = redis.call('HGETALL', kl)
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    local kind, who = string.sub(f, 1, 1), string.sub(f, 3)
    if kind == 'o' then
      local list = {}
      for e in string.gmatch(v, '[^,]+') do list[#list + 1] = parse_loan(e) end
      book.out[who] = list
    elseif kind == 'g' then
      book.granted[who] = parse_loan(v)
    elseif kind == 'i' then
      book.recv[who] = parse_loan(v)
    elseif kind == 'r' then
      book.ret[who] = tonumber(v)
    elseif f == 'sq' then
      book.sq = tonumber(v)
    end
  end
  return book
end

-- Rewrites P:l from the tables (small: one field per peer) with a TTL that
-- outlives every record: a key holding a loan never expires before it lapses.
local function write_book(kl, book, P, now)
  redis.call('DEL', kl)
  local args = { 'sq', fmt(book.sq) }
  local maxd = 0
  local function seen(l)
    if l.d > maxd then maxd = l.d end
  end
  for b, list in pairs(book.out) do
    local parts = {}
    for i = 1, #list do
      parts[i] = loan_str(list[i])
      seen(list[i])
    end
    if #parts > 0 then
      args[#args + 1] = 'o|' .. b
      args[#args + 1] = table.concat(parts, ',')
    end
  end
  for b, l in pairs(book.granted) do
    args[#args + 1] = 'g|' .. b
    args[#args + 1] = loan_str(l)
    seen(l)
  end
  for j, l in pairs(book.recv) do
    args[#args + 1] = 'i|' .. j
    args[#args + 1] = loan_str(l)
    seen(l)
  end
  for j, s in pairs(book.ret) do
    args[#args + 1] = 'r|' .. j
    args[#args + 1] = fmt(s)
  end
  redis.call('HSET', kl, unpack(args))
  local ttl = P.ttl
  local need = math.ceil((maxd + 2 * P.eps - now) / 1000) + 1000
  if need > ttl then ttl = need end
  redis.call('PEXPIRE', kl, ttl)
end

local function reserved_at(list, t, eps)
  local m = 0
  if list then
    for i = 1, #list do
      local e = list[i]
      if t < e.d + eps and e.u > m then m = e.u end
    end
  end
  return m
end

-- Drops what can no longer change the share (callers settle first).
local function drop_lapsed(book, now, eps)
  for b, list in pairs(book.out) do
    local kept = {}
    for i = 1, #list do
      if now < list[i].d + eps then kept[#kept + 1] = list[i] end
    end
    if #kept > 0 then book.out[b] = kept else book.out[b] = nil end
  end
  for j, l in pairs(book.recv) do
    if now >= l.d - eps and l.s > (book.ret[j] or 0) then book.recv[j] = nil end
  end
end

---------------------------------------------------------------- leases (P:k)

-- A quota assignment (RLQS, DESIGN §11, lua/assign_reserve.lua) lives in P:k beside the process
-- leases as `g:e:q:b`: g tokens of burst held like a lease's, until e, plus q ppm of share whose
-- rate (and capacity) the proxy holds until e; b is the burst granted (a supersede keeps it backed:
-- C·q/U + g ≥ b). It is never released before e. (`g:e:q`, without b: written before bursts were kept.)
local function parse_assignment(v)
  local g, e, q, b = string.match(v, '^([^:]+):([^:]+):([^:]+):?([^:]*)$')
  return { g = tonumber(g), e = tonumber(e), q = tonumber(q), b = tonumber(b) }
end

local function fmt_assignment(l)
  local v = fmt(l.g) .. ':' .. fmt(l.e) .. ':' .. fmt(l.q)
  if l.b then v = v .. ':' .. fmt(l.b) end
  return v
end

local function read_leases(kk)
  local leases = {}
  local raw = redis.call('HGETALL', kk)
  for i = 1, #raw, 2 do
    local g, e = string.match(raw[i + 1], '^([^:]+):([^:]+)$')
    if g then
      leases[raw[i]] = { g = tonumber(g), e = tonumber(e) }
    else
      leases[raw[i]] = parse_assignment(raw[i + 1])
    end
  end
  return leases
end
