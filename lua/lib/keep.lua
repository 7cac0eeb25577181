-- lib/keep.lua: bookkeeping — change feed (gq:dirty), TTLs, CRDT counters, keep().

-- Change feed for the gossip daemon (scripts off the hot path: always SADD);
-- the set gets a TTL when a member is new.
local function mark_dirty(kd, member, ttl)
  if redis.call('SADD', kd, member) == 1 then
    redis.call('PEXPIRE', kd, ttl, 'NX')
    redis.call('PEXPIRE', kd, ttl, 'GT')
  end
end

-- P:b and P:c always get TTL 2·ttl (never P.ttl alone): every PEXPIRE of
-- either key then sets an expiry at least as late as any earlier one, so the
-- record keep() trusts (`xe`) can never be shortened by another script.
local function ttl2(P)
  return 2 * P.ttl
end

-- Scripts off the hot path: refresh both TTLs unconditionally.
local function touch(kb, kc, P)
  redis.call('PEXPIRE', kb, ttl2(P))
  redis.call('PEXPIRE', kc, ttl2(P))
end

-- Adds to an own CRDT counter. HINCRBY for a plain integer amount (cheaper:
-- no long-double parse/format, replicated as is); HINCRBYFLOAT when the
-- amount is fractional or the stored value is not an integer (a fractional
-- cost happened, or a merge wrote e.g. 1e+21). Same sums as the model while
-- they stay integers below 2^53. TTLs: keep() / touch().
local function count(kc, kind, region, id, amount_str)
  local f = kind .. '|' .. region .. '.' .. id
  if #amount_str < 16 and not string.find(amount_str, '[^0-9]') then
    if type(redis.pcall('HINCRBY', kc, f, amount_str)) == 'number' then return end
  end
  redis.call('HINCRBYFLOAT', kc, f, amount_str)
end

-- Hot-path bookkeeping of one key after a decision (TTLs and change feed;
-- not modelled, it never changes a decision). P:b keeps three fields:
--   xe: a lower bound (minus 1 s of slack for PEXPIRE's ms clock) of the
--       expiry last set on BOTH P:b and P:c, recorded only by a script that
--       wrote P:c (so both existed). While xe − now ≥ ttl, both keys still
--       outlive this write by ≥ ttl = C/r + D + 3ε + 1 s (DESIGN §4) and the
--       two PEXPIREs are skipped; otherwise both are set to 2·ttl, i.e. about
--       once per ttl per active key instead of on every decision.
--   dg, de: the drain generation `gq:dg` at this key's last SADD to
--       gq:dirty, and a lower bound of gq:dirty's expiry then. While gq:dg is
--       unchanged (no drain popped members since) and now < de (the set has
--       not expired), the key is still a member, so the SADD is skipped: the
--       change feed costs one SADD per key per drain round, not per decision.
-- has_b: P:b holds state (written by this script or before), so the fields
-- can be kept there; a denial on a missing bucket writes no P:b (it SADDs and
-- refreshes every time, as before). counted: this script wrote P:c.
local function keep(kb, kc, kd, P, now, gen, xe, dg, de, has_b, counted)
  local nt = not counted or not xe or tonumber(xe) - now < P.ttl * 1000
  local nd = dg ~= gen or not de or now >= tonumber(de)
  if not nt and not nd then return end
  if nt then
    redis.call('PEXPIRE', kb, ttl2(P))
    redis.call('PEXPIRE', kc, ttl2(P))
  end
  if nd then
    redis.call('SADD', kd, P.member)
    redis.call('PEXPIRE', kd, P.ttl, 'NX')
    redis.call('PEXPIRE', kd, P.ttl, 'GT')
  end
  if not has_b then return end
  local xe_new = fmt_int(now + (ttl2(P) - 1000) * 1000)
  local de_new = fmt_int(now + (P.ttl - 1000) * 1000)
  if nt and counted then
    if nd then
      redis.call('HSET', kb, 'xe', xe_new, 'dg', gen, 'de', de_new)
    else
      redis.call('HSET', kb, 'xe', xe_new)
    end
  elseif nd then
    redis.call('HSET', kb, 'dg', gen, 'de', de_new)
  end
end
