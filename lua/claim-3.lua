--[[
  Claim an idempotency key for a resumable run (option `resumable`): claim-2.lua, and in the same
  round trip the steps earlier runs recorded under the key, so that the run resumes after them.
  A run that is not resumable never runs this script: its claim costs what it always did.

  The steps live in a hash beside the record (see step-2.lua), not in it: they outlive the
  record's lease and its release, which is what a retry resumes from.
    'f'      fingerprint of the run that recorded them
    'n:<i>'  name of step i     'm:<i>'  its result's meta     'b:<i>'  its result's body

  Input:
    KEYS[1..2] as claim-2.lua
    KEYS[3] steps key: the record key and ':steps', so the same {hash tag} and Cluster slot
    ARGV[1..7] as claim-2.lua

  Output: as claim-2.lua, and
    1 claimed   { 1, steps }: steps as HGETALL returns the hash; element 2 is missing when there
                are none
    3 mismatch  also when the key is free but its steps were recorded under another fingerprint:
                the key carries the partial effects of another request
]]
local rcall = redis.call

-- claim-2.lua's text, as a function: the loader (redis-scripts.ts) puts it in place of the line
-- below, so both claims run one copy of the claim's logic.
local function claimRecord()
  --- @include claim-2
end

-- Before the claim, which writes: a mismatch must leave the key as it found it. A held or
-- completed record answers for itself (claim-2.lua compares its own fingerprint first).
local recorded = rcall('HGET', KEYS[3], 'f')
if recorded and ARGV[2] ~= '' and recorded ~= '' and recorded ~= ARGV[2]
    and rcall('EXISTS', KEYS[1]) == 0 then
  return {3}
end

local reply = claimRecord()
if reply[1] == 1 and recorded then
  reply[2] = rcall('HGETALL', KEYS[3])
end
return reply
