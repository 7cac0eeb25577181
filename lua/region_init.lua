-- region_init.lua: incarnation marker handling (DESIGN §4).
--   ensure: create a new incarnation born now if the marker is missing (what every script does).
--   rotate: start a new incarnation born now unconditionally (the region enters recovery).
--   fresh:  only if no marker exists, create one born at 0 (no recovery, buckets start full): for a
--           cluster started from empty servers that provably never held state (see internals.md).
--   replid: compare the primary's replication id with the one stored in gq:rid; on a change (a
--           failover may have lost the last writes) rotate; a missing gq:rid next to an existing
--           marker is of unknown provenance and rotates too.
-- Each shard {s<k>} has its own gq:{s<k>}:inc and gq:{s<k>}:rid (the names below are the shard's);
-- the TypeScript side (replication.ts) calls this script once per shard.
-- KEYS: 1 gq:inc, 2 gq:rid
-- ARGV: 1 mode (ensure|rotate|fresh|replid), 2 replid ('' when unused), 3 freshId (fresh mode: the
--       marker id to use, so every shard of a fresh region gets one marker; '' = this TIME)
-- Returns: {marker, nowUs, changed 0|1 (rotated, or fresh marker created)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode, replid = ARGV[1], ARGV[2]
local marker = redis.call('GET', KEYS[1])
local function rotate()
  marker = string.format('%d:%d', now, now)
  redis.call('SET', KEYS[1], marker)
  return { marker, now, 1 }
end
if mode == 'rotate' then return rotate() end
if mode == 'fresh' then
  if marker then return { marker, now, 0 } end
  if ARGV[3] ~= '' then marker = ARGV[3] .. ':0' else marker = string.format('%d:0', now) end
  redis.call('SET', KEYS[1], marker)
  if replid ~= '' then redis.call('SET', KEYS[2], replid) end
  return { marker, now, 1 }
end
if mode == 'replid' then
  local stored = redis.call('GET', KEYS[2])
  if stored == replid then
    if marker then return { marker, now, 0 } end
    return rotate()
  end
  redis.call('SET', KEYS[2], replid)
  return rotate()
end
if marker then return { marker, now, 0 } end
return rotate()
