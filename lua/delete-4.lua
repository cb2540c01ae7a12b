--[[
  Delete a record whatever its state and owner (operators purging a response or freeing a
  stuck key), the steps recorded under its key (an operator freeing a key wants the next run to
  start from the first step), and its listing (see listing-index.lua). The owner of a deleted
  claim is fenced: its complete, extend and release find no record (or another owner's) and
  change nothing. Notifies the key's watchers, as release does, so that a waiting duplicate
  claims the key; always, not only when a waiter marked the record: an operator call can afford
  a message nobody reads.

  Input:
    KEYS[1] record key
    KEYS[2] the runs of the record's listing space (or KEYS[1]: no index)
    KEYS[3] its set of ttls: a completed record is in the done list of one of them (same space,
            same slot)
    KEYS[4] steps key (see claim-3.lua; or KEYS[1] where the key can have none)
    ARGV[1] how to notify waiters: 'PUBLISH', or 'SPUBLISH' on a Cluster

  Output:
    1 deleted a live record, or the steps of one that is gone (released, expired)
    0 neither: nothing changed (the entry of a stuck claim, whose record expired with its
      lease, goes all the same)
]]
local rcall = redis.call
local key = KEYS[1]

if KEYS[2] ~= key then
  --- @include listing-index
  local id = listingId(key)
  rcall('HDEL', KEYS[2], id)
  local value = rcall('GET', key)
  local state, _, _, _, completedAt = cmsgpack.unpack(value or cmsgpack.pack(''))
  if (state == 'c' or state == 'C') and completedAt then
    local space = string.sub(KEYS[3], 1, -5)
    for _, ttl in ipairs(rcall('SMEMBERS', KEYS[3])) do
      rcall('LREM', space .. 'done:' .. ttl, 1, completedAt .. id)
    end
  end
end

local steps = KEYS[4] ~= key and rcall('DEL', KEYS[4]) or 0
-- A body stored apart (see claim-2.lua), where a key can have one (where it can have steps: in its
-- slot): also one its record left behind (deleted by a release that did not know it).
if KEYS[4] ~= key then
  rcall('DEL', key .. ':b')
end
if rcall('DEL', key) == 0 then
  return steps
end
rcall(ARGV[1], key, 'r')
return 1
