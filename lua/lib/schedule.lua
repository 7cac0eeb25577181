-- lib/schedule.lua: the share schedule s(t), leased amounts, pins, sx encoding.

---------------------------------------------------------------- share schedule

-- s(t) of docs/internals.md, clamped to [0, U].
local function share_at(book, P, rend, hold, t)
  if t < rend then
    if t < hold then return 0 end
    return math.min(P.floor, P.base)
  end
  local s = P.base
  for _, list in pairs(book.out) do s = s - reserved_at(list, t, P.eps) end
  for j, l in pairs(book.recv) do
    if l.s > (book.ret[j] or 0) and t < l.d - P.eps then s = s + l.u end
  end
  if s < 0 then s = 0 end
  if s > U then s = U end
  return s
end

local function outstanding_at(leases, t)
  local o = 0
  for _, l in pairs(leases) do
    if t < l.e then o = o + l.g end
  end
  return o
end

-- Share held by quota assignments (RLQS) still live at t: their rate is out of the bucket's.
local function assigned_at(leases, t)
  local q = 0
  for _, l in pairs(leases) do
    if l.q and t < l.e then q = q + l.q end
  end
  return q
end

-- The bucket's own share at t: s(t) less what live assignments hold (DESIGN §11), never below 0
-- (pins keep it there: a shortfall is only reachable by state loss).
local function slice_at(book, leases, P, rend, hold, t)
  return math.max(0, share_at(book, P, rend, hold, t) - assigned_at(leases, t))
end

-- Every instant where s(t) or the leased amount may change without a script (unsorted).
local function schedule_points(book, leases, P, rend, hold)
  local pts = { rend, hold }
  for _, list in pairs(book.out) do
    for i = 1, #list do pts[#pts + 1] = list[i].d + P.eps end
  end
  for j, l in pairs(book.recv) do
    if l.s > (book.ret[j] or 0) then pts[#pts + 1] = l.d - P.eps end
  end
  for _, l in pairs(leases) do pts[#pts + 1] = l.e end
  return pts
end

-- Process leases pin share (DESIGN §3, @geoquota/core reference/schedule.ts pinsHold): with the records as they stand,
-- at now and at every change point before the last lease expiry, outstanding(t) ≤ C·s(t)/U.
local function pins_hold(book, leases, P, rend, hold, now)
  local maxe = nil
  for _, l in pairs(leases) do
    if l.e > now and (not maxe or l.e > maxe) then maxe = l.e end
  end
  if not maxe then return true end
  local function backed(t)
    return P.C * (share_at(book, P, rend, hold, t) - assigned_at(leases, t)) / U - outstanding_at(leases, t) >= 0
  end
  if not backed(now) then return false end
  local pts = schedule_points(book, leases, P, rend, hold)
  for i = 1, #pts do
    local t = pts[i]
    if t > now and t < maxe and not backed(t) then return false end
  end
  return true
end

-- Share and leased amount from `from` on, and every later change as a flat
-- array t1, s1, o1, t2, s2, o2, … (what P:b's `s`, `o`, `sx` hold).
local function build_schedule(book, leases, P, rend, hold, from)
  local pts = schedule_points(book, leases, P, rend, hold)
  local inside = {}
  for i = 1, #pts do
    if pts[i] > from then inside[#inside + 1] = pts[i] end
  end
  table.sort(inside)
  local s0, o0 = slice_at(book, leases, P, rend, hold, from), outstanding_at(leases, from)
  local sx, ps, po, last = {}, s0, o0, nil
  for i = 1, #inside do
    local t = inside[i]
    if t ~= last then
      last = t
      local s, o = slice_at(book, leases, P, rend, hold, t), outstanding_at(leases, t)
      if s ~= ps or o ~= po then
        sx[#sx + 1] = t
        sx[#sx + 1] = s
        sx[#sx + 1] = o
        ps, po = s, o
      end
    end
  end
  return s0, o0, sx
end

-- P:b's field `x`: the schedule's later changes t1, s1, o1, … as msgpack (exact doubles).
local function encode_sx(sx, from)
  return cmsgpack.pack(unpack(sx, from))
end

local function decode_sx(x)
  if not x then return {} end
  return { cmsgpack.unpack(x) }
end
