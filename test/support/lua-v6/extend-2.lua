--[[
  Renew the lease of a running handler (heartbeat), only if the caller still owns it. Its
  listing entry (see listing-index.lua) keeps the lease's end: if its process dies, it is stuck,
  or half done, from then.

  Input:
    KEYS[1] record key
    KEYS[2] the runs of the record's listing space (or KEYS[1]: no index)
    ARGV[1] owner token of the caller
    ARGV[2] new lease in milliseconds, counted from now

  Output:
    1 extended
    0 not the owner, or already completed: nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local value = rcall('GET', key)
if not value then
  return 0
end

local state, _, owner = cmsgpack.unpack(value)
if state ~= 'p' or owner ~= ARGV[1] then
  return 0
end

rcall('PEXPIRE', key, ARGV[2])
if KEYS[2] ~= key then
  --- @include listing-index
  local id = listingId(key)
  local entry = rcall('HGET', KEYS[2], id)
  if entry then
    local claimedAt, _, route, label, released, reported = cmsgpack.unpack(entry)
    entry = cmsgpack.pack(claimedAt, nowMs() + ARGV[2], route, label, released, reported)
    rcall('HSET', KEYS[2], id, entry)
  end
end
return 1
