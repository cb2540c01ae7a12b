--[[
  Give up a claim so that a retry can run the handler again, only if the caller still owns it.
  Notifies waiting duplicates (see claim-1.lua): one of them claims the key next.

  Input:
    KEYS[1] record key
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
return 1
