-- lib/refunds.lua: what a refund of a rate-algorithm admission may give back (DESIGN §7: a refund
-- erases the admission it names). Erasing an admission of cost c made at t_a leaves the bucket
-- with min(c, smallest headroom C_i − tokens seen at any instant in [t_a, now]) more tokens: once
-- the bucket without it would have reached its capacity, the cap absorbed that refill.
--
-- P:b's bucket record (`rf`, the tail of field `v`) keeps that function of t_a with bounded state: entries (t_j, m_j), oldest
-- first, t and m both increasing; every admission at t_a ≤ t_j (and > t_{j−1}) has seen a
-- headroom of at most m_j/1000 tokens since. Observations (rf_note): just before each event
-- (at ts − 1, so the event's own admission is not covered by it), at the end of each settled
-- piece of the share schedule (headroom shrinks within a piece and may jump up at its end), and
-- after an event that lowered the headroom (a refund, a capacity clamp). Everything rounds
-- towards a smaller credit: m is floored to milli-tokens, a merge keeps the smaller headroom over
-- the longer range, a bucket rebuilt (new, other incarnation or policy) starts with a barrier
-- (headroom 0 before now). Stored in `v` as pairs d_j, m_j with d_j = ts − t_j (msgpack, exact).
-- Mirrors @geoquota/core reference/refunds.ts operation for operation.

-- At most RF_MAX entries: past it the two oldest merge (t2, m1).
local RF_MAX = 4

local function rf_milli(h)
  if not (h > 0) then return 0 end
  local q = math.floor(h * 1000)
  if q / 1000 > h then q = q - 1 end
  return q
end

-- Flat list t1, m1, t2, m2, … (absolute µs, milli-tokens) from P:b's `v` (lib/bucket.lua
-- encode_v: the pairs (ts − t_j, m_j) from its 7th value on).
local function rf_decode(v, ts)
  local L = {}
  for i = 7, #v, 2 do
    L[#L + 1] = ts - v[i]
    L[#L + 1] = v[i + 1]
  end
  return L
end

-- Headroom h at instant t: the entries it undercuts merge into one ending at the latest of them.
local function rf_note(L, t, h)
  local q = rf_milli(h)
  local n = #L
  -- Dominated: an entry as late with no more headroom already covers every admission up to t.
  if n > 0 and L[n - 1] >= t and L[n] <= q then return end
  local at = t
  while n > 0 and L[n] >= q do
    if L[n - 1] > at then at = L[n - 1] end
    L[n] = nil
    L[n - 1] = nil
    n = n - 2
  end
  L[n + 1] = at
  L[n + 2] = q
  if n + 2 > 2 * RF_MAX then
    L[4] = L[2]
    table.remove(L, 1)
    table.remove(L, 1)
  end
end

-- After an event: noted only when it lowered the headroom below the latest entry.
local function rf_note_low(L, t, h)
  local n = #L
  if n == 0 or rf_milli(h) < L[n] then rf_note(L, t, h) end
end

-- The most a refund of an admission at `ta` may give back besides its cost (math.huge: no
-- observation since it).
local function rf_floor(L, ta)
  for i = 1, #L, 2 do
    if L[i] >= ta then return L[i + 1] / 1000 end
  end
  return math.huge
end

-- After erasing `cost` admitted at `ta`: the bucket without it saw, at every instant since, a
-- headroom up to `cost` smaller (exactly `cost` smaller when the refund came back in full), never
-- below 0; entries then no smaller than a later one merge into it. Returns the new list.
local function rf_erase(L, ta, cost)
  local d = math.ceil(cost * 1000)
  for i = 1, #L, 2 do
    if L[i] >= ta then
      local m = L[i + 1] - d
      if m < 0 then m = 0 end
      L[i + 1] = m
    end
  end
  local keep, lo = {}, math.huge
  for i = #L - 1, 1, -2 do
    if L[i + 1] < lo then
      lo = L[i + 1]
      keep[#keep + 1] = i
    end
  end
  local R = {}
  for j = #keep, 1, -1 do
    R[#R + 1] = L[keep[j]]
    R[#R + 1] = L[keep[j] + 1]
  end
  return R
end
