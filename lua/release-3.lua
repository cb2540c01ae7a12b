--[[
  Give up a claim so that a retry can run the handler again, only if the caller still owns it.
  Notifies waiting duplicates (see claim-2.lua): one of them claims the key next. In the listing
  index (see listing-index.lua) a run that left steps is half done from now on, listed as such
  while its steps last; any other claim's entry goes.

  Input:
    KEYS[1] record key
    KEYS[2] the runs of the record's listing space (or KEYS[1]: no index)
    KEYS[3] steps key (see claim-3.lua; or KEYS[1] where the key can have none)
    ARGV[1] owner token of the caller
    ARGV[2] how to notify waiters: 'PUBLISH', or 'SPUBLISH' on a Cluster

  Output:
    1 released
    0 not the owner, or already completed: nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
local value = rcall('GET', key)
if not value then
  return 0
end

local state, _, owner, waiting = cmsgpack.unpack(value)
if state ~= 'p' or owner ~= ARGV[1] then
  return 0
end

rcall('DEL', key)
if waiting == 1 then
  rcall(ARGV[2], key, 'r')
end

if KEYS[2] ~= key then
  --- @include listing-index
  local id = listingId(key)
  local entry = rcall('HGET', KEYS[2], id)
  if entry and KEYS[3] ~= key and rcall('EXISTS', KEYS[3]) == 1 then
    local claimedAt, leaseEnd, route, label = cmsgpack.unpack(entry)
    rcall('HSET', KEYS[2], id, cmsgpack.pack(claimedAt, leaseEnd, route, label, nowMs(), 0))
  elseif entry then
    rcall('HDEL', KEYS[2], id)
  end
end
return 1
