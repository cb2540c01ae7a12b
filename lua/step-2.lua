--[[
  Record a step of a resumable run (IdempotencyService.step), only if the caller still owns the
  pending record (fencing): a run that lost its lease must not record what the owner that took
  over will do itself.

  The steps hash (fields: see claim-3.lua) expires as a whole, `retention` after its latest
  step: it outlives the lease and a release, so that a retry after a crash or a failure resumes;
  the completion of a resumable run (complete-5.lua) and an operator's delete (delete-4.lua)
  delete it.

  Input:
    KEYS[1] record key
    KEYS[2] steps key (see claim-3.lua)
    ARGV[1] owner token of the caller
    ARGV[2] step index (decimal)
    ARGV[3] step name
    ARGV[4] result meta
    ARGV[5] result body
    ARGV[6] retention of the steps in milliseconds

  Output:
    1 recorded (a step recorded again at its index replaces it)
    0 not the owner (lease expired, released, completed or taken over): nothing changed
]]
local rcall = redis.call
local value = rcall('GET', KEYS[1])
if not value then
  return 0
end

local state, fingerprint, owner = cmsgpack.unpack(value)
if state ~= 'p' or owner ~= ARGV[1] then
  return 0
end

local steps, i = KEYS[2], ARGV[2]
rcall('HSET', steps, 'n:' .. i, ARGV[3], 'm:' .. i, ARGV[4], 'b:' .. i, ARGV[5])
-- The steps keep the fingerprint they were recorded under; a run that compares none ('') does
-- not erase it, so a later request with another payload still finds them foreign.
if fingerprint ~= '' then
  rcall('HSET', steps, 'f', fingerprint)
else
  rcall('HSETNX', steps, 'f', '')
end
rcall('PEXPIRE', steps, ARGV[6])
return 1
