--[[
  Mark a half-done run reported abandoned (IdempotencyStore.markAbandoned), once: of any number
  of callers, in any number of processes, exactly one gets 1. The mark lives in the run's
  listing entry (see listing-index.lua); a claim of the key writes the entry anew, unmarked.

  Input:
    KEYS[1] record key
    KEYS[2] the runs of the record's listing space (or KEYS[1]: no index)
    KEYS[3] steps key (see claim-3.lua; or KEYS[1] where the key can have none)
    ARGV[1] ms since the epoch: the run's last claim must have ended at or before it

  Output:
    1 marked
    0 not half done (a claim holds the key, it completed, no steps are left, or it is not
      listed), its claim ended later, or marked already: nothing changed
]]
local rcall = redis.call
local key = KEYS[1]
if KEYS[2] == key or KEYS[3] == key or rcall('EXISTS', key) == 1
    or rcall('EXISTS', KEYS[3]) == 0 then
  return 0
end
--- @include listing-index
local id = listingId(key)
local entry = rcall('HGET', KEYS[2], id)
if not entry then
  return 0
end
-- Its claim ended when it was released, or when its lease ran out: its process died.
local claimedAt, leaseEnd, route, label, released, reported = cmsgpack.unpack(entry)
local ended = released > 0 and released or leaseEnd
if reported == 1 or ended > tonumber(ARGV[1]) then
  return 0
end
rcall('HSET', KEYS[2], id, cmsgpack.pack(claimedAt, leaseEnd, route, label, released, 1))
return 1
